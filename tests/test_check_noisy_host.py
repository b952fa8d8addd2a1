"""torchneuron check on a noisy host: verdicts from an interval of a normalized change.

CPU-burning processes (spawned here, each ending itself after a bound, killed after the
module) load every core while the checks run: the unchanged build must still pass against
its own baseline, and planted regressions (the device alone 30 % slower; the model's forward
3x slower on both sides; wrong accepted outputs) must still be caught."""
import json
import os
import shutil
import subprocess
import sys

import pytest
from safetensors.torch import load_file, save_file

from check_support import cli, fixture

from torchneuron.check import perfstats

# small model, few iterations; --max-memory-regression is loose: memory is not the subject
RUN = ["--iterations", "80", "--max-warmup", "20", "--max-rounds", "3", "--max-memory-regression", "0.5"]
BURN_SECONDS = 300          # each burner ends itself after this, even if the test process dies


@pytest.fixture(scope="module")
def burners():
    """One busy-looping process per core, for the module's duration."""
    code = f"import time\nend = time.time() + {BURN_SECONDS}\nwhile time.time() < end:\n    pass\n"
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(os.cpu_count() or 1)]
    yield procs
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


@pytest.fixture(scope="module")
def quiet_baseline(tmp_path_factory, burners):
    """The baseline, saved on the loaded host (as a CI runner saves it, then re-checks)."""
    d = tmp_path_factory.mktemp("noisy") / "blocks"
    code, out, err = cli("check", fixture("blocks"), *RUN, "--save-baseline", d)
    assert code == 0, out + err
    return str(d)


def _check(baseline, tmp_path, *extra):
    j = tmp_path / "r.json"
    code, out, err = cli("check", fixture("blocks"), *RUN, "--baseline", baseline, "--json", j, *extra)
    return code, out + err, json.loads(j.read_text()) if j.exists() else None


def test_baseline_keeps_interleaved_samples(quiet_baseline):
    m = json.load(open(os.path.join(quiet_baseline, "baseline.json")))["metrics"]
    s = m["samples"]
    # a baseline is measured for all --max-rounds rounds (3 x 80 iterations)
    assert len(s["device"]) == len(s["reference"]) == len(s["calibration"]) == len(s["device_calibration"]) == 240
    assert all(t > 0 for k in s for t in s[k])


@pytest.mark.noisy_host
def test_unchanged_build_passes_on_a_loaded_host(quiet_baseline, burners, tmp_path):
    code, out, r = _check(quiet_baseline, tmp_path)              # the default threshold, +10 %
    # never a false regression; "inconclusive" (3) is the designed answer when even
    # --max-rounds rounds leave an interval across the threshold
    assert code in (0, 3), out
    lat = r["baseline"]["latency"]
    assert not lat["regressions"]
    if code == 3:
        pytest.skip("the host was too noisy to decide: reported inconclusive, no false verdict")
    assert set(lat["statistics"]) == {"device_alone", "model_or_inputs", "device_over_device_calibration"}
    assert all(s["decision"] == "pass" for s in lat["statistics"].values() if s["decides"])


@pytest.mark.noisy_host
def test_device_alone_slowdown_is_caught_on_a_loaded_host(quiet_baseline, burners, tmp_path, monkeypatch):
    monkeypatch.setenv("CHECK_FIXTURE_DEVICE_EXTRA", "0.3")
    code, out, r = _check(quiet_baseline, tmp_path)
    assert code == 1, out
    st = r["baseline"]["latency"]["statistics"]
    assert st["device_alone"]["decision"] == "regressed" and st["device_alone"]["ci"]["low"] > 1.10
    assert "latency, device alone" in out


@pytest.mark.noisy_host
def test_model_slowdown_on_both_sides_is_caught_on_a_loaded_host(quiet_baseline, burners, tmp_path, monkeypatch):
    monkeypatch.setenv("CHECK_FIXTURE_WORK", "3")
    code, out, r = _check(quiet_baseline, tmp_path)
    assert code == 1, out
    st = r["baseline"]["latency"]["statistics"]
    assert st["model_or_inputs"]["decision"] == "regressed" and st["model_or_inputs"]["ci"]["low"] > 1.10
    assert "latency, model or inputs" in out


@pytest.mark.noisy_host
def test_accuracy_regression_is_caught_on_a_loaded_host(quiet_baseline, burners, tmp_path):
    b = tmp_path / "b"
    shutil.copytree(quiet_baseline, b)
    path = b / "outputs.safetensors"
    t = load_file(path)
    for kind in ("reference", "fp64"):            # the accepted outputs were different
        t[f"{kind}/output"] = t[f"{kind}/output"] + 0.01
    save_file(t, path, metadata={"format": "torchneuron.check.baseline/1", "model": "check_models.py:blocks"})
    code, out, _ = _check(str(b), tmp_path)
    assert code == 1, out
    assert "regression: accuracy" in out


