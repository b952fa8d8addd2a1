"""The kernel trace of one forward pass: what the emulated device ran, exactly.

The runtime records every task its streams run and every CPU fallback (``csrc/runtime/
activity.h``); ``torch.profiler`` reads them through the Kineto plugin
(``csrc/profiler/kineto_plugin.cpp``), each linked to the ATen operator that launched it,
whose input shapes and dtypes the profiler records (``record_shapes``). From them, per pass:
device kernels (count, and by name), CPU fallbacks (calls by operator), host<->device copies
(count and bytes), compiled-graph executions and distinct kernel signatures. These depend on
the program only, never on the host's load: two runs of an unchanged build give equal values.
"""

from __future__ import annotations

from collections import Counter

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from torchneuron.compiler import fused

from ..kernel import DTYPE_BYTES, PROFILER_DTYPE, Kernel  # noqa: F401  (DTYPE_BYTES re-exported)
from ..model import tensors as T
from .phase1 import _quiet_stderr_fd  # Kineto's profiler_start/stop lines, from C++

FALLBACK_PREFIX = "cpu_fallback: "
#: a fused segment's executable (adaptive eager execution, ``compiler/fused.py``)
FUSED_PREFIX = "fused_"


def _kind(name: str, activity: str) -> str:
    if activity == "gpu_memcpy":
        return "htod" if "HtoD" in name else "dtoh" if "DtoH" in name else "dtod"
    if name.startswith(FALLBACK_PREFIX):
        return "fallback"
    if name.startswith(FUSED_PREFIX):
        return "fused"
    # ATen kernels are "namespace::op"; a compiled executable is named by its graph
    return "kernel" if "::" in name else "graph"


def record(fn, sync) -> list[Kernel]:
    """Run ``fn()`` then ``sync()`` under torch.profiler; the device activities in order."""
    sync()
    with _quiet_stderr_fd():
        with profile(
            activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], record_shapes=True
        ) as prof:
            fn()
            sync()
    events = prof.profiler.kineto_results.events()
    cpu = {e.correlation_id(): e for e in events if e.device_type() == DeviceType.CPU}
    out = []
    for e in events:
        if e.device_type() == DeviceType.CPU:
            continue
        parent = cpu.get(e.linked_correlation_id())
        k = Kernel(e.name(), _kind(e.name(), str(e.activity_type())))
        if parent is not None:
            k.op, k.shapes, k.dtypes = parent.name(), parent.shapes(), parent.dtypes()
            k.concrete = list(parent.concrete_inputs())
        if k.kind == "fused":
            k.ops = segment_kernels(k.name)
        out.append(k)
    return out


def segment_kernels(name: str) -> list[Kernel]:
    """The eager kernels of the fused segment launched as ``name`` (``fused.segment_ops``);
    empty when unknown."""
    return [
        Kernel(op, "kernel", op, shapes, [PROFILER_DTYPE.get(d, str(d)) for d in dtypes], args)
        for op, shapes, dtypes, args in fused.segment_ops(name) or []
    ]


def signature(k: Kernel) -> str:
    """What a kernel compiles for on Trainium: its name, input shapes and dtypes."""
    ins = ", ".join(f"{d}{list(s)}" for s, d in k.tensors())
    return f"{k.name}({ins})"


def new_signatures(before: list[Kernel], after: list[Kernel]) -> list[str]:
    """Kernel signatures of ``after`` not in ``before``: on Trainium each is a new kernel to
    compile, so shapes that change from one pass to the next compile in the loop."""
    seen = {signature(k) for k in before if k.kind == "kernel"}
    return sorted({signature(k) for k in after if k.kind == "kernel"} - seen)


def summarize(kernels: list[Kernel]) -> dict:
    """The exact quantities of a pass (JSON-ready)."""
    by_kind: dict[str, list[Kernel]] = {}
    for k in kernels:
        by_kind.setdefault(k.kind, []).append(k)
    dev = by_kind.get("kernel", [])
    fb = by_kind.get("fallback", [])
    return {
        "kernels": len(dev),
        "kernels_by_op": dict(sorted(Counter(k.name for k in dev).items())),
        "signatures": len({signature(k) for k in dev}),
        # graph names carry a per-process counter (model_3_inference_3): counted, not named
        "graphs": len(by_kind.get("graph", [])),
        # adaptive eager execution: fused segments launched, and the eager kernels they hold
        "fused_segments": len(by_kind.get("fused", [])),
        "fused_kernels": sum(len(k.ops) for k in by_kind.get("fused", [])),
        "fallback_calls": len(fb),
        "fallbacks_by_op": dict(
            sorted(Counter(k.name[len(FALLBACK_PREFIX) :] for k in fb).items())
        ),
        "copies": {
            d: {
                "count": len(by_kind.get(d, [])),
                "bytes": sum(k.copy_bytes() for k in by_kind.get(d, [])),
            }
            for d in ("htod", "dtoh", "dtod")
        },
    }


def trace_pass(model, inputs, device: str, dtype: torch.dtype) -> list[Kernel]:
    """The kernel trace of one forward pass of ``model`` (warm: call it after a first pass)."""
    dev_type = torch.device(device).type
    return record(lambda: T.call(model, inputs, dev_type, dtype), T.synchronizer(device))
