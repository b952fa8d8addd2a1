"""torchneuron check on a noisy host: verdicts from an interval of a normalized change.

CPU-burning processes (spawned here, each ending itself after a bound, killed after the
module) load every core while the checks run: the unchanged build must still pass against
its own baseline, and planted regressions (the device alone 30 % slower; the model's forward
3x slower on both sides; wrong accepted outputs) must still be caught."""

import json
import os
import shutil
import statistics

import pytest
from check_support import cli, fixture
from safetensors.torch import load_file, save_file

from torchneuron.check.stats import perfstats

# small model, few iterations; --max-memory-regression is loose: memory is not the subject.
# The planted regressions are of eager's statistics, checked with --mode eager against an
# eager baseline (CHECK_FIXTURE_* change the eager forward; XLA removes the repeated and
# discarded work from the compiled graph); the default mode (eager and compiled, the
# compiled model in the same interleaved iterations) has its own baseline and test.
COMMON = [
    "--iterations",
    "80",
    "--max-warmup",
    "20",
    "--max-rounds",
    "3",
    "--max-memory-regression",
    "0.5",
]
# --gate-host-latency: these tests are of the host-latency statistics, which decide only
# under that flag (the exact gates decide by default: tests/check/baseline/test_exact_gates.py)
RUN = COMMON + ["--mode", "eager"]
# the burners (tests/conftest.py) end themselves after this, even if the test process dies
BURN_SECONDS = 300


def _save(tmp_path_factory, name: str, run: list) -> str:
    # --baseline-runs 2: phase 3 also in one fresh process (baseline_runs.py: re-checks read against
    # the processes' median, regressions past their spread); two, not the default three, for CI time
    d = tmp_path_factory.mktemp("noisy") / name
    code, out, err = cli(
        "check",
        fixture("blocks"),
        *run,
        "--baseline-runs",
        "2",
        "--gate-host-latency",
        "--save-baseline",
        d,
    )
    assert code == 0, out + err
    return str(d)


@pytest.fixture(scope="module")
def quiet_baseline(tmp_path_factory, burners):
    """The baseline, saved on the loaded host (as a CI runner saves it, then re-checks)."""
    return _save(tmp_path_factory, "blocks", RUN)


@pytest.fixture(scope="module")
def default_mode_baseline(tmp_path_factory, burners):
    """The same, saved in the default mode (--mode both)."""
    return _save(tmp_path_factory, "blocks_both", COMMON)


def _check(baseline, tmp_path, *extra, run=RUN):
    j = tmp_path / "r.json"
    code, out, err = cli(
        "check",
        fixture("blocks"),
        *run,
        "--gate-host-latency",
        "--baseline",
        baseline,
        "--json",
        j,
        *extra,
    )
    return code, out + err, json.loads(j.read_text()) if j.exists() else None


def test_baseline_keeps_interleaved_samples(quiet_baseline):
    m = json.load(open(os.path.join(quiet_baseline, "baseline.json")))["metrics"]
    # a baseline measures --max-rounds (3) rounds of 80 iterations: wall and work CPU seconds
    for key in ("samples", "cpu_samples"):
        s = m[key]
        assert set(s) == {
            "device",
            "reference",
            "calibration",
            "calibration_matmul",
            "device_calibration",
        }
        assert all(len(v) == 240 for v in s.values())
        assert (
            all(t > 0 for k in s for t in s[k])
            if key == "samples"
            else all(t >= 0 for k in s for t in s[k])
        )
    assert len(m["launch_samples"]["device"]) == 240 and all(
        t > 0 for t in m["launch_samples"]["device"]
    )
    assert m["work_time_basis"] and m["cpu_clock"].startswith(
        "device sides: the NeuronCore's busy time"
    )
    p = m["processes"]  # the saving process's figures and one fresh process's
    assert p["processes"] == 2 and p["failed"] == [] and len(p["values"]["device_alone"]) == 2
    assert set(m["interleaved"]) == set(m["samples"])


