"""The exact quantities in the reports: the per-pass section of the HTML and the terminal, the
eager projection beside the compiled one (--projection)."""

import pytest
from check_support import FAST_KW, fixture, result
from rich.console import Console

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
    ep = good["exact"]["eager"]["projection"]["trn2"]
    assert ep["launches"] == 3 and ep["latency_s"] > 3 * ep["launch_us"] * 1e-6
    assert "eager pass (kernel trace, 3 launches)" in text
    assert "compiled pass + 1 launch(es) x 20 µs (assumed)" in text
    assert "Per forward pass: what the device ran" in text
