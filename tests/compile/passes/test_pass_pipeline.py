"""passes/__init__.py's PIPELINE holds every pass of the four folders once, and the cache
key's fingerprint of the passes' source covers the folders (a changed pass must not
keep its old cache key)."""

from __future__ import annotations

import shutil
from pathlib import Path

import torchneuron.compiler.graph_key as graph_key
from torchneuron.compiler.passes import PIPELINE

PASSES = Path(graph_key.__file__).parent / "passes"
GROUPS = ("semantics", "policy", "legalize", "performance")


def test_pipeline_runs_every_pass_once():
    files = sorted(p.stem for g in GROUPS for p in (PASSES / g).glob("*.py") if p.stem[0] != "_")
    names = [p.__name__ for p in PIPELINE]
    assert sorted(names) == files
    for p in PIPELINE:  # each from its own file, in its group's folder
        group = p.__module__.split(".")[-2]
        assert group in GROUPS and p.__module__.endswith(f".{group}.{p.__name__}")


def test_fingerprint_covers_the_pass_folders(tmp_path, monkeypatch):
    compiler = tmp_path / "compiler"
    shutil.copytree(PASSES.parent, compiler, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(graph_key, "__file__", str(compiler / "graph_key.py"))
    fingerprint = graph_key.passes_fingerprint.__wrapped__
    before = fingerprint()
    assert fingerprint() == before
    with open(compiler / "passes" / "policy" / "narrow_64bit.py", "a") as f:
        f.write("\n# changed\n")
    assert fingerprint() != before
