"""--sweep: one check per grid point, a table and plots against batch size; mode=compile
points time the compiled model; bad grids are bad usage."""

import json

import pytest
from check_support import cli, sweep_cli

from torchneuron.check import CheckUsageError, sweep


def test_sweep_grid_table_plots_and_json(tmp_path):
    svg, j = tmp_path / "s.svg", tmp_path / "s.json"
    code, out, err = sweep_cli(
        "mlp",
        ["batch=2,8", "dtype=float32", "mode=eager,compile"],
        "--sweep-plot",
        svg,
        "--json",
        j,
    )
    assert code == 0, out + err
    pts = json.loads(j.read_text())["points"]
    eager = [p for p in pts if p["mode"] == "eager"]
    assert [p["batch"] for p in eager] == [2, 8] and all(p["status"] == "pass" for p in eager)
    assert all(
        p["p50_s"] > 0 and p["peak_allocated_bytes"] > 0 and p["usd_per_million"] > 0 for p in eager
    )
    assert all(p["measured"] == "eager" for p in eager)
    # throughput is batch / p50 (a preemption spike moves the mean, not the median), and the
    # cost is the formula at that throughput: trn1.2xlarge's table price, the point's overhead
    from torchneuron.check.projection import cost

    price = cost.load_prices()["trn1.2xlarge"]["usd_per_hour"]
    for p in eager:
        assert p["throughput_samples_per_s"] == pytest.approx(p["batch"] / p["p50_s"], rel=1e-12)
        assert (
            p["throughput_basis"].startswith("batch / p50")
            and p["throughput_mean_samples_per_s"] > 0
        )
        assert p["usd_per_million"] == pytest.approx(
            price / 3600 * (1e6 / p["throughput_samples_per_s"] + p["overhead_s"] * 1e6 / 1_000_000)
        )
    assert "batch / p50" in out
    comp = [p for p in pts if p["mode"] == "compile"]
    if not sweep.compile_available():
        assert all(p["reason"] == "compile path not available" for p in comp)
        assert "compile path not available" in out
    else:  # the compiled model is what was timed, not eager's figures under a compile label
        assert [p["batch"] for p in comp] == [2, 8] and all(p["status"] == "pass" for p in comp), (
            comp
        )
        assert all(
            p["measured"] == "compiled" and p["compiled_graphs"] >= 1 and p["p50_s"] > 0
            for p in comp
        )
        assert all(p["graphs_ran_compiled"] == p["compiled_graphs"] for p in comp)  # none fell back
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
    path = os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "compile_models.py"
    )
    j = tmp_path / "s.json"
    code, out, err = sweep_cli(
        f"{path}:unlowerable",
        ["mode=eager,compile"],
        "--sweep-plot",
        tmp_path / "s.svg",
        "--json",
        j,
    )
    assert code == 1, out + err
    pts = {p["mode"]: p for p in json.loads(j.read_text())["points"]}
    assert pts["compile"]["status"] == "fail" and pts["compile"].get("p50_s") is None
    assert "igamma" in pts["compile"]["reason"], pts["compile"]


def test_repeated_sweep_axis_is_bad_usage():
    with pytest.raises(CheckUsageError, match="given twice"):
        sweep.parse(["batch=1", "batch=2"])
    code, out, err = cli("check", "mlp", "--sweep", "batch=1", "batch=2", "--iterations", "5")
    assert code == 2 and "batch= given twice" in err and out == "", out + err


@pytest.mark.parametrize(
    "opt,value",
    [
        ("--save-baseline", "b"),
        ("--baseline", "b"),
        ("--html", "r.html"),
        ("--junit", "r.xml"),
        ("--projection", None),
        ("--profile", None),
    ],
)
def test_options_a_sweep_ignores_are_bad_usage(tmp_path, opt, value):
    args = [opt] + ([str(tmp_path / value)] if value else [])
    code, out, err = sweep_cli("mlp", ["batch=1"], "--sweep-plot", tmp_path / "s.svg", *args)
    assert code == 2 and f"{opt} cannot be used with --sweep" in err, out + err
    assert out == "" and not (tmp_path / "s.svg").exists()  # checked before any point ran


@pytest.mark.parametrize("which", ["--json", "--sweep-plot"])
def test_sweep_output_paths_are_checked_before_running(tmp_path, which):
    paths = {"--json": tmp_path / "s.json", "--sweep-plot": tmp_path / "s.svg"}
    paths[which] = tmp_path / "missing" / ("s.json" if which == "--json" else "s.svg")
    code, out, err = sweep_cli(
        "mlp", ["batch=1"], "--json", paths["--json"], "--sweep-plot", paths["--sweep-plot"]
    )
    assert code == 2 and which in err and "does not exist" in err, out + err
    assert out == "" and not any(p.exists() for p in paths.values())


def test_sweep_plot_needs_a_format_matplotlib_writes(tmp_path):
    code, out, err = cli(
        "check",
        "mlp",
        "--sweep",
        "batch=1",
        "--iterations",
        "5",
        "--sweep-plot",
        tmp_path / "s.txt",
    )
    assert code == 2 and ".svg or .png" in err and out == "", out + err


def test_mode_option_with_a_sweep_is_bad_usage():
    # each point's mode is the grid's: --mode compile would have run eager points
    code, out, err = cli(
        "check", "mlp", "--sweep", "batch=2", "--mode", "compile", "--iterations", "5"
    )
    assert (
        code == 2 and "--mode compile cannot be used with --sweep" in err and "mode=compile" in err
    ), out + err


@pytest.mark.parametrize(
    "opt,value,axis", [("--batch-size", "4", "batch=1,2"), ("--dtype", "bfloat16", "dtype=float32")]
)
def test_an_option_the_grid_overrides_is_bad_usage(opt, value, axis):
    # the axis set it at every point: the option was silently ignored
    code, out, err = cli("check", "mlp", "--sweep", axis, opt, value, "--iterations", "5")
    assert code == 2 and f"{opt} cannot be used with the sweep axis {axis.split('=')[0]}=" in err, (
        out + err
    )


def test_model_name_after_the_sweep_items_is_the_model(tmp_path):
    # --sweep takes one or more items: the model name after them was read as an item
    j = tmp_path / "s.json"
    code, out, err = cli(
        "check",
        "--sweep",
        "batch=2",
        "mlp",
        "--iterations",
        "5",
        "--max-warmup",
        "5",
        "--sweep-plot",
        tmp_path / "s.svg",
        "--json",
        j,
    )
    assert code == 0, out + err
    pts = json.loads(j.read_text())["points"]
    assert [(p["batch"], p["status"]) for p in pts] == [(2, "pass")]
