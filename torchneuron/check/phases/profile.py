"""``torchneuron check --profile``: one steady-state iteration under torch.profiler.

After phase 3 has warmed the model up, one more forward pass runs under
``torch.profiler.profile(activities=[CPU, PrivateUse1])``. From its events:

* a timeline (rows: host dispatch = the outermost CPU operators, then each
  NeuronCore stream, then the host row of CPU fallbacks; fallbacks in red),
  drawn as an inline SVG in the HTML report;
* the top operators by self device time, the table
  ``prof.key_averages().table(sort_by="self_device_time_total")`` prints,
  which the JSON carries as ``result.profile.top_ops`` (``ProfileResult``).

Times are microseconds, relative to the iteration's first event.
"""

from __future__ import annotations

import time

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

from ..config import CheckConfig
from ..model import tensors as T
from ..result_profile import ProfileResult

TOP_OPS = 20
FALLBACK_PREFIX = "cpu_fallback: "
HOST_FALLBACK_ROW = 1000  # the resource id of the host row (csrc/profiler/kineto_plugin.cpp)


def _profile_one(model, inputs, device: str, dtype: torch.dtype):
    sync = T.synchronizer(device)
    dev_type = torch.device(device).type
    sync()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        with record_function("iteration"):
            T.call(model, inputs, dev_type, dtype)
            sync()
    return prof


def _row_name(e) -> str:
    if e.device_resource_id == HOST_FALLBACK_ROW:
        return f"neuron:{e.device_index} host (CPU fallback)"
    return f"neuron:{e.device_index} stream {e.device_resource_id}"


def _is_dispatched_op(e) -> bool:
    """An operator ("aten::mm") called from user code, not from inside another
    operator: the host dispatch row. User ranges (record_function,
    ProfilerStep#n) have no "::" and are looked through."""
    if "::" not in e.name:
        return False
    p = e.cpu_parent
    while p is not None:
        if "::" in p.name:
            return False
        p = p.cpu_parent
    return True


def summarize(prof) -> ProfileResult:
    """The profile of a finished ``torch.profiler.profile`` (status "ok"): timeline spans,
    top operators by self device time, totals (microseconds); no ``table`` or
    ``elapsed_s`` (``run`` adds them)."""
    events = list(prof.events())
    if not events:
        return ProfileResult(status="ok")
    device = [e for e in events if e.device_type == DeviceType.PrivateUse1]
    host = [e for e in events if e.device_type == DeviceType.CPU and _is_dispatched_op(e)]
    t0 = min(e.time_range.start for e in events)
    spans = _spans(host, device, t0)
    rows = ["host dispatch"] + sorted(
        {s["row"] for s in spans if s["row"] != "host dispatch"}, key=lambda r: ("host" in r, r)
    )
    return ProfileResult(
        status="ok",
        timeline=spans,
        rows=rows,
        span_us=max((s["start_us"] + s["dur_us"] for s in spans), default=0.0),
        top_ops=_top_ops(prof, device),
        device_time_us=sum(
            e.time_range.elapsed_us() for e in device if not e.name.startswith(FALLBACK_PREFIX)
        ),
        fallback_time_us=sum(
            e.time_range.elapsed_us() for e in device if e.name.startswith(FALLBACK_PREFIX)
        ),
    )


def _spans(host: list, device: list, t0: float) -> list[dict]:
    """The timeline's spans: host dispatch, then the device's kernels, copies and CPU fallbacks
    (microseconds from ``t0``)."""
    spans = []
    for e in host:
        spans.append(
            {
                "row": "host dispatch",
                "name": e.name,
                "start_us": e.time_range.start - t0,
                "dur_us": e.time_range.elapsed_us(),
                "kind": "cpu_op",
            }
        )
    for e in device:
        kind = (
            "cpu_fallback"
            if e.name.startswith(FALLBACK_PREFIX)
            else "memcpy"
            if e.name.startswith("Memcpy")
            else "kernel"
        )
        spans.append(
            {
                "row": _row_name(e),
                "name": e.name,
                "start_us": e.time_range.start - t0,
                "dur_us": e.time_range.elapsed_us(),
                "kind": kind,
            }
        )
    return spans


def _top_ops(prof, device: list) -> list[dict]:
    """The CPU ops with the most self device time (at most ``TOP_OPS``), CPU fallbacks marked."""
    # "cpu_fallback: aten::sort.stable" marks the CPU op "aten::sort".
    fallback_ops = {
        e.name[len(FALLBACK_PREFIX) :].split(".")[0]
        for e in device
        if e.name.startswith(FALLBACK_PREFIX)
    }
    top = []
    for r in sorted(prof.key_averages(), key=lambda r: r.self_device_time_total, reverse=True):
        if r.self_device_time_total <= 0 or len(top) >= TOP_OPS:
            break
        # A device event's own row (its self time equals a CPU op's) is the kernel; keep CPU ops.
        if r.device_type == DeviceType.PrivateUse1:
            continue
        top.append(
            {
                "op": r.key,
                "calls": r.count,
                "self_device_us": r.self_device_time_total,
                "device_total_us": r.device_time_total,
                "self_cpu_us": r.self_cpu_time_total,
                "cpu_fallback": r.key in fallback_ops,
            }
        )
    return top


def run(session, cfg: CheckConfig, ui=None) -> ProfileResult:
    """Profile one steady-state iteration of the phase-1 session (the model has
    been warmed up by phase 3). Never raises: a failure is status "error"."""
    if ui is not None:
        ui.step("Profiling one steady-state iteration")
    t = time.perf_counter()
    try:
        prof = _profile_one(session.model, session.inputs, session.device, cfg.torch_dtype)
        out = summarize(prof)
        out.table = prof.key_averages().table(sort_by="self_device_time_total", row_limit=TOP_OPS)
    except Exception as e:  # the profile is an extra: it must not sink the check
        out = ProfileResult(status="error", error=f"{type(e).__name__}: {e}")
    out.elapsed_s = time.perf_counter() - t
    return out
