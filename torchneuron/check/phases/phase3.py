"""Phase 3: stable performance after warm-up.

One iteration is one forward pass with the inputs already on the device and the outputs
left there, timed on the host from a synchronized start to a synchronized end
(``torch.neuron.synchronize()`` before and after: the device is asynchronous, so an
unsynchronized timer would measure only the enqueueing).

Warm-up runs until the rolling coefficient of variation (sample std / mean) of the last
``cv_window`` iteration times is at most ``cv_threshold``, bounded by ``max_warmup``
iterations; then ``iterations`` iterations (or ``seconds`` of them) are measured. The
reference device is measured the same way in the same run. Cold latency (the very first
iteration, phase 1) is reported apart from the steady state.
"""

from __future__ import annotations

import contextlib
import gc
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

from ..config import CheckConfig
from ..model import tensors as T
from ..result_phases import Phase3Result
from ..stats import summary as stats
from . import calibration, workclock


def warm_up(
    step: Callable[[], float], max_iterations: int, window: int, threshold: float, progress=None
) -> dict:
    """Call ``step`` (returns one iteration's seconds) until the rolling CV of the last
    ``window`` times is <= ``threshold`` or ``max_iterations`` calls were made.
    Returns times, the rolling CVs, whether it stabilized, and at which iteration."""
    window = max(2, min(window, max_iterations))  # a window longer than the bound could never fill
    times: list[float] = []
    cvs: list[float | None] = []
    stable_at = None
    for i in range(max_iterations):
        times.append(step())
        c = stats.cv(times[-window:]) if len(times) >= window else None
        cvs.append(c)
        if progress is not None:
            progress.advance(f"CV {c:.3f}" if c is not None else "")
        if c is not None and c <= threshold:
            stable_at = i + 1
            break
    return {
        "iterations": len(times),
        "times_s": times,
        "rolling_cv": cvs,
        "stable": stable_at is not None,
        "stable_at": stable_at,
        "final_cv": cvs[-1] if cvs else None,
        "window": window,
        "threshold": threshold,
        "max_iterations": max_iterations,
    }


@contextlib.contextmanager
def no_gc():
    """Python's cyclic garbage collector off while iterations are timed (collected once
    before), as ``timeit`` does: a collection lands in whichever step allocates when the
    threshold is crossed, and grows with the objects alive in the process. Measured
    (bench_check_verdicts.py, four unchanged ``--mode both`` re-checks in one process, load
    2-4 with the burners): ``compiled_alone`` read x1.12-x1.25 (all inconclusive) with it on,
    x1.00-x1.05 (all pass) with it off."""
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def measure(
    step: Callable[[], float],
    iterations: int | None,
    seconds: float | None,
    progress=None,
    min_iterations: int = 3,
) -> list[float]:
    """Call ``step`` ``iterations`` times, or until ``seconds`` of measured time have
    passed (at least ``min_iterations``)."""
    times: list[float] = []
    start = time.perf_counter()
    while True:
        if iterations is not None and len(times) >= iterations:
            break
        if (
            seconds is not None
            and len(times) >= min_iterations
            and time.perf_counter() - start >= seconds
        ):
            break
        times.append(step())
        if progress is not None:
            progress.advance()
    return times


def make_step(
    model: torch.nn.Module,
    inputs: Any,
    device: str,
    dtype: torch.dtype,
    launch: list | None = None,
) -> Callable[[], float]:
    """One synchronized, timed forward pass (seconds). With ``launch``, each call also appends
    the seconds the host spent in the forward call itself, before the final synchronize: its
    Python, dispatch, CPU fallbacks and any waiting of its own (a sleep, a sync inside)."""
    sync = T.synchronizer(device)
    dev_type = torch.device(device).type

    def step() -> float:
        sync()
        t0 = time.perf_counter()
        T.call(model, inputs, dev_type, dtype)
        if launch is not None:
            launch.append(time.perf_counter() - t0)
        sync()
        return time.perf_counter() - t0

    return step


