"""``torch_neuronx.metrics`` (``import torch_neuronx.metrics as met``): TorchNeuron's
counters and metrics, computed from torchneuron's records.

Counters (ints): ``CompilationCache.TotalCompilations`` (graphs compiled by
torch.compile plus eager kernel signatures first seen, each of which compiles a kernel
on Trainium: ``torch.neuron.kernel_signature_stats()``), ``CompilationCache.InMemoryHits``
and ``CompilationCache.PersistentHits`` (graphs found in the in-process or on-disk cache),
``CpuFallback.<op>`` (calls that ran on the CPU) and ``Narrowing.<op>`` (64-bit calls
narrowed). Metrics: ``CompilationCache.CompilationTime`` (ns per compiled graph). Counts
start at process start or the last ``clear_*``. Collection is always on here;
``set_enabled(False)`` hides the values (reads return nothing), as TorchNeuron's
disabled metrics do. ``TORCH_NEURONX_METRICS_ENABLED`` (1/true/yes) enables them at
start; default disabled, as TorchNeuron's.
"""

from __future__ import annotations

import os
from typing import Any

import torch

_enabled = os.environ.get("TORCH_NEURONX_METRICS_ENABLED", "").lower() in ("1", "true", "yes")
_counter_base: dict[str, int] = {}
_records_seen = 0


def is_enabled() -> bool:
    return _enabled


def set_enabled(enabled: bool) -> None:
    global _enabled
    _enabled = bool(enabled)


def _raw_counters() -> dict[str, int]:
    recs = torch.neuron.get_dynamo_metrics()
    c = {
        "CompilationCache.TotalCompilations": sum(r["cache"] == "compiled" for r in recs)
        + sum(torch.neuron.kernel_signature_stats().values()),
        "CompilationCache.InMemoryHits": sum(r["cache"] == "memory" for r in recs),
        "CompilationCache.PersistentHits": sum(r["cache"] == "disk" for r in recs),
    }
    for op, s in torch.neuron.fallback_stats().items():
        c[f"CpuFallback.{op}"] = int(s.get("calls", 0))
    for op, n in torch.neuron.narrowing_stats().items():
        c[f"Narrowing.{op}"] = int(n)
    return c


def _counters() -> dict[str, int]:
    if not _enabled:
        return {}
    c = {k: v - _counter_base.get(k, 0) for k, v in _raw_counters().items()}
    return {k: v for k, v in c.items() if v > 0}


def _compile_times_ns() -> list[float]:
    global _records_seen
    recs = torch.neuron.get_dynamo_metrics()
    if len(recs) < _records_seen:  # reset_dynamo_metrics() since clear_metrics()
        _records_seen = 0
    recs = recs[_records_seen:]
    return [r["compile_us"] * 1000.0 for r in recs if r["cache"] == "compiled"]


def get_counter_names() -> list[str]:
    """Names of the counters with a value (sorted)."""
    return sorted(_counters())


def get_counter_value(name: str) -> int | None:
    return _counters().get(name)


def get_metric_names() -> list[str]:
    return ["CompilationCache.CompilationTime"] if _enabled and _compile_times_ns() else []


def get_metric_data(name: str) -> dict[str, Any] | None:
    """``{"accumulator", "total_samples", "repr"}`` of a metric with samples, else None."""
    if name not in get_metric_names():
        return None
    t = _compile_times_ns()
    total = sum(t)
    return {"accumulator": total, "total_samples": len(t), "repr": f"{total / 1e6:.3f}ms"}


def report_filtered(
    counter_names: list[str] | None = None, metric_names: list[str] | None = None
) -> str:
    """The report of the named counters and metrics (all when both are None)."""
    everything = counter_names is None and metric_names is None
    lines = []
    for n in get_metric_names():
        if everything or n in (metric_names or []):
            d = get_metric_data(n)
            lines += [f"Metric: {n}", f"  TotalSamples: {d['total_samples']}"]
            lines.append(f"  Accumulator: {d['repr']}")
    for n in get_counter_names():
        if everything or n in (counter_names or []):
            lines += [f"Counter: {n}", f"  Value: {get_counter_value(n)}"]
    return "\n".join(lines) + ("\n" if lines else "")


def report() -> str:
    return report_filtered()


def clear_counters() -> None:
    global _counter_base
    _counter_base = _raw_counters()


def clear_metrics() -> None:
    global _records_seen
    _records_seen = len(torch.neuron.get_dynamo_metrics())


def clear_all() -> None:
    clear_counters()
    clear_metrics()


def get_compilation_metrics() -> dict[str, Any]:
    """The ``Compilation*`` counters (values) and metrics (accumulator, samples, formatted)."""
    out: dict[str, Any] = {
        n: get_counter_value(n) for n in get_counter_names() if "Compilation" in n
    }
    for n in get_metric_names():
        d = get_metric_data(n)
        out[n] = {
            "accumulator": d["accumulator"],
            "total_samples": d["total_samples"],
            "formatted": d["repr"],
        }
    return out
