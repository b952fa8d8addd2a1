"""``torchneuron check --profile``: one steady-state iteration under torch.profiler.

After phase 3 has warmed the model up, one more forward pass runs under
``torch.profiler.profile(activities=[CPU, PrivateUse1])``. From its events:

* a timeline (rows: host dispatch = the outermost CPU operators, then each
  NeuronCore stream, then the host row of CPU fallbacks; fallbacks in red),
  drawn as an inline SVG in the HTML report;
* the top operators by self device time, the table
  ``prof.key_averages().table(sort_by="self_device_time_total")`` prints,
  which the JSON carries as ``result["profile"]["top_ops"]``.

Times are microseconds, relative to the iteration's first event.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from torch.autograd import DeviceType

from . import tensors as T
from .config import CheckConfig

TOP_OPS = 20
FALLBACK_PREFIX = "cpu_fallback: "
HOST_FALLBACK_ROW = 1000  # the resource id of the host row (csrc/profiler/kineto_plugin.cpp)


def _profile_one(model, inputs, device: str, dtype: torch.dtype):
    from torch.profiler import ProfilerActivity, profile, record_function

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


def summarize(prof) -> dict[str, Any]:
    """The JSON-ready profile of a finished ``torch.profiler.profile``: timeline
    spans, top operators by self device time, totals (microseconds)."""
    events = list(prof.events())
    device = [e for e in events if e.device_type == DeviceType.PrivateUse1]
    host = [e for e in events if e.device_type == DeviceType.CPU and _is_dispatched_op(e)]
    if not events:
        return {
            "timeline": [],
            "top_ops": [],
            "device_time_us": 0.0,
            "fallback_time_us": 0.0,
            "rows": [],
            "span_us": 0.0,
        }
    t0 = min(e.time_range.start for e in events)
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
    rows = ["host dispatch"] + sorted(
        {s["row"] for s in spans if s["row"] != "host dispatch"}, key=lambda r: ("host" in r, r)
    )
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
    return {
        "timeline": spans,
        "rows": rows,
        "span_us": max((s["start_us"] + s["dur_us"] for s in spans), default=0.0),
        "top_ops": top,
        "device_time_us": sum(
            e.time_range.elapsed_us() for e in device if not e.name.startswith(FALLBACK_PREFIX)
        ),
        "fallback_time_us": sum(
            e.time_range.elapsed_us() for e in device if e.name.startswith(FALLBACK_PREFIX)
        ),
    }


def run(session, cfg: CheckConfig, ui=None) -> dict[str, Any]:
    """Profile one steady-state iteration of the phase-1 session (the model has
    been warmed up by phase 3). Never raises: a failure is reported in the dict."""
    if ui is not None:
        ui.step("Profiling one steady-state iteration")
    t = time.perf_counter()
    try:
        prof = _profile_one(session.model, session.inputs, session.device, cfg.torch_dtype)
        out = summarize(prof)
        out["table"] = prof.key_averages().table(
            sort_by="self_device_time_total", row_limit=TOP_OPS
        )
        out["status"] = "ok"
    except Exception as e:  # the profile is an extra: it must not sink the check
        out = {
            "status": "error",
            "error": f"{type(e).__name__}: {e}",
            "timeline": [],
            "top_ops": [],
            "rows": [],
            "span_us": 0.0,
            "device_time_us": 0.0,
            "fallback_time_us": 0.0,
        }
    out["elapsed_s"] = time.perf_counter() - t
    return out


# ---------------------------------------------------------------- HTML

_COLORS = {"cpu_op": "#8da0cb", "kernel": "#66c2a5", "memcpy": "#fc8d62", "cpu_fallback": "#d62728"}


def plot_timeline(p: dict, path: str | None = None) -> str | None:
    """The timeline as inline SVG (or saved to ``path``: PNG/SVG by suffix, returns None)."""
    if not p.get("timeline"):
        return None
    from .report_html import _plt, _svg

    plt = _plt()
    rows = p["rows"]
    fig, ax = plt.subplots(figsize=(11, 0.5 + 0.45 * len(rows)))
    for i, row in enumerate(rows):
        for kind, color in _COLORS.items():
            bars = [
                (s["start_us"] / 1e3, max(s["dur_us"], 0.5) / 1e3)
                for s in p["timeline"]
                if s["row"] == row and s["kind"] == kind
            ]
            if bars:
                ax.broken_barh(bars, (i - 0.4, 0.8), facecolors=color, edgecolor="none")
    ax.set_yticks(range(len(rows)), rows)
    ax.invert_yaxis()
    ax.set_xlabel("ms from the start of the iteration")
    ax.set_xlim(0, max(p["span_us"], 1.0) / 1e3)
    from matplotlib.patches import Patch

    ax.legend(
        handles=[Patch(color=c, label=k.replace("_", " ")) for k, c in _COLORS.items()],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.35 if len(rows) < 4 else -0.2),
        ncol=4,
        frameon=False,
    )
    ax.set_title("One steady-state iteration: host dispatch and NeuronCore streams")
    if path:
        fig.savefig(path, bbox_inches="tight", dpi=130)
        plt.close(fig)
        return None
    return _svg(fig)


def html_section(p: dict | None) -> str:
    """The report's "Profile" section (empty when --profile was not given)."""
    if not p:
        return ""
    from .report_html import _e, _table

    if p.get("status") == "skipped":
        return f'<h2 id="profile">Profile</h2><div class="note">not profiled: {_e(p.get("reason"))}</div>'
    if p.get("status") != "ok":
        return f'<h2 id="profile">Profile</h2><div class="note">profiling failed: {_e(p.get("error"))}</div>'
    svg = plot_timeline(p)
    rows = [
        [
            (_e(o["op"]) + (" <b>(CPU fallback)</b>" if o["cpu_fallback"] else "")),
            str(o["calls"]),
            f"{o['self_device_us']:.1f}",
            f"{o['device_total_us']:.1f}",
            f"{o['self_cpu_us']:.1f}",
        ]
        for o in p["top_ops"]
    ]
    table = _table(
        ["operator", "calls", "self device µs", "device total µs", "self CPU µs"],
        rows,
        (1, 2, 3, 4),
    )
    return f"""<h2 id="profile">Profile — one steady-state iteration</h2>
<p class="caption">torch.profiler with ProfilerActivity.PrivateUse1: {p["device_time_us"]:.0f} µs of device
work, {p["fallback_time_us"]:.0f} µs of CPU fallbacks (red), over {p["span_us"]:.0f} µs.</p>
<div class="plots"><div class="plot">{svg or ""}</div></div>
<h3>Top operators by self device time</h3>
{table}
"""