@pytest.mark.noisy_host
def test_unchanged_build_passes_on_a_loaded_host(quiet_baseline, burners, tmp_path):
    # at the default +10 %: measured with bench/bench_check_verdicts.py on the 2-core
    # development host (docs/design/check-measurement.md, "Limits, measured"), unchanged re-checks pass
    code, out, r = _check(quiet_baseline, tmp_path)
    lat = r["baseline"]["latency"]
    assert not lat["regressions"], out
    assert code in (0, 3), out  # pass, or inconclusive (the rounds ran out under the burners)
    assert lat["time_basis"].startswith("work time")
    assert set(lat["statistics"]) == {
        "device_alone",
        "model_or_inputs",
        "device_over_device_calibration",
    }
    decided = [s["decision"] for s in lat["statistics"].values() if s["decides"]]
    assert "regressed" not in decided and (code == 3 or set(decided) == {"pass"}), out


@pytest.mark.noisy_host
def test_unchanged_build_in_the_default_mode_is_never_a_false_regression(
    default_mode_baseline, burners, tmp_path
):
    # --mode both: the compiled model is compared on the process's CPU time (workclock), with
    # its load margin (perfstats.COMPILED_MARGIN). On wall time without it, unchanged re-checks
    # read x1.16 and x1.23 with the whole interval above +10 % (false regressions; load 5-6):
    # XLA:CPU's thread pool loses more to the burners than the single-threaded reference.
    code, out, r = _check(default_mode_baseline, tmp_path, run=COMMON)
    assert not r["failures"], out
    assert code in (0, 3), out  # pass, or inconclusive (the rounds ran out)
    lat = r["baseline"]["compiled"]["latency"]
    assert lat["time_basis"].startswith("work time: the compiled model's process CPU seconds"), out
    st = lat["statistics"]["compiled_alone"]
    assert st["decides"] and st["decision"] in ("pass", "undecided"), out
    assert r["baseline"]["latency"]["decision"] in ("pass", "undecided")
    assert code == 0 or "inconclusive" in out


@pytest.mark.noisy_host
def test_device_alone_slowdown_is_caught_on_a_loaded_host(
    quiet_baseline, burners, tmp_path, monkeypatch
):
    monkeypatch.setenv("CHECK_FIXTURE_DEVICE_EXTRA", "0.3")
    code, out, r = _check(quiet_baseline, tmp_path)
    assert code == 1, out
    st = r["baseline"]["latency"]["statistics"]
    assert st["device_alone"]["decision"] == "regressed" and st["device_alone"]["ci"]["low"] > 1.10
    assert "latency, device alone" in out
    _confirmed_in_fresh_processes(st["device_alone"])


def _confirmed_in_fresh_processes(st):
    # the slowdown persists: fresh processes confirm it and the median decides. Two of at
    # most three processes reading a regression is enough; under the burners a fresh one
    # can read less, and then the third is measured (CI 2026-12-06: three were needed)
    conf = st["confirmation"]
    assert conf["first_process"]["decision"] == "regressed" and conf["failed"] == []
    assert len(conf["ratios"]) in (2, 3) and sum(r > 1.10 for r in conf["ratios"]) >= 2
    assert st["current_value"] == pytest.approx(statistics.median(conf["values"]))


@pytest.mark.noisy_host
def test_model_slowdown_on_both_sides_is_caught_on_a_loaded_host(
    quiet_baseline, burners, tmp_path, monkeypatch
):
    monkeypatch.setenv("CHECK_FIXTURE_WORK", "3")
    code, out, r = _check(quiet_baseline, tmp_path)
    assert code == 1, out
    st = r["baseline"]["latency"]["statistics"]
    assert (
        st["model_or_inputs"]["decision"] == "regressed"
        and st["model_or_inputs"]["ci"]["low"] > 1.10
    )
    assert "latency, model or inputs" in out
    _confirmed_in_fresh_processes(st["model_or_inputs"])