def benchmark(
    label: str,
    model,
    inputs,
    device: str,
    cfg: CheckConfig,
    batch: int,
    ui,
    cold_s: float | None = None,
) -> dict:
    """Warm-up and measurement on one device alone (not interleaved; for callers that time
    one side, e.g. another execution mode); JSON-ready statistics (seconds)."""
    step = make_step(model, inputs, device, cfg.torch_dtype)
    wu = _warm(label, step, cfg, ui)
    total = cfg.iterations if cfg.seconds is None else None
    with (
        ui.progress(f"{label}: measuring", total) as p,
        timing_threads(cfg.timing_threads),
        no_gc(),
    ):
        t0 = time.perf_counter()
        times = measure(step, total, cfg.seconds, p)
        wall = time.perf_counter() - t0
    s = _summary(times, batch, device, wu, cold_s)
    s["measure_wall_s"] = wall
    return s


def measure_interleaved(
    steps: dict[str, Callable[[], float]],
    iterations: int | None,
    seconds: float | None,
    progress=None,
    min_iterations: int = 3,
    cpu_clock: Callable[[], float] | dict[str, Callable[[], float]] | None = None,
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Interleaved measurement: each iteration calls every step once, in an order rotated
    every iteration (no side always runs right after another), so all sides see the same
    momentary host. ``iterations`` iterations, or until ``seconds`` of wall time have passed
    (at least ``min_iterations``). Returns ``({name: [wall seconds]}, {name: [CPU seconds]})``:
    the step's wall time, and the CPU seconds ``cpu_clock`` (default: this process's CPU
    time, all threads; a dict gives each step its own, ``workclock.clocks``) advanced during
    the step, which time slices lost to other processes do not inflate."""
    names = list(steps)
    clock = (
        cpu_clock
        if isinstance(cpu_clock, dict)
        else {k: cpu_clock or time.process_time for k in names}
    )
    times: dict[str, list[float]] = {k: [] for k in names}
    cpu: dict[str, list[float]] = {k: [] for k in names}
    start = time.perf_counter()
    i = 0
    while True:
        if iterations is not None and i >= iterations:
            break
        if seconds is not None and i >= min_iterations and time.perf_counter() - start >= seconds:
            break
        for j in range(len(names)):
            k = names[(i + j) % len(names)]
            c0 = clock[k]()
            times[k].append(steps[k]())
            cpu[k].append(clock[k]() - c0)
        i += 1
        if progress is not None:
            progress.advance()
    return times, cpu


#: The compiled model's basis under ``--mode both`` (``workclock.COMPILED_SIDES``).
COMPILED_WORK_TIME_BASIS = (
    "the compiled model's process CPU seconds per step (all threads: XLA:CPU's pool does "
    "its work) and the host sides' thread CPU seconds per step, plus each side's least "
    "waiting of any iteration"
)


def work_time_basis(cfg: CheckConfig) -> str | None:
    """Why the latency statistic may use the work-time basis (perfstats.work_times) for
    this run, or None when it may not: only with one intra-op thread (``--timing-threads
    1``, the default; with more, OpenMP's other threads do part of the work and are not
    counted) and a CPU reference (a CUDA reference works on its GPU, which no CPU clock
    sees). Under ``--mode compile`` the device step is the compiled model, timed on the
    process's CPU time (``workclock``), as ``--mode both`` times its compiled model."""
    if cfg.timing_threads != 1 or cfg.reference != "cpu":
        return None
    if cfg.mode == "compile":
        return COMPILED_WORK_TIME_BASIS
    return (
        "the device's busy time (its stream workers' CPU time inside kernels) and the host sides' "
        "thread CPU seconds per step, plus the host sides' least waiting of any iteration"
    )


def _warm(label: str, step, cfg: CheckConfig, ui) -> dict:
    with (
        ui.progress(f"{label}: warming up", cfg.max_warmup) as p,
        timing_threads(cfg.timing_threads),
    ):
        return warm_up(step, cfg.max_warmup, cfg.effective_cv_window, cfg.cv_threshold, p)


