"""Shared helpers of the tests/check/ files: in-process CLI runs and a cache of
check results, so each expensive check (minilm) runs once per test session."""

from __future__ import annotations

import ast
import contextlib
import functools
import glob
import io
import os

from torchneuron.check import CheckConfig, run
from torchneuron.check.result import CheckResult
from torchneuron.cli import main

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
#: The factories of the check tests, one file a subject (fixture() finds a name's file).
CHECK_FIXTURES = sorted(glob.glob(os.path.join(FIXTURES, "check_*.py")))
#: The factories that break the factory contract (usage errors).
USAGE = os.path.join(FIXTURES, "check_usage.py")

#: Lean settings for the tests: the machine is shared and small.
FAST = ["--iterations", "20", "--max-warmup", "30"]
FAST_KW = dict(iterations=20, max_warmup=30)
MINILM = ["--batch-size", "4", "--iterations", "5", "--max-warmup", "5"]
MINILM_KW = dict(batch_size=4, iterations=5, max_warmup=5)
#: A sweep's lean settings (every grid point runs a check).
SWEEP_FAST = ["--iterations", "5", "--max-warmup", "5"]


@functools.cache
def _fixture_files() -> dict[str, str]:
    """Each top-level name of the check_*.py fixtures -> the one file that defines it."""
    where: dict[str, str] = {}
    for path in CHECK_FIXTURES:
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            else:
                continue
            for name in names:
                assert name not in where, f"{name} is defined in {where[name]} and {path}"
                where[name] = path
    return where


def fixture(name: str) -> str:
    """``path/to/check_<subject>.py:name``: the fixture file that defines ``name``."""
    return f"{_fixture_files()[name]}:{name}"


@functools.cache
def fallback_op() -> str | None:
    """The torch function the ``falls_back`` fixture uses (None: every candidate is native now)."""
    import importlib.util

    path = _fixture_files()["fallback_op"]
    spec = importlib.util.spec_from_file_location("check_inference_fixture", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.fallback_op()


def needs_fallback_op() -> str:
    """The fallback op's name, or skip the test."""
    import pytest

    op = fallback_op()
    if op is None:
        pytest.skip("every candidate operator has a native kernel now")
    return op


def cli(*argv: str) -> tuple[int, str, str]:
    """Run ``torchneuron`` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def sweep_cli(model: str, axes: list, *options) -> tuple[int, str, str]:
    """``torchneuron check MODEL --sweep AXES... OPTIONS`` with SWEEP_FAST, in this process."""
    return cli("check", model, "--sweep", *axes, *SWEEP_FAST, *options)


@functools.cache
def _cached(model: str, items: tuple) -> CheckResult:
    return run(CheckConfig(model=model, progress=False, **dict(items)))


def result(model: str, **kw) -> CheckResult:
    """A check result (library call), cached per (model, options) for the session.
    Treat it as read-only."""
    return _cached(model, tuple(sorted(kw.items())))
