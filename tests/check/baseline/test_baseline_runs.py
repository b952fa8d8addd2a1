"""torchneuron check, baselines measured in several processes (--baseline-runs): each
process's figures kept, re-checks read against their median, a regression needing its
interval past the spread between them (baseline_runs.py)."""

import json
import os

import numpy as np
import pytest
from check_support import FAST, cli

from torchneuron.check.baseline import runs as baseline_runs
from torchneuron.check.stats import perfstats


def _run(rng, device, reference=2.0, n=120):
    """Interleaved work-time samples as phase 3 keeps them (see tests/check/test_noisy_host._work_run)."""
    host = np.exp(rng.normal(0, 0.05, n))
    sides = {
        "device": device,
        "reference": reference,
        "calibration": 0.2,
        "calibration_matmul": 0.4,
        "device_calibration": 0.3,
    }
    cpu = {k: list(v * host * np.exp(rng.normal(0, 0.02, n))) for k, v in sides.items()}
    return {"cpu": cpu, "wall": {k: list(v) for k, v in cpu.items()}}


def _processes(values):
    return baseline_runs.summary([{"device_alone": v} for v in values])


def _decide(current, base, processes):
    c = perfstats.compare_work("device_alone", current, base, 0.10)
    return c["decision"], baseline_runs.adjust(c, "device_alone", processes, 0.10)


def test_a_slow_baseline_process_no_longer_hides_a_device_slowdown():
    # the saving process read the device 17 % slow (its offset); two fresh ones read it at 1.0:
    # a 20 % device slowdown read x1.03 against the saving process alone (a false pass)
    rng = np.random.default_rng(0)
    base, slower = _run(rng, 1.17 * 1.0), _run(rng, 1.20)
    procs = _processes([1.17 / 2, 1.0 / 2, 1.01 / 2])
    before, c = _decide(slower, base, procs)
    assert before == "pass"
    assert 1.15 < c["ci"]["ratio"] < 1.25 and c["decision"] != "pass"
    assert c["baseline_processes"]["values"] == procs["values"]["device_alone"]
    assert c["regression_above"] == pytest.approx(1.1 * np.exp(2 * procs["log_sd"]["device_alone"]))


def test_a_fast_baseline_process_no_longer_fails_an_unchanged_build():
    # the saving process read the device 13 % fast: an unchanged re-check read x1.15 (a false regression)
    rng = np.random.default_rng(1)
    base, same = _run(rng, 0.87), _run(rng, 1.0)
    procs = _processes([0.87 / 2, 1.0 / 2, 0.99 / 2])
    before, c = _decide(same, base, procs)
    assert before == "regressed"
    assert 0.97 < c["ci"]["ratio"] < 1.03 and c["decision"] == "pass"


def test_a_large_slowdown_is_still_caught_and_one_process_changes_nothing():
    rng = np.random.default_rng(2)
    base, slower = _run(rng, 1.0), _run(rng, 1.3)
    before, c = _decide(slower, base, _processes([0.5, 0.51, 0.49]))
    assert before == "regressed" and c["decision"] == "regressed"
    one = perfstats.compare_work("device_alone", slower, base, 0.10)
    assert baseline_runs.adjust(one, "device_alone", _processes([0.5]), 0.10) == one
    assert baseline_runs.adjust(one, "device_alone", None, 0.10) == one


def test_save_baseline_measures_fresh_processes(tmp_path):
    d = tmp_path / "b"
    code, out, err = cli(
        "check",
        "mlp",
        *FAST,
        "--mode",
        "eager",
        "--baseline-runs",
        "2",
        "--gate-host-latency",
        "--save-baseline",
        d,
    )
    assert code == 0, out + err
    p = json.load(open(os.path.join(d, "baseline.json")))["metrics"]["processes"]
    assert p["processes"] == 2 and p["failed"] == []
    for name in ("device_alone", "model_or_inputs", "device_over_device_calibration"):
        v = p["values"][name]
        assert (
            len(v) == 2
            and all(x > 0 for x in v)
            and p["median"][name] == pytest.approx(np.median(v))
        )
        assert p["log_sd"][name] == pytest.approx(np.std(np.log(v), ddof=1))
    # the re-check reads against the processes' median and says so
    j = tmp_path / "r.json"
    code, out, err = cli(
        "check",
        "mlp",
        *FAST,
        "--mode",
        "eager",
        "--max-latency-regression",
        "3",
        "--baseline",
        d,
        "--json",
        j,
    )
    assert code == 0, out + err
    st = json.loads(j.read_text())["baseline"]["latency"]["statistics"]["device_alone"]
    assert st["baseline_processes"]["values"] == p["values"]["device_alone"]


