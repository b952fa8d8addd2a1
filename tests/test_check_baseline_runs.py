"""torchneuron check, baselines measured in several processes (--baseline-runs): each
process's figures kept, re-checks read against their median, a regression needing its
interval past the spread between them (baseline_runs.py)."""
import json
import os

import numpy as np
import pytest

from check_support import FAST, cli

from torchneuron.check import baseline_runs, perfstats


def _run(rng, device, reference=2.0, n=120):
    """Interleaved work-time samples as phase 3 keeps them (see test_check_noisy_host._work_run)."""
    host = np.exp(rng.normal(0, 0.05, n))
    sides = {"device": device, "reference": reference, "calibration": 0.2, "calibration_matmul": 0.4,
             "device_calibration": 0.3}
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
    code, out, err = cli("check", "mlp", *FAST, "--mode", "eager", "--baseline-runs", "2", "--save-baseline", d)
    assert code == 0, out + err
    p = json.load(open(os.path.join(d, "baseline.json")))["metrics"]["processes"]
    assert p["processes"] == 2 and p["failed"] == []
    for name in ("device_alone", "model_or_inputs", "device_over_device_calibration"):
        v = p["values"][name]
        assert len(v) == 2 and all(x > 0 for x in v) and p["median"][name] == pytest.approx(np.median(v))
        assert p["log_sd"][name] == pytest.approx(np.std(np.log(v), ddof=1))
    # the re-check reads against the processes' median and says so
    j = tmp_path / "r.json"
    code, out, err = cli("check", "mlp", *FAST, "--mode", "eager", "--max-latency-regression", "3",
                         "--baseline", d, "--json", j)
    assert code == 0, out + err
    st = json.loads(j.read_text())["baseline"]["latency"]["statistics"]["device_alone"]
    assert st["baseline_processes"]["values"] == p["values"]["device_alone"]


def test_baseline_runs_must_be_positive():
    code, out, err = cli("check", "mlp", *FAST, "--baseline-runs", "0")
    assert code == 2 and "--baseline-runs must be >= 1" in err
