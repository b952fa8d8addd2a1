"""--sweep: one check per grid point, a table and plots against batch size; mode=compile
points time the compiled model; bad grids are bad usage."""
import json

import pytest

from check_support import cli
from torchneuron.check import CheckUsageError, sweep


def test_sweep_grid_table_plots_and_json(tmp_path):
    svg, j = tmp_path / "s.svg", tmp_path / "s.json"
    code, out, err = cli("check", "mlp", "--sweep", "batch=2,8", "dtype=float32", "mode=eager,compile",
                         "--iterations", "5", "--max-warmup", "5", "--sweep-plot", svg, "--json", j)
    assert code == 0, out + err
    pts = json.loads(j.read_text())["points"]
    eager = [p for p in pts if p["mode"] == "eager"]
    assert [p["batch"] for p in eager] == [2, 8] and all(p["status"] == "pass" for p in eager)
    assert all(p["p50_s"] > 0 and p["peak_allocated_bytes"] > 0 and p["usd_per_million"] > 0 for p in eager)
    assert all(p["measured"] == "eager" for p in eager)
    comp = [p for p in pts if p["mode"] == "compile"]
    if not sweep.compile_available():
        assert all(p["reason"] == "compile path not available" for p in comp)
        assert "compile path not available" in out
    else:   # the compiled model is what was timed, not eager's figures under a compile label
        assert [p["batch"] for p in comp] == [2, 8] and all(p["status"] == "pass" for p in comp), comp
        assert all(p["measured"] == "compiled" and p["compiled_graphs"] >= 1 and p["p50_s"] > 0 for p in comp)
    text = svg.read_text()
    assert text.startswith("<?xml") and "batch size" in text and "USD per 1M samples" in text


def test_bad_sweep_is_bad_usage():
    with pytest.raises(CheckUsageError, match="AXIS"):
        sweep.parse(["size=1,2"])
    with pytest.raises(CheckUsageError, match="integers"):
        sweep.parse(["batch=a"])
    with pytest.raises(CheckUsageError, match="dtype"):
        sweep.parse(["dtype=float8"])
    code, _, err = cli("check", "mlp", "--sweep", "mode=jit")
    assert code == 2 and "eager or compile" in err


def test_sweep_compile_point_that_fails_to_compile_is_a_failure_not_eager_figures(tmp_path):
    import os

    if not sweep.compile_available():
        pytest.skip("no compile path in this build")
    path = os.path.join(os.path.dirname(__file__), "fixtures", "compile_models.py")
    j = tmp_path / "s.json"
    code, out, err = cli("check", f"{path}:unlowerable", "--sweep", "mode=eager,compile", "--iterations", "5",
                         "--max-warmup", "5", "--sweep-plot", tmp_path / "s.svg", "--json", j)
    assert code == 1, out + err
    pts = {p["mode"]: p for p in json.loads(j.read_text())["points"]}
    assert pts["compile"]["status"] == "fail" and pts["compile"].get("p50_s") is None
    assert "special_i1" in pts["compile"]["reason"], pts["compile"]