def _summary(
    times: list[float], batch: int, device: str, wu: dict | None, cold_s: float | None
) -> dict:
    s = stats.summarize(times, batch)
    s["device"] = device
    s["times_s"] = times
    s["warmup"] = wu
    s["cold_s"] = cold_s
    s["cold_overhead_s"] = (cold_s - s["p50_s"]) if cold_s is not None and times else None
    return s


@contextlib.contextmanager
def timing_threads(n: int | None):
    """PyTorch's intra-op threads set to ``n`` (None: unchanged) for the duration."""
    if not n:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _measure_round(
    steps: dict, cfg: CheckConfig, ui, label: str, device: str
) -> tuple[tuple[dict, ...], float]:
    """One interleaved round: ((wall, cpu, launch) samples, seconds). ``launch`` holds the
    device step's host seconds in its forward call (``make_step``), index i = iteration i."""
    launch = steps["device"].launch
    launch.clear()
    total = cfg.iterations if cfg.seconds is None else None
    desc = f"Phase 3 {label}: measuring" + (
        f" {cfg.seconds:g} s" if cfg.seconds is not None else ""
    )
    with (
        ui.progress(desc, total) as p,
        timing_threads(cfg.timing_threads),
        workclock.counting(),
        no_gc(),
    ):
        t0 = time.perf_counter()
        wall, cpu = measure_interleaved(
            steps,
            total,
            cfg.seconds,
            p,
            cpu_clock=workclock.clocks(device, steps, cfg.mode == "compile"),
        )
        return (wall, cpu, {"device": list(launch)}), time.perf_counter() - t0


def _steps(session, reference, cfg: CheckConfig) -> dict[str, Callable[[], float]]:
    launch: list[float] = []
    steps = {
        "device": make_step(session.model, session.inputs, session.device, cfg.torch_dtype, launch)
    }
    steps["device"].launch = launch
    if reference is not None and not cfg.skip_reference_perf:
        steps["reference"] = make_step(reference[0], reference[1], cfg.reference, cfg.torch_dtype)
    if session.compiled_model is not None:  # --mode both: the compiled model in the same iterations
        steps["compiled"] = make_step(
            session.compiled_model, session.inputs, session.device, cfg.torch_dtype
        )
    steps["calibration"] = calibration.make_step("cpu")
    steps["calibration_matmul"] = calibration.make_matmul_step("cpu")
    steps["device_calibration"] = calibration.make_step(session.device)
    return steps


def _finish(res: Phase3Result, batch: int, cfg: CheckConfig, wu: dict) -> None:
    """(Re)compute the summaries and ratios from the pooled samples of every round; ``wu``:
    each side's warm-up."""
    smp = res.samples
    res.device = _summary(
        smp["device"], batch, res.device_name, wu.get("device"), res.cold["device"]
    )
    res.device["measure_wall_s"] = res.measure_wall_s
    res.calibration = stats.summarize(smp["calibration"], 1) | {"times_s": smp["calibration"]}
    res.device_calibration = stats.summarize(smp["device_calibration"], 1) | {
        "times_s": smp["device_calibration"]
    }
    if "calibration_matmul" in smp:
        res.calibration_matmul = stats.summarize(smp["calibration_matmul"], 1) | {
            "times_s": smp["calibration_matmul"]
        }
    if "compiled" in smp:
        res.compiled = _summary(
            smp["compiled"], batch, res.device_name, wu.get("compiled"), res.cold.get("compiled")
        )
        res.compiled["measure_wall_s"] = res.measure_wall_s
        res.compiled["ratio_to_eager_p50"] = res.compiled["p50_s"] / res.device["p50_s"]
    if "reference" in smp:
        res.reference = _summary(
            smp["reference"], batch, cfg.reference, wu.get("reference"), res.cold["reference"]
        )
        res.reference["measure_wall_s"] = res.measure_wall_s
        d, r = res.device, res.reference
        res.ratio = {
            "p50_latency_device_over_reference": d["p50_s"] / r["p50_s"] if r["p50_s"] else None,
            "throughput_device_over_reference": (
                d["throughput_samples_per_s"] / r["throughput_samples_per_s"]
                if r["throughput_samples_per_s"]
                else None
            ),
        }