# ------------------------------------------------------------------ the statistic itself

def _times(rng, base, n):
    """Iteration times: ``base`` seconds of work plus interference that only adds time."""
    return base * (1 + rng.exponential(0.3, n))


def test_interval_of_a_known_change():
    import numpy as np

    rng = np.random.default_rng(1)
    bd, br = _times(rng, 1.0, 200), _times(rng, 2.0, 200)
    cd, cr = _times(rng, 1.3, 200), _times(rng, 2.0, 200)     # the device 30 % slower
    ci = perfstats.segment_ratio_ci(cd, cr, bd, br)
    assert ci["n_current"] == ci["n_baseline"] == 10 and ci["segment_iterations"] == 20
    assert ci["low"] <= 1.3 <= ci["high"] and ci["low"] > 1.2
    assert perfstats.decide(ci, 0.10) == "regressed"
    same = perfstats.segment_ratio_ci(_times(rng, 1.0, 200), _times(rng, 2.0, 200), bd, br)
    assert 0.95 < same["ratio"] < 1.05 and perfstats.decide(same, 0.10) == "pass"
    # a slower host (every side x3) changes nothing
    slow = perfstats.segment_ratio_ci(3 * _times(rng, 1.0, 200), 3 * _times(rng, 2.0, 200), bd, br)
    assert perfstats.decide(slow, 0.10) == "pass"


def test_segment_values_are_minimum_ratios():
    # iterations 0-4 and 5-9 (length 5), the remainder 10-11 joins the last segment
    num = [5, 4, 6, 7, 8, 9, 3, 9, 9, 9, 9, 2]
    den = [2, 2, 3, 3, 3, 1, 1, 1, 1, 1, 9, 9]
    assert perfstats.segment_values(num, den, 5) == [4 / 2, 2 / 1]
    assert perfstats.segment_length(20) == 5 and perfstats.segment_length(400) == 20


def test_hodges_lehmann_interval_against_its_definition():
    import itertools

    import numpy as np

    # the exact Mann-Whitney null of m=3, n=4 by enumerating the 35 arrangements
    counts = np.zeros(13)
    for xs in itertools.combinations(range(7), 3):
        counts[sum(sum(1 for y in range(p) if y not in xs) for p in xs)] += 1
    assert np.allclose(perfstats.mann_whitney_null_cdf(3, 4), np.cumsum(counts) / 35)
    # m = n = 4: the 95 % interval is [smallest, largest] difference, coverage 1 - 2/70
    hl = perfstats.hl_shift_ci([1, 2, 3, 4], [0, 0.5, 1, 1.5])
    assert hl == {"shift": 1.75, "low": -0.5, "high": 4.0, "k": 1, "coverage": 1 - 2 / 70}
    assert perfstats.hl_shift_ci([1, 2, 3], [0, 1, 2]) is None      # 3 vs 3: no 95 % interval exists


def test_few_noisy_samples_are_undecided_not_a_verdict():
    # four segments a side whose spread covers the threshold
    base_d = [1.0] * 5 + [0.8] * 5 + [1.2] * 5 + [1.0] * 5
    ci = perfstats.segment_ratio_ci([1.1] * 20, [1.0] * 20, base_d, [1.0] * 20)
    assert ci["low"] < 1.1 < ci["high"] and perfstats.decide(ci, 0.10) == "undecided"
    assert perfstats.decide(None, 0.10) == "undecided"
    assert perfstats.segment_ratio_ci([1.0] * 15, [1.0] * 15, [1.0] * 15, [1.0] * 15) is None   # 3 vs 3


def test_too_noisy_host_is_inconclusive_with_its_own_exit_code(quiet_baseline, tmp_path, monkeypatch):
    # every interval straddles the threshold (as on a host too noisy to decide): the check
    # measures --max-rounds rounds, then answers "inconclusive" with exit code 3
    calls = []

    def straddling(*a, **k):
        calls.append(1)
        return {"ratio": 1.1, "low": 0.8, "high": 1.4, "confidence": 0.95, "coverage": 0.95,
                "segment_iterations": 20, "n_current": 4, "n_baseline": 12}

    monkeypatch.setattr(perfstats, "segment_ratio_ci", straddling)
    code, out, r = _check(quiet_baseline, tmp_path, "--max-rounds", "2")
    assert code == 3, out
    assert r["verdict"] == "inconclusive" and r["phase3"]["rounds"] == 2 and r["failures"] == []
    assert len(r["phase3"]["samples"]["device"]) == 160          # the second round was measured and pooled
    assert "too noisy" in r["inconclusive"] and "INCONCLUSIVE" in out and len(calls) >= 4
