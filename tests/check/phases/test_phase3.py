"""torchneuron check, phase 3: stable performance after warm-up (and its statistics)."""

import itertools
import math
import time

import numpy as np
import pytest
import torch
from check_support import FAST_KW, MINILM_KW, cli, result

from torchneuron.check.phases import phase3
from torchneuron.check.stats import summary as stats

# ------------------------------------------------------------------ statistics


@pytest.mark.parametrize(
    "n,ranks", [(5, None), (6, (1, 6)), (10, (2, 9)), (20, (6, 15)), (100, (40, 61))]
)
def test_median_ci_ranks_match_binomial_tables(n, ranks):
    # textbook values for a 95% distribution-free CI of the median (e.g. Conover 1999, table A3)
    assert stats.median_ci_ranks(n) == ranks


def test_median_ci_coverage_is_at_least_95_percent():
    for n in (6, 11, 30, 57):
        j, k = stats.median_ci_ranks(n)
        cover = sum(math.comb(n, i) for i in range(j, k)) / 2**n
        assert cover >= 0.95
        # and the next narrower interval would not be
        assert sum(math.comb(n, i) for i in range(j + 1, k - 1)) / 2**n < 0.95


def test_median_ci_large_n_normal_approximation_is_close():
    j, k = stats.median_ci_ranks(10_000)
    assert abs(j - (5000 - 1.96 * 50)) <= 2 and k == 10_001 - j


def test_summary_statistics():
    t = [0.001 * i for i in range(1, 101)]
    s = stats.summarize(t, samples_per_iteration=8)
    assert s["iterations"] == 100
    assert s["p50_s"] == pytest.approx(np.percentile(t, 50))
    assert s["p90_s"] == pytest.approx(np.percentile(t, 90))
    assert s["p99_s"] == pytest.approx(np.percentile(t, 99))
    assert s["median_ci95_s"][0] <= s["p50_s"] <= s["median_ci95_s"][1]
    assert s["throughput_samples_per_s"] == pytest.approx(8 * 100 / sum(t))


def test_warm_up_stops_when_stable():
    seq = itertools.chain([0.5, 0.3, 0.2, 0.15], itertools.repeat(0.1))
    w = phase3.warm_up(lambda: next(seq), max_iterations=100, window=5, threshold=0.05)
    assert w["stable"] and w["stable_at"] == 9  # 4 noisy + 5 stable
    assert w["final_cv"] <= 0.05


def test_warm_up_is_bounded():
    rng = np.random.default_rng(0)
    w = phase3.warm_up(
        lambda: float(rng.uniform(0.05, 0.15)), max_iterations=25, window=10, threshold=0.01
    )
    assert not w["stable"] and w["iterations"] == 25


def test_measure_by_seconds():
    times = phase3.measure(lambda: 0.001, iterations=None, seconds=0.0, min_iterations=3)
    assert len(times) == 3


def test_every_timed_iteration_is_synchronized(monkeypatch):
    calls = []
    real = torch.neuron.synchronize
    monkeypatch.setattr(torch.neuron, "synchronize", lambda *a: (calls.append(1), real(*a)))
    lin = torch.nn.Linear(4, 4).to("neuron")
    step = phase3.make_step(lin, (torch.randn(2, 4, device="neuron"),), "neuron", torch.float32)
    for _ in range(3):
        assert step() > 0
    assert len(calls) == 6  # before and after each forward pass


# ------------------------------------------------------------------ on models


def _assert_measured(p3, iterations):
    assert p3.status == "pass", p3.reason
    for side in ("device", "reference"):
        x = getattr(p3, side)
        assert x["iterations"] == iterations == len(x["times_s"])
        assert 0 < x["p50_s"] <= x["p90_s"] <= x["p99_s"] <= x["max_s"]
        assert x["throughput_samples_per_s"] > 0
        assert x["warmup"]["iterations"] >= 1 and x["cold_s"] > 0
    assert p3.device["device"].startswith("neuron") and p3.reference["device"] == "cpu"
    d, r = p3.device, p3.reference
    assert p3.ratio["p50_latency_device_over_reference"] == pytest.approx(d["p50_s"] / r["p50_s"])
    assert "synchronized" in p3.timing


def test_mlp_performance():
    r = result("mlp", **FAST_KW)
    p3 = r.phase3
    _assert_measured(p3, 20)
    assert p3.samples_per_iteration == 32
    assert p3.device["median_ci95_s"][0] <= p3.device["p50_s"] <= p3.device["median_ci95_s"][1]
    # cold latency (first device iteration) is reported apart from the steady state
    assert p3.device["cold_s"] == r.phase1.cold_latency_s


def test_minilm_performance():
    r = result("minilm", **MINILM_KW)
    p3 = r.phase3
    _assert_measured(p3, 5)
    assert p3.samples_per_iteration == 4
    assert p3.device["warmup"]["max_iterations"] == 5
    assert p3.device["median_ci95_s"] is None  # 5 samples: no 95% CI of the median exists


def test_seconds_mode_from_cli(tmp_path):
    out = tmp_path / "r.json"
    code, _, err = cli("check", "mlp", "--seconds", "0.2", "--max-warmup", "10", "--json", out)
    assert code == 0, err
    import json

    p3 = json.loads(out.read_text())["phase3"]
    assert p3["settings"]["seconds"] == 0.2 and p3["settings"]["iterations"] is None
    assert p3["device"]["measure_wall_s"] >= 0.2 and p3["device"]["iterations"] >= 3


