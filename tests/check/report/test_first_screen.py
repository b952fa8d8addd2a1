"""The report leads with the answer: the verdict first, one line per phase, the findings,
then where the details are; the dense tables only with --details; the HTML page in the same
order, with the kernel trace diff against a baseline as a table. One real check (cached),
then planted findings and regressions on copies of its result."""

import copy
import re

import pytest
from check_support import FAST_KW, fixture, result
from rich.console import Console

from torchneuron.check.baseline import exact as baseline_exact
from torchneuron.check.report import html as report_html
from torchneuron.check.report import summary, terminal
from torchneuron.check.result import CheckResult
from torchneuron.check.result_baseline import BaselineComparison


@pytest.fixture(scope="module")
def good():
    pytest.importorskip("torch_mlir")
    return result(fixture("good"), projection=True, **FAST_KW)


def _screen(r: CheckResult, details: bool = False, width: int = 140) -> str:
    con = Console(record=True, width=width, highlight=False)
    terminal.render(r, con, details=details)
    return con.export_text()


def _lines(text: str) -> list[str]:
    return [ln.rstrip() for ln in text.splitlines() if ln.strip()]


def test_verdict_first_then_phases_findings_pointer(good):
    text = _screen(good)
    lines = _lines(text)
    name = good.model["name"]
    assert lines[0].startswith(f"PASS torchneuron check {name} · exit code 0: every phase passed")
    assert lines[1] == summary.EXIT_CODES
    order = [
        text.index("\nPhases\n"),
        text.index(" run "),
        text.index(" accuracy "),
        text.index(" performance "),
        text.index("\nFindings\n"),
        text.index("\nDetails\n"),
        text.index("--details prints the full tables"),
    ]
    assert order == sorted(order), order
    # the pointer names the other outputs, and how to get them when not asked for
    assert "HTML report: --html FILE" in text and "JSON (the whole result): --json FILE" in text
    # the dense tables are not on the first screen
    for dense in ("median paired", "Phase 1 — does it run", "RMSE dev/fp64", "Cost per million"):
        assert dense not in text, dense


def test_first_screen_fits_100_columns(good):
    too_wide = [ln for ln in _lines(_screen(good, width=160)) if len(ln) > 100]
    assert not too_wide, too_wide


def test_first_screen_lines_carry_no_trailing_spaces(good):
    # the phase and finding tables padded every cell to its column's width
    r = copy.deepcopy(good)
    r.model["description"] = "A model whose description is long enough to wrap. " * 3
    r.warnings = ["a warning long enough to wrap at a space, " * 4]
    text = _screen(r, width=100)
    padded = [ln for ln in text.splitlines() if ln != ln.rstrip()]
    assert not padded, padded
    # the description has its own lines; the batch, dtype and device line is whole
    batch = [ln for ln in text.splitlines() if ln.startswith("batch ")]
    assert len(batch) == 1 and batch[0].endswith(f"reference {r.config['reference']}"), batch


def test_performance_line_has_eager_and_compiled_projections(good):
    text = " ".join(_screen(good).split())  # rich wraps lines
    ep = good.exact.eager_projection()
    cp = summary.compiled_pass_s(good)
    # one graph: the StableHLO projection holds its one execution, nothing is added
    assert cp is not None and cp == good.projection.trn2["latency_s_per_core"]
    assert (
        f"projected Trainium2 per pass (ESTIMATE): eager {summary.us(ep['latency_s'])} "
        f"({ep['launches']} launches), compiled {summary.us(cp)}"
    ) in text
    assert "emulator host p50 (this host, not Trainium): eager" in text
    # throughput and cost of the projection are a finding
    assert "projected Trainium2 (ESTIMATE): compiled pass" in text and "samples/s per core" in text


def test_details_prints_the_tables_after_the_first_screen(good):
    text = _screen(good, details=True)
    assert _lines(text)[0].startswith(f"PASS torchneuron check {good.model['name']}")
    pointer = text.index("the full tables are below")
    for title in ("Phase 1 — does it run", "Phase 3 — stable performance", "Cost per million"):
        assert text.index(title) > pointer, title
    assert _lines(text)[-1].startswith("verdict: PASS (exit code 0)")


def _planted(good: CheckResult) -> CheckResult:
    r = copy.deepcopy(good)
    p1 = r.phase1
    p1.fallback["ops"] = {"aten::_fft_r2c": {"calls": 3, "seconds": 0.01, "share": 0.25}}
    p1.narrowing = {"aten::cumsum": 2}
    p1.compile.graph_breaks = 2
    p1.compile.break_reasons = [{"reason": "call to print()", "where": "model.py:12"}]
    p1.compile.recompiles = 1
    r.exact.eager["new_signatures"] = ["aten::addmm(f32[8, 64], f32[64, 32])"]
    r.config["html_path"], r.config["json_path"] = "out/report.html", "out/r.json"
    return r