def run(
    session,
    reference: tuple | None,
    cfg: CheckConfig,
    batch: int,
    cold_s: float | None,
    ui,
    skip_reason: str | None = None,
    reference_cold_s: float | None = None,
    compiled_cold_s: float | None = None,
) -> Phase3Result:
    """Run phase 3 on the device session and, unless skipped, the reference model.
    ``cold_s`` and ``reference_cold_s`` are the first iterations' seconds (phases 1, 2),
    ``compiled_cold_s`` the compiled model's cold first call (phase 1).

    With ``session.compiled_model`` (``--mode both``) the compiled model warms up on its own
    and is then measured in the same interleaved iterations (``samples["compiled"]``,
    summary in ``compiled``), so a baseline can compare it by the same statistic; when it
    raises while warming up, ``compiled`` records the failure and eager is timed alone.

    Each side warms up on its own; then device, reference and the host calibration
    workload (``calibration.py``) are measured interleaved, iteration by iteration.
    ``samples`` keeps the per-iteration wall seconds of each (index i = the same iteration),
    ``cpu_samples`` the CPU seconds of each step's work (``workclock``;
    ``cpu_clock`` says which clock), ``work_time_basis`` whether the latency statistic may
    decide on them (``work_time_basis``); with the compiled model, ``compiled_cpu_clock`` and
    ``compiled_work_time_basis`` say the same of its samples (the process's CPU time);
    ``another_round`` adds a round of the same size."""
    res = _skeleton(cfg, batch, skip_reason)
    if skip_reason:
        return res
    res.device_name = session.device
    res.cold = {"device": cold_s, "reference": reference_cold_s, "compiled": compiled_cold_s}
    steps = _steps(session, reference, cfg)
    _clocks(res, session.device, cfg, steps)
    torch.neuron.reset_fallback_stats()
    try:
        warmups, samples, wall = _warm_and_measure(res, session, steps, cfg, ui)
    except Exception as e:
        res.status = "fail"
        res.reason = f"the device raised during timing: {type(e).__name__}: {e}"
        return res
    res.samples, res.cpu_samples, res.launch_samples = samples
    res.measure_wall_s, res.rounds = wall, 1
    _finish(res, batch, cfg, warmups)
    _fallbacks_and_warnings(res, warmups)
    if "compiled" in res.samples:
        res.timing = res.timing.replace("device, reference", "device, compiled model, reference")
    res.status = "pass"
    res.reason = None
    return res


def _skeleton(cfg: CheckConfig, batch: int, skip_reason: str | None) -> Phase3Result:
    """Phase 3's result before anything is timed (as a skipped phase returns it)."""
    return Phase3Result(
        status="skipped",
        reason=skip_reason,
        samples_per_iteration=batch,
        settings={
            "iterations": cfg.iterations if cfg.seconds is None else None,
            "seconds": cfg.seconds,
            "max_warmup": cfg.max_warmup,
            "cv_window": cfg.effective_cv_window,
            "cv_threshold": cfg.cv_threshold,
        },
        timing="host wall time of one forward pass, inputs on the device, outputs left there, "
        "synchronized before and after; device, reference and host calibration interleaved "
        "iteration by iteration",
        ci_method="distribution-free 95% CI of the median from order statistics, exact "
        "Binomial(n, 1/2) coverage (Conover 1999, sec. 3.2)",
    )


def _clocks(res: Phase3Result, device: str, cfg: CheckConfig, steps: dict) -> None:
    """Which CPU clock the work-time samples are read on, and whether the latency statistic
    may decide on them (the device's and, with it, the compiled model's)."""
    threads_clock = workclock.device_busy_clock(device) is not None
    res.cpu_clock = (
        workclock.description(cfg.mode == "compile") if threads_clock else "process (all threads)"
    )
    res.work_time_basis = work_time_basis(cfg) if threads_clock else None
    if cfg.mode == "compile":  # the device step is the compiled model, on the process's CPU time
        res.busy_time_sides = ["device_calibration"]
    if "compiled" in steps:
        res.put("compiled_cpu_clock", workclock.COMPILED_DESCRIPTION if threads_clock else None)
        res.put(
            "compiled_work_time_basis", COMPILED_WORK_TIME_BASIS if res.work_time_basis else None
        )


