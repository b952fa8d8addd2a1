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
import time
import warnings
from typing import Any, Callable, Optional

import torch

from . import stats
from . import tensors as T
from .config import CheckConfig


def warm_up(step: Callable[[], float], max_iterations: int, window: int, threshold: float,
            progress=None) -> dict:
    """Call ``step`` (returns one iteration's seconds) until the rolling CV of the last
    ``window`` times is <= ``threshold`` or ``max_iterations`` calls were made.
    Returns times, the rolling CVs, whether it stabilized, and at which iteration."""
    window = max(2, min(window, max_iterations))   # a window longer than the bound could never fill
    times: list[float] = []
    cvs: list[Optional[float]] = []
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
    return {"iterations": len(times), "times_s": times, "rolling_cv": cvs,
            "stable": stable_at is not None, "stable_at": stable_at,
            "final_cv": cvs[-1] if cvs else None, "window": window, "threshold": threshold,
            "max_iterations": max_iterations}


def measure(step: Callable[[], float], iterations: Optional[int], seconds: Optional[float],
            progress=None, min_iterations: int = 3) -> list[float]:
    """Call ``step`` ``iterations`` times, or until ``seconds`` of measured time have
    passed (at least ``min_iterations``)."""
    times: list[float] = []
    start = time.perf_counter()
    while True:
        if iterations is not None and len(times) >= iterations:
            break
        if seconds is not None and len(times) >= min_iterations and time.perf_counter() - start >= seconds:
            break
        times.append(step())
        if progress is not None:
            progress.advance()
    return times


def make_step(model: torch.nn.Module, inputs: Any, device: str, dtype: torch.dtype) -> Callable[[], float]:
    """One synchronized, timed forward pass (seconds)."""
    sync = T.synchronizer(device)
    dev_type = torch.device(device).type

    def step() -> float:
        sync()
        t0 = time.perf_counter()
        T.call(model, inputs, dev_type, dtype)
        sync()
        return time.perf_counter() - t0

    return step


def benchmark(label: str, model, inputs, device: str, cfg: CheckConfig, batch: int, ui,
              cold_s: Optional[float] = None) -> dict:
    """Warm-up and measurement on one device; JSON-ready statistics (seconds)."""
    step = make_step(model, inputs, device, cfg.torch_dtype)
    with ui.progress(f"{label}: warming up", cfg.max_warmup) as p:
        wu = warm_up(step, cfg.max_warmup, cfg.effective_cv_window, cfg.cv_threshold, p)
    total = cfg.iterations if cfg.seconds is None else None
    desc = f"{label}: measuring" + (f" {cfg.seconds:g} s" if cfg.seconds is not None else "")
    with ui.progress(desc, total) as p:
        t0 = time.perf_counter()
        times = measure(step, total, cfg.seconds, p)
        wall = time.perf_counter() - t0
    s = stats.summarize(times, batch)
    s["measure_wall_s"] = wall
    s["device"] = device
    s["times_s"] = times
    s["warmup"] = wu
    s["cold_s"] = cold_s
    s["cold_overhead_s"] = (cold_s - s["p50_s"]) if cold_s is not None else None
    return s


def run(session, reference: Optional[tuple], cfg: CheckConfig, batch: int, cold_s: Optional[float],
        ui, skip_reason: Optional[str] = None, reference_cold_s: Optional[float] = None) -> dict:
    """Run phase 3 on the device session and, unless skipped, the reference model.
    ``cold_s`` and ``reference_cold_s`` are the first iterations' seconds (phases 1, 2)."""
    res: dict[str, Any] = {
        "status": "skipped", "reason": skip_reason, "samples_per_iteration": batch,
        "settings": {"iterations": cfg.iterations if cfg.seconds is None else None,
                     "seconds": cfg.seconds, "max_warmup": cfg.max_warmup,
                     "cv_window": cfg.effective_cv_window, "cv_threshold": cfg.cv_threshold},
        "timing": "host wall time of one forward pass, inputs on the device, outputs left there, "
                  "synchronized before and after",
        "ci_method": "distribution-free 95% CI of the median from order statistics, exact "
                     "Binomial(n, 1/2) coverage (Conover 1999, sec. 3.2)",
        "device": None, "reference": None, "ratio": None, "warnings": [],
    }
    if skip_reason:
        return res
    torch.neuron.reset_fallback_stats()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with (torch.neuron.fallback_mode(cfg.fallback) if cfg.fallback else contextlib.nullcontext()):
                res["device"] = benchmark(f"Phase 3 {session.device}", session.model, session.inputs,
                                          session.device, cfg, batch, ui, cold_s)
    except Exception as e:
        res["status"] = "fail"
        res["reason"] = f"the device raised during timing: {type(e).__name__}: {e}"
        return res
    fb = torch.neuron.fallback_stats()
    fb_s = sum(v["seconds"] for v in fb.values())
    measured = res["device"]["total_s"] + sum(res["device"]["warmup"]["times_s"])
    res["device"]["fallback_seconds"] = fb_s
    res["device"]["fallback_share"] = fb_s / measured if measured > 0 else None
    if not res["device"]["warmup"]["stable"]:
        w = res["device"]["warmup"]
        res["warnings"].append(_unstable("device", w))
    if reference is not None and not cfg.skip_reference_perf:
        rmodel, rinputs = reference
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res["reference"] = benchmark(f"Phase 3 {cfg.reference} (reference)", rmodel, rinputs,
                                         cfg.reference, cfg, batch, ui, reference_cold_s)
        if not res["reference"]["warmup"]["stable"]:
            w = res["reference"]["warmup"]
            res["warnings"].append(_unstable("reference", w))
        d, r = res["device"], res["reference"]
        res["ratio"] = {
            "p50_latency_device_over_reference": d["p50_s"] / r["p50_s"] if r["p50_s"] else None,
            "throughput_device_over_reference": (d["throughput_samples_per_s"] / r["throughput_samples_per_s"]
                                                 if r["throughput_samples_per_s"] else None),
        }
    res["status"] = "pass"
    res["reason"] = None
    return res



def _unstable(label: str, w: dict) -> str:
    cv = "n/a" if w["final_cv"] is None else f"{w['final_cv']:.3f}"
    return (f"{label} warm-up did not stabilize: rolling CV {cv} > {w['threshold']:g} (window "
            f"{w['window']}) after {w['iterations']} iterations (--max-warmup); measured anyway")