def test_iterations_and_seconds_are_exclusive():
    code, _, err = cli("check", "mlp", "--seconds", "1", "--iterations", "5")
    assert code == 2 and "not allowed with" in err


def test_default_window_fits_a_short_warm_up():
    # a --cv-window that is given may not exceed --max-warmup (bad usage); the default one
    # is shortened to it, and the report says which window was used
    w = result("mlp", iterations=5, max_warmup=5).phase3
    assert w.settings["cv_window"] == 5 and w.device["warmup"]["window"] == 5


def test_measure_interleaved_rotates_and_pairs():
    order = []

    def step(name):
        def f():
            order.append(name)
            return 0.001

        return f

    wall, cpu = phase3.measure_interleaved(
        {"a": step("a"), "b": step("b"), "c": step("c")}, 3, None
    )
    assert order == [
        "a",
        "b",
        "c",
        "b",
        "c",
        "a",
        "c",
        "a",
        "b",
    ]  # the order rotates every iteration
    assert all(len(v) == 3 for v in wall.values()) and all(len(v) == 3 for v in cpu.values())
    assert all(t >= 0 for v in cpu.values() for t in v)


def test_benchmark_one_side_alone():
    from torchneuron.check import CheckConfig
    from torchneuron.check.runner import NullUI

    r = phase3.benchmark(
        "cpu",
        torch.nn.Linear(4, 4),
        (torch.randn(2, 4),),
        "cpu",
        CheckConfig(model="mlp", iterations=5, max_warmup=3),
        2,
        NullUI(),
    )
    assert r["iterations"] == 5 and r["p50_s"] > 0 and r["warmup"]["iterations"] <= 3


def test_device_clock_is_the_cores_kernel_cpu_time():
    # the device computes on its stream's worker thread: the device sides' clock is that
    # thread's CPU time inside kernels, counted only while phase 3 measures (workclock.counting)
    import torchneuron
    from torchneuron.check.phases import workclock

    clocks = workclock.clocks("neuron", ["device", "reference", "device_calibration"])
    assert (
        clocks["reference"] is time.thread_time and clocks["device"] is clocks["device_calibration"]
    )
    x = torch.randn(256, 256, device="neuron")

    def work(t):
        for _ in range(20):
            t = torch.tanh(t @ t)
        torch.neuron.synchronize()

    with phase3.timing_threads(1):  # as phase 3 times: the kernels run on the worker alone
        work(x)
        k0 = clocks["device"]()
        work(x)
        assert clocks["device"]() == k0  # not counted outside phase 3's rounds
        with workclock.counting():
            k1 = clocks["device"]()
            work(x)
            device = clocks["device"]() - k1
        assert not torchneuron._C._set_count_kernel_cpu(False)  # counting() restored the setting
        # an independent reference: the same work on this thread, on its own CPU clock
        c0 = time.thread_time()
        work(x.cpu())
        host = time.thread_time() - c0
    assert 0.3 * host < device < 3 * host, (device, host)


def test_work_time_basis_needs_one_thread_and_a_cpu_reference():
    from torchneuron.check import CheckConfig

    assert phase3.work_time_basis(CheckConfig(model="mlp"))
    assert phase3.work_time_basis(CheckConfig(model="mlp", timing_threads=0)) is None
    assert phase3.work_time_basis(CheckConfig(model="mlp", timing_threads=2)) is None
    assert phase3.work_time_basis(CheckConfig(model="mlp", reference="cuda")) is None
    # the compiled model (the device step under --mode compile) on the process's CPU time
    assert (
        phase3.work_time_basis(CheckConfig(model="mlp", mode="compile"))
        == phase3.COMPILED_WORK_TIME_BASIS
    )
    assert (
        phase3.work_time_basis(CheckConfig(model="mlp", mode="compile", timing_threads=2)) is None
    )


def test_the_compiled_model_is_timed_on_the_process_clock():
    import time as _time

    from torchneuron.check.phases import workclock

    c = workclock.clocks("neuron:0", ["device", "compiled", "reference", "device_calibration"])
    assert c["compiled"] is _time.process_time and c["reference"] is _time.thread_time
    assert c["device"] is c["device_calibration"] and c["device"] not in (
        _time.process_time,
        _time.thread_time,
    )
    c = workclock.clocks(
        "neuron:0", ["device", "device_calibration"], compiled_device=True
    )  # --mode compile
    assert c["device"] is _time.process_time and c["device_calibration"] is not _time.process_time


def test_timed_iterations_run_without_the_cyclic_gc(monkeypatch):
    # a collection lands in whichever step crosses the threshold (it read the compiled side
    # x1.12-x1.25 in later checks of one process): off while timing, as timeit does, and
    # restored after (also when the caller had it off)
    import gc

    from torchneuron.check.config import CheckConfig

    seen = []

    def step():
        seen.append(gc.isenabled())
        return 0.0

    step.launch = []

    class UI:
        def progress(self, desc, total):
            class P:
                def __enter__(self):
                    return self

                def __exit__(self, *a):
                    return False

                def advance(self):
                    pass

            return P()

    cfg = CheckConfig(model="mlp", iterations=5)
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            seen.clear()
            phase3._measure_round({"device": step, "reference": step}, cfg, UI(), "round 1", "cpu")
            assert seen and not any(seen)
            assert gc.isenabled() == enabled
            seen.clear()
            with phase3.no_gc():
                step()
            assert seen == [False] and gc.isenabled() == enabled
        finally:
            gc.enable()
