"""--sweep: one check per grid point, a table and plots against batch size; mode=compile
reported as not available until the compile path exists; bad grids are bad usage."""
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
    if not sweep.compile_available():
        assert all(p["reason"] == "compile path not available" for p in pts if p["mode"] == "compile")
        assert "compile path not available" in out
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