def test_baseline_runs_must_be_positive():
    code, out, err = cli("check", "mlp", *FAST, "--baseline-runs", "0")
    assert code == 2 and "--baseline-runs must be >= 1" in err


# ------------------------------------------------------------------ a re-check's regression, confirmed


def _model_regression(seed=3):
    """model_or_inputs of a re-check whose process read the model 3x heavier (both sides)."""
    rng = np.random.default_rng(seed)
    base, heavier = _run(rng, 1.0), _run(rng, 3.0, reference=6.0)
    c = perfstats.compare_work("model_or_inputs", heavier, base, 0.10) | {"decides": True}
    assert c["decision"] == "regressed" and 2.9 < c["ci"]["ratio"] < 3.1
    return c


def _fresh(c, *ratios):
    """``baseline_runs.confirm``'s answer: fresh processes reading ``ratios`` x the baseline."""
    return {
        "statistics": ["model_or_inputs"],
        "failed": [],
        "processes": [{"model_or_inputs": r * c["baseline_value"]} for r in ratios],
    }


def test_a_regression_of_one_process_is_decided_on_the_median_of_the_processes():
    # docs/design/check-measurement.md: one of seven unchanged re-checks read model_or_inputs x1.56 (x1.50-x1.59):
    # that process ran the model slower on both sides; the other processes did not
    c = _model_regression()
    d = baseline_runs.confirmed(c, "model_or_inputs", _fresh(c, 1.01, 0.98), 0.10)
    assert d["decision"] == "pass" and d["ci"]["ratio"] == pytest.approx(1.01)
    width = c["ci"]["high"] / c["ci"]["low"]
    assert d["ci"]["high"] / d["ci"]["low"] == pytest.approx(
        width
    )  # the first process's interval, moved
    conf = d["confirmation"]
    assert conf["ratios"] == pytest.approx([c["ci"]["ratio"], 1.01, 0.98])
    assert (
        conf["first_process"]["decision"] == "regressed" and conf["first_process"]["ci"] == c["ci"]
    )
    # a regression that persists in the fresh processes stays one
    p = baseline_runs.confirmed(c, "model_or_inputs", _fresh(c, 2.9), 0.10)
    assert p["decision"] == "regressed" and p["ci"]["ratio"] == pytest.approx(
        (c["ci"]["ratio"] + 2.9) / 2
    )
    # two of three at the threshold's edge: the median decides, here undecided (inconclusive)
    e = baseline_runs.confirmed(c, "model_or_inputs", _fresh(c, 1.15, 1.2), 0.10)
    assert e["decision"] == "undecided" and e["ci"]["ratio"] == pytest.approx(1.2)
    # not re-measured, or not a regression here: unchanged
    assert baseline_runs.confirmed(c, "device_alone", _fresh(c, 1.0), 0.10) == c
    ok = c | {"decision": "pass"}
    assert baseline_runs.confirmed(ok, "model_or_inputs", _fresh(c, 1.0), 0.10) == ok
    assert baseline_runs.confirmed(c, "model_or_inputs", None, 0.10) == c


def test_confirmation_measures_fresh_processes_until_most_agree(monkeypatch):
    from torchneuron.check import CheckConfig

    c = _model_regression()
    lat = {"time_basis": "work time: ...", "threshold": 0.10, "statistics": {"model_or_inputs": c}}
    calls = []

    def fake(readings):
        it = iter(readings)

        def measure(cfg, runs, ui=None, *a):
            calls.append(runs)
            return [{"model_or_inputs": next(it) * c["baseline_value"]}]

        return measure

    cfg = CheckConfig(model="mlp", baseline_runs=3)
    monkeypatch.setattr(baseline_runs, "measure", fake([2.9, 3.0]))
    conf = baseline_runs.confirm(lat, cfg)  # persists: two of three processes decide it
    assert (
        calls == [1] and len(conf["processes"]) == 1 and conf["statistics"] == ["model_or_inputs"]
    )
    calls.clear()
    monkeypatch.setattr(baseline_runs, "measure", fake([1.0, 2.9]))
    conf = baseline_runs.confirm(lat, cfg)  # the first fresh one disagrees: a third decides
    assert calls == [1, 1] and [
        p["model_or_inputs"] / c["baseline_value"] for p in conf["processes"]
    ] == pytest.approx([1.0, 2.9])
    # nothing to confirm: one process asked for, --mode compile, wall time, no regression
    for cfg2, lat2 in (
        (CheckConfig(model="mlp", baseline_runs=1), lat),
        (CheckConfig(model="mlp", mode="compile"), lat),
        (cfg, lat | {"time_basis": "wall seconds per step (...)"}),
        (cfg, lat | {"statistics": {"model_or_inputs": c | {"decision": "pass"}}}),
    ):
        assert baseline_runs.confirm(lat2, cfg2) is None
