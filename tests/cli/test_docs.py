"""The README and the user guides: the README fits two screens (at most 200 lines), every
relative link of the README and of docs/ leads to a file, and the README's example runs
as written."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import run_python

REPO = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _docs() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def test_readme_fits_two_screens():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 200, len(lines)


def test_every_relative_link_resolves():
    broken = []
    for doc in _docs():
        for target in LINK.findall(doc.read_text()):
            if re.match(r"[a-z]+://", target):
                continue
            if not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(REPO)} -> {target}")
    assert not broken, broken


def test_readme_guides_are_linked():
    readme = (REPO / "README.md").read_text()
    guides = [p for p in (REPO / "docs").glob("*.md")]
    assert guides
    missing = [p.name for p in guides if f"(docs/{p.name})" not in readme]
    assert not missing, missing


def test_readme_example_runs():
    readme = (REPO / "README.md").read_text()
    m = re.search(r"<!-- readme-example -->\s*```python\n(.*?)```", readme, re.S)
    assert m, "README has no example"
    assert len(m.group(1).strip().splitlines()) <= 10
    out = run_python(m.group(1), timeout=240).stdout
    diff = float(re.search(r"max difference: (\S+)", out).group(1))
    assert diff < 1e-4, out
    assert "CPU fallbacks: {}" in out, out  # the example's operators all run natively


def test_check_guide_is_short_and_documents_every_option():
    """docs/check.md is a user's guide (at most 500 lines; the measurement notes are in
    docs/design/), and names every option of `torchneuron check`."""
    from torchneuron.cli import build_parser

    text = (REPO / "docs" / "check.md").read_text()
    assert len(text.splitlines()) <= 500, len(text.splitlines())
    sub = next(a for a in build_parser()._actions if hasattr(a, "choices") and a.choices)
    options = {
        o for a in sub.choices["check"]._actions for o in a.option_strings if o.startswith("--")
    }
    assert "--details" in options and "--gate-host-latency" in options
    missing = [
        o for o in sorted(options - {"--help"}) if not re.search(rf"(?<![\w-]){o}(?![\w-])", text)
    ]
    assert not missing, missing


def test_readme_first_screen_shows_the_trainer_example():
    first = "\n".join((REPO / "README.md").read_text().splitlines()[:40])
    block = re.search(r"```python\n(.*?)```", first, re.S)
    assert block and "Trainer(" in block.group(1) and ".train()" in block.group(1), first
    assert len(block.group(1).strip().splitlines()) <= 10
    assert "examples/trainer_finetune.py" in first
    assert (REPO / "examples" / "trainer_finetune.py").exists()


def test_environment_md_lists_every_variable_the_code_reads():
    """Every TORCHNEURON_*/TORCH_NEURONX_* name read through the environment in the
    sources is in docs/environment.md (which says it lists them all)."""
    read = re.compile(
        r"""(?:getenv|environ(?:\.get|\.setdefault)?)\(?\[?\s*["']((?:TORCHNEURON|TORCH_NEURONX)_[A-Z0-9_]+)"""
    )
    names = set()
    for ext in ("py", "cpp", "h"):
        for f in [
            *(REPO / "torchneuron").rglob(f"*.{ext}"),
            *(REPO / "csrc").rglob(f"*.{ext}"),
            *(REPO / "torch_neuronx").rglob(f"*.{ext}"),
        ]:
            names |= set(read.findall(f.read_text(errors="ignore")))
    assert "TORCHNEURON_WARN_PER_OP" in names  # the scan finds C++ getenv too
    doc = (REPO / "docs" / "environment.md").read_text()
    assert not sorted(n for n in names if n not in doc)