def _warm_and_measure(res: Phase3Result, session, steps: dict, cfg: CheckConfig, ui) -> tuple:
    """Each side warmed up on its own (a compiled model that raises is dropped, its failure in
    ``res.compiled``), then one interleaved round measured. Returns the warm-ups, the
    round's samples and its wall seconds; raises when the device does."""
    warmups: dict[str, dict] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.neuron.fallback_mode(cfg.fallback) if cfg.fallback else contextlib.nullcontext():
            warmups["device"] = _warm(f"Phase 3 {session.device}", steps["device"], cfg, ui)
            if "reference" in steps:
                warmups["reference"] = _warm(
                    f"Phase 3 {cfg.reference} (reference)", steps["reference"], cfg, ui
                )
            if "compiled" in steps:
                try:
                    warmups["compiled"] = _warm("Phase 3 compiled", steps["compiled"], cfg, ui)
                except Exception as e:  # eager is still timed; the failure is reported
                    res.compiled = {
                        "status": "fail",
                        "reason": "the compiled model raised during "
                        f"timing: {type(e).__name__}: {e}",
                    }
                    session.compiled_model = None
                    del steps["compiled"]
            if cfg.baseline or cfg.save_baseline or cfg.baseline_process:
                # One interleaved round, not kept, where a baseline is saved or compared with:
                # the first interleaved round of a process read the reference/calibration
                # work-time ratio 1-8 % higher than the rounds after it (5 of 6 checks that
                # measured 3 rounds on a loaded host; docs/design/check-measurement.md, "Limits, measured"), and a
                # baseline pools 3 rounds while a re-check often decides on its first.
                _measure_round(steps, cfg, ui, "interleaved warm-up", session.device)
            samples, wall = _measure_round(
                steps,
                cfg,
                ui,
                " and ".join(k for k in steps if "calibration" not in k),
                session.device,
            )
    return warmups, samples, wall


def _fallbacks_and_warnings(res: Phase3Result, warmups: dict) -> None:
    """The device's CPU fallback seconds and their share of its timed iterations; a warning
    per side whose warm-up never became stable."""
    fb = torch.neuron.fallback_stats()
    fb_s = sum(v["seconds"] for v in fb.values())
    measured = res.device["total_s"] + sum(warmups["device"]["times_s"])
    res.device["fallback_seconds"] = fb_s
    res.device["fallback_share"] = fb_s / measured if measured > 0 else None
    for side, w in warmups.items():
        if not w["stable"]:
            res.warnings.append(_unstable(side, w))


def another_round(
    res: Phase3Result, session, reference: tuple | None, cfg: CheckConfig, batch: int, ui
) -> None:
    """Measure one more interleaved round (the models are warm) and pool its samples into
    ``res`` (summaries recomputed). Used when a baseline comparison was undecided."""
    steps = _steps(session, reference, cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.neuron.fallback_mode(cfg.fallback) if cfg.fallback else contextlib.nullcontext():
            samples, wall = _measure_round(
                steps, cfg, ui, f"round {res.rounds + 1}", session.device
            )
    for pooled, part in zip((res.samples, res.cpu_samples, res.launch_samples), samples):
        for k, v in part.items():
            pooled[k] += v
    res.measure_wall_s += wall
    res.rounds += 1
    fb_keep = {k: res.device.get(k) for k in ("fallback_seconds", "fallback_share")}
    sides = {"device": res.device, "reference": res.reference, "compiled": res.compiled}
    _finish(res, batch, cfg, {k: (v or {}).get("warmup") for k, v in sides.items()})
    res.device.update(fb_keep)


def _unstable(label: str, w: dict) -> str:
    cv = "n/a" if w["final_cv"] is None else f"{w['final_cv']:.3f}"
    return (
        f"{label} warm-up did not stabilize: rolling CV {cv} > {w['threshold']:g} (window "
        f"{w['window']}) after {w['iterations']} iterations (--max-warmup); measured anyway"
    )