@pytest.mark.noisy_host
def test_slowdown_of_one_process_only_is_not_a_regression(
    quiet_baseline, burners, tmp_path, monkeypatch
):
    # docs/design/check-measurement.md ("Between processes"): one of seven unchanged re-checks read model_or_inputs
    # x1.56, a false regression: in that process the model ran slower on both sides. Planted: the
    # forward 3x in this process only; the re-check's fresh processes run it at the normal speed
    monkeypatch.setenv("CHECK_FIXTURE_WORK", "3")
    monkeypatch.setenv("CHECK_FIXTURE_WORK_PID", str(os.getpid()))
    html = tmp_path / "r.html"
    # the 3x forward is a real program change in this process: the exact gates (kernels,
    # projected time) would name it; loosened, the host-latency statistics are the subject
    loose = ["--max-kernel-regression", "5", "--max-projected-time-regression", "5"]
    code, out, r = _check(quiet_baseline, tmp_path, "--html", html, *loose)
    assert not r["failures"], out
    st = r["baseline"]["latency"]["statistics"]["model_or_inputs"]
    conf = st["confirmation"]
    page = html.read_text()  # the report shows every process's reading
    assert "model or inputs: re-measured in 2 fresh process(es)" in page
    assert f"fresh x{conf['ratios'][1]:.3f}, x{conf['ratios'][2]:.3f}" in page
    assert conf["first_process"]["decision"] == "regressed" and conf["ratios"][0] > 2, out
    assert len(conf["ratios"]) == 3 and max(conf["ratios"][1:]) < 1.24 and conf["failed"] == [], out
    # the median of the three readings is a fresh process's: never a regression; under the
    # burners plus another job its interval may straddle +10 % (undecided, exit 3; seen
    # 2026-12-06 at load 5)
    assert st["decision"] in ("pass", "undecided") and st["ci"]["ratio"] < 1.24, out
    # the subject never fails the check; the other quantities may run out of rounds under the
    # burners (CI, 2026-12-05: device alone straddled +10 %), which is exit 3, never 1
    # (deciding statistics only: device/device calibration is informational and reads this
    # process's 3x forward unconfirmed; CI 2026-12-06 read it "regressed" beside exit 3)
    decisions = [
        s["decision"] for s in r["baseline"]["latency"]["statistics"].values() if s["decides"]
    ]
    assert code == 0 or (code == 3 and "undecided" in decisions and "regressed" not in decisions), (
        out
    )


@pytest.mark.noisy_host
def test_accuracy_regression_is_caught_on_a_loaded_host(quiet_baseline, burners, tmp_path):
    b = tmp_path / "b"
    shutil.copytree(quiet_baseline, b)
    path = b / "outputs.safetensors"
    t = load_file(path)
    for kind in ("reference", "fp64"):  # the accepted outputs were different
        t[f"{kind}/output"] = t[f"{kind}/output"] + 0.01
    save_file(
        t,
        path,
        metadata={"format": "torchneuron.check.baseline/1", "model": "check_inference.py:blocks"},
    )
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
    cd, cr = _times(rng, 1.3, 200), _times(rng, 2.0, 200)  # the device 30 % slower
    ci = perfstats.min_ratio_ci(cd, cr, bd, br, seed=0)
    assert ci["low"] <= 1.3 * 1.02 and ci["high"] >= 1.3 * 0.98 and ci["low"] > 1.2
    assert perfstats.decide(ci, 0.10) == "regressed"
    same = perfstats.min_ratio_ci(_times(rng, 1.0, 200), _times(rng, 2.0, 200), bd, br, seed=0)
    assert 0.95 < same["ratio"] < 1.05 and perfstats.decide(same, 0.10) == "pass"
    # a slower host (every side x3) changes nothing
    slow = perfstats.min_ratio_ci(
        3 * _times(rng, 1.0, 200), 3 * _times(rng, 2.0, 200), bd, br, seed=0
    )
    assert perfstats.decide(slow, 0.10) == "pass"
    assert perfstats.min_ratio_ci(cd, cr, bd, br, seed=0) == ci  # seeded: the same interval


def test_few_noisy_samples_are_undecided_not_a_verdict():
    import numpy as np

    base_d = np.array([0.5, 1.0, 1.5, 2.0, 2.5])  # the baseline's minimum is one lucky iteration
    ci = perfstats.min_ratio_ci([1.1] * 5, [1.0] * 5, base_d, [1.0] * 5, seed=0)
    assert ci["low"] < 1.1 < ci["high"] and perfstats.decide(ci, 0.10) == "undecided"
    assert perfstats.decide(None, 0.10) == "undecided"
    assert perfstats.min_ratio_ci([1.0] * 3, [1.0] * 3, [1.0] * 10, [1.0] * 10) is None


