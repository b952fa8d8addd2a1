"""The exact quantities in the reports: the per-pass section of the HTML and the terminal, the
eager projection beside the compiled one (--projection)."""

import pytest
from check_support import FAST_KW, fixture, result
from rich.console import Console

from torchneuron.check.projection.kernels import DEFAULT_LAUNCH_US
from torchneuron.check.report import html as report_html
from torchneuron.check.report import terminal


@pytest.fixture(scope="module")
def good():
    pytest.importorskip("torch_mlir")
    return result(fixture("good"), projection=True, **FAST_KW)


def test_html_has_the_kernels_by_op_eager_and_compiled(good):
    page = report_html.render(good)
    assert '<h2 id="per-pass">' in page
    # Small: two Linear layers and a ReLU eagerly, one graph compiled
    assert "<td>aten::addmm</td><td>2</td><td>0</td>" in page
    assert "<td>compiled graph executions</td><td>0</td><td>1</td>" in page


def test_terminal_shows_the_eager_projection_beside_the_compiled_one(good):
    con = Console(record=True, width=200)
    terminal.render(good, con, details=True)
    text = con.export_text()
    ep = good.exact.eager_projection()
    assert ep["launches"] == 3 and ep["latency_s"] > 3 * ep["launch_us"] * 1e-6
    assert "eager pass (kernel trace, 3 launches)" in text
    # one graph: the StableHLO projection already holds its execution's fixed cost
    assert f"compiled pass (+ 0 more graph launch(es) x {DEFAULT_LAUNCH_US:g} µs)" in text
    assert "Per forward pass: what the device ran" in text


def test_compiled_pass_adds_the_launches_of_further_graphs():
    from torchneuron.check.report import summary
    from torchneuron.check.result import CheckResult
    from torchneuron.check.result_exact import ExactResult
    from torchneuron.check.result_projection import ProjectionResult

    proj = ProjectionResult(status="pass", trn2={"latency_s_per_core": 100e-6})
    eager = {"projection": {"trn2": {"launch_us": 83.0}}}
    one = CheckResult(
        projection=proj, exact=ExactResult("pass", eager=eager, compiled={"graphs": 1})
    )
    three = CheckResult(
        projection=proj, exact=ExactResult("pass", eager=eager, compiled={"graphs": 3})
    )
    # the StableHLO projection holds one execution; a pass split in three pays two more
    assert summary.compiled_pass_s(one) == 100e-6
    assert abs(summary.compiled_pass_s(three) - (100e-6 + 2 * 83e-6)) < 1e-12
    assert summary.compiled_pass_s(CheckResult(projection=ProjectionResult("skipped"))) is None