def test_findings_name_the_actionable_problems_with_hints(good):
    text = " ".join(_screen(_planted(good)).split())
    findings = text[text.index(" Findings ") : text.index(" Details ")]
    assert "CPU fallback: aten::_fft_r2c (3 calls, 25.0% of device run time)" in findings
    assert "hint: each call copies its tensors to the host and back" in findings
    assert (
        "64-bit narrowing: aten::cumsum ×2" in findings and "TORCHNEURON_NARROW_64BIT" in findings
    )
    assert "graph breaks: 2: call to print() at model.py:12" in findings
    assert "recompiles: 1 on a repeated call" in findings
    assert "new kernel signatures after warm-up: eager: 1 (aten::addmm(" in findings
    assert "clean:" not in findings  # nothing left that is clean
    assert "HTML report: out/report.html" in text and "JSON: out/r.json" in text
    # a clean run gathers the zeros into one line
    clean = " ".join(_screen(good).split())
    assert "clean: no CPU fallback, no graph break, no recompile" in clean


def _regressed(good: CheckResult) -> CheckResult:
    """A re-check whose eager pass launches more addmm kernels than its baseline's."""
    r = copy.deepcopy(good)
    base = copy.deepcopy(r.exact)
    base.eager["kernels_by_op"]["aten::addmm"] = 1
    row = {
        "quantity": "eager device launches per pass",
        "baseline": 2,
        "current": 3,
        "limit": 2.2,
        "threshold": 0.1,
        "unit": "fraction",
        "regressed": True,
        "changed": True,
        "ops": ["aten::addmm x1 -> x2"],
    }
    msg = "regression: eager device launches per pass: 3 vs the baseline's 2 (threshold +10%)"
    r.baseline = BaselineComparison(
        "baselines/good",
        "2026-12-01",
        status="fail",
        regressions=[msg[len("regression: ") :]],
        exact={
            "rows": [row],
            "regressions": [msg],
            "notes": [],
            "by_op": {"eager": baseline_exact.by_op_table(base.eager, r.exact.eager)},
        },
    )
    r.verdict, r.exit_code, r.failures = "fail", 1, [msg]
    return r


def test_a_regression_leads_the_screen(good):
    text = _screen(_regressed(good))
    lines = _lines(text)
    name = good.model["name"]
    assert lines[0].startswith(
        f"REGRESSION torchneuron check {name} · exit code 1: 1 regression(s)"
    )
    bullet = text.index("• regression: eager device launches per pass: 3 vs the baseline's 2")
    assert bullet < text.index(summary.EXIT_CODES) < text.index("\nPhases\n")
    assert re.search(r"baseline\s+REGRESSION\s+1 regression\(s\) against baselines/good", text)
    # a failure that is not a regression reads FAIL
    r = _regressed(good)
    r.failures.insert(0, "phase 2: 1 output(s) not accurate against cpu: output")
    assert _lines(_screen(r))[0].startswith(f"FAIL torchneuron check {name}")


def test_html_follows_the_same_order_with_the_kernel_diff(good):
    page = report_html.render(_regressed(good))
    order = [
        page.index('id="verdict"'),
        page.index('id="phases"'),
        page.index('id="findings"'),
        page.index('id="details"'),
        page.index('id="phase1"'),
        page.index('id="baseline"'),
        page.index('id="kernel-diff"'),
    ]
    assert order == sorted(order), order
    assert "<b>REGRESSION</b> — exit code 1" in page
    assert (
        '<tr class="changed"><td>aten::addmm</td><td class="num">1</td>'
        '<td class="num">2</td><td class="num">+1</td></tr>'
    ) in page
    assert "<td>aten::relu</td>" in page  # unchanged ops are listed too, unmarked
    # no baseline, no diff table
    assert 'id="kernel-diff"' not in report_html.render(good)


def test_a_device_warning_is_cut_at_its_first_sentence_not_at_an_abbreviation():
    w = (
        "Dynamo does not know how to trace the builtin `posix.getpid.` This function is "
        "either a Python builtin (e.g. _warnings.warn) or a third-party C/C++ extension."
    )
    assert terminal._first_sentence(w) == (
        "Dynamo does not know how to trace the builtin `posix.getpid.`"
    )
    assert terminal._first_sentence("Use a mask (e.g. this one). Then more.") == (
        "Use a mask (e.g. this one)."
    )
    assert terminal._first_sentence("x" * 300) == "x" * 200 + "..."