def test_too_noisy_host_is_inconclusive_with_its_own_exit_code(
    quiet_baseline, tmp_path, monkeypatch
):
    # every interval straddles the threshold (as on a host too noisy to decide): the check
    # measures --max-rounds rounds, then answers "inconclusive" with exit code 3
    calls = []

    def straddling(*a, **k):
        calls.append(1)
        return {
            "ratio": 1.1,
            "low": 0.8,
            "high": 1.4,
            "confidence": 0.95,
            "resamples": 0,
            "n_current": 40,
            "n_baseline": 40,
        }

    monkeypatch.setattr(perfstats, "min_ratio_ci", straddling)
    monkeypatch.setattr(perfstats, "work_ratio_ci", straddling)
    code, out, r = _check(quiet_baseline, tmp_path, "--max-rounds", "2")
    assert code == 3, out
    assert r["verdict"] == "inconclusive" and r["phase3"]["rounds"] == 2 and r["failures"] == []
    assert len(r["phase3"]["samples"]["device"]) == 160  # the second round was measured and pooled
    assert "too noisy" in r["inconclusive"] and "INCONCLUSIVE" in out and len(calls) >= 4


# ------------------------------------------------------------------ the work-time basis


def _work_run(
    rng, device_cpu, reference_cpu, n=120, device_wait=0.0, reference_wait=0.0, preempt=0.0
):
    """Interleaved samples as phase 3 keeps them: per-iteration CPU seconds of each side's
    work (noise from shared caches, in both directions, common to an iteration; the device's
    is its busy time) and wall seconds (the CPU time, plus waiting, plus preemption by other
    processes: only adds)."""
    import numpy as np

    host = np.exp(rng.normal(0, 0.08, n))  # the iteration's host state, shared
    sides = {
        "device": device_cpu,
        "reference": reference_cpu,
        "calibration": 0.2,
        "calibration_matmul": 0.4,
        "device_calibration": 0.3,
    }
    cpu = {k: list(v * host * np.exp(rng.normal(0, 0.02, n))) for k, v in sides.items()}
    wall = {
        k: list(np.array(c) + rng.exponential(preempt * sides[k], n) * (rng.random(n) < 0.5))
        for k, c in cpu.items()
    }
    wall["device"] = list(np.array(wall["device"]) + device_wait)
    wall["reference"] = list(np.array(wall["reference"]) + reference_wait)
    return {"cpu": cpu, "wall": wall}


def test_work_time_interval_of_a_known_change():
    import numpy as np

    rng = np.random.default_rng(2)
    base = _work_run(rng, 1.0, 2.0)
    same = _work_run(rng, 1.0, 2.0, preempt=5.0)  # a much busier host: wall times up to 6x
    ci = perfstats.work_ratio_ci(same, base, ("device",), ("reference",), seed=0)
    assert 0.97 < ci["ratio"] < 1.03 and perfstats.decide(ci, 0.10) == "pass"
    slow = _work_run(rng, 1.3, 2.0, preempt=5.0)  # the device's work 30 % heavier
    ci = perfstats.work_ratio_ci(slow, base, ("device",), ("reference",), seed=0)
    assert ci["low"] > 1.2 and perfstats.decide(ci, 0.10) == "regressed"
    heavier = _work_run(rng, 3.0, 6.0)  # the model 3x heavier on both sides
    mi = perfstats.compare_work("model_or_inputs", heavier, base, 0.10)
    assert mi["decision"] == "regressed" and 2.7 < mi["ci"]["ratio"] < 3.3
    assert perfstats.compare_work("device_alone", heavier, base, 0.10)["decision"] == "pass"
    assert perfstats.work_ratio_ci(
        slow, base, ("device",), ("reference",), seed=0
    ) == perfstats.work_ratio_ci(slow, base, ("device",), ("reference",), seed=0)  # seeded


def test_work_time_sees_host_waiting_not_device_hand_offs():
    import numpy as np

    # a host step that starts waiting (a sleep, a blocking call) uses no more CPU: the least
    # waiting of any iteration is added to each, so the wait is caught
    rng = np.random.default_rng(3)
    base = _work_run(rng, 1.0, 2.0, preempt=1.0)
    sleepy = _work_run(rng, 1.0, 2.0, reference_wait=1.0, preempt=1.0)
    ci = perfstats.work_ratio_ci(
        sleepy, base, ("reference",), ("calibration", "calibration_matmul"), seed=0
    )
    assert ci["low"] > 1.3 and perfstats.decide(ci, 0.10) == "regressed"
    # the device's CPU samples are its busy time: its wall time beyond them (the host's dispatch,
    # the queue's hand-offs) moves with the load, not the work, and is left out
    handoffs = _work_run(rng, 1.0, 2.0, device_wait=0.5, preempt=1.0)
    ci = perfstats.work_ratio_ci(handoffs, base, ("device",), ("reference",), seed=0)
    assert perfstats.decide(ci, 0.10) == "pass" and 0.97 < ci["ratio"] < 1.03
    assert "device" in perfstats.BUSY_TIME_SIDES and "reference" not in perfstats.BUSY_TIME_SIDES
    # ... but the host's own time in the device's forward call (its launch seconds) is: a
    # forward that starts sleeping on the device path is caught by its least launch time
    launch = {"device": list(0.2 + rng.exponential(0.5, 120))}
    slept = {"device": list(np.array(launch["device"]) + 1.0)}
    ci = perfstats.work_ratio_ci(
        base | {"launch": slept}, base | {"launch": launch}, ("device",), ("reference",), seed=0
    )
    assert ci["low"] > 1.3 and perfstats.decide(ci, 0.10) == "regressed"
    assert perfstats.work_times([1.0, 1.0], [1.5, 1.2]).tolist() == pytest.approx([1.2, 1.2])
    assert perfstats.work_times([1.0, 1.0], [0.9, 1.0]).tolist() == [
        1.0,
        1.0,
    ]  # overlap: no negative wait


def test_work_time_needs_enough_samples():
    import numpy as np

    rng = np.random.default_rng(4)
    base = _work_run(rng, 1.0, 2.0)
    few = _work_run(rng, 1.0, 2.0, n=3)
    assert perfstats.work_ratio_ci(few, base, ("device",), ("reference",)) is None
    assert perfstats.compare_work("device_alone", few, base, 0.10)["decision"] == "undecided"


def test_model_or_inputs_regression_needs_the_between_run_margin():
    # model_or_inputs carries a baseline's load-dependent offset (perfstats.REGRESSION_MARGIN):
    # an interval just past +10 % is undecided there, not a regression; device_alone has no margin
    ci = {"ratio": 1.19, "low": 1.15, "high": 1.22}
    m = perfstats.REGRESSION_MARGIN["model_or_inputs"]
    assert 1.12 < m < 1.14
    assert perfstats.decide(ci, 0.10, m) == "undecided"
    assert perfstats.decide(ci, 0.10) == "regressed"
    assert perfstats.decide({"ratio": 2.4, "low": 2.2, "high": 2.6}, 0.10, m) == "regressed"
    assert perfstats.decide({"ratio": 1.0, "low": 0.95, "high": 1.05}, 0.10, m) == "pass"
    assert "device_alone" not in perfstats.REGRESSION_MARGIN


def test_device_over_device_calibration_needs_its_margin():
    # the statistic --skip-reference-perf decides on read an unchanged build x1.28 (x1.13-x1.74)
    # on a loaded host: with its margin that is undecided (exit 3), not a regression
    import numpy as np

    rng = np.random.default_rng(5)
    base = _work_run(rng, 1.0, 2.0)
    noisy = _work_run(rng, 1.3, 2.0)  # the device side reads 30 % above the baseline
    d = perfstats.compare_work("device_over_device_calibration", noisy, base, 0.10)
    assert 1.25 < d["ci"]["ratio"] < 1.35 and d["ci"]["low"] > 1.1
    assert d["decision"] == "undecided" and d["regression_above"] == pytest.approx(
        1.1 * np.exp(0.39)
    )
    assert perfstats.decide(d["ci"], 0.10) == "regressed"  # what it decided without the margin
    big = _work_run(rng, 2.5, 2.0)
    assert (
        perfstats.compare_work("device_over_device_calibration", big, base, 0.10)["decision"]
        == "regressed"
    )
