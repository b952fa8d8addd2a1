"""The exact quantities of a check: what the device runs per forward pass, eager and compiled.

After phase 3 (the model warm), two traced passes of the eager model and two of the compiled
model (``--mode both`` or ``compile``) give the second pass's kernel counts, CPU fallbacks,
copies and graph executions (``trace.py``), the kernel signatures it ran that the first did
not (shapes changing between passes), and the eager pass's projected Trainium time
(``projection/kernels.py``), and with adaptive eager execution on, its counters over the
pass and the check (``concatenation``). Beside them: phase 1's compiled graphs, graph breaks and
recompiles and its peak device memory in program order. None depends on the host's load:
baselines gate on these (``baseline/exact.py``).
"""

from __future__ import annotations

import torch

from ..projection import kernels as kproj
from ..result import Phase1Result
from ..result_exact import ExactResult
from . import memory, trace


def _compile_counts(p1: Phase1Result) -> dict | None:
    c = p1.compile
    if not c.checked:
        return None
    return {k: getattr(c, k) for k in ("compiled_graphs", "graph_breaks", "recompiles")}


def _flat_stats() -> dict:
    st = torch.neuron.concatenation_stats()
    return {"buffered": st["buffered"], "direct": st["direct"], **st["fused"]}


def concatenation(before: dict, after: dict) -> dict | None:
    """Adaptive eager execution's counters (``torch.neuron.concatenation_stats``) over the
    traced eager pass (``after`` - ``before``) and, under ``"check"``, since the process
    began (``after``: compile seconds are there only); None when the mode is off (nothing
    was buffered or enqueued through it)."""
    if not after["buffered"] and not after["direct"]:
        return None
    out = {k: after[k] - before[k] for k in after if k != "compile_s"}
    out["check"] = dict(after)
    return out


def run(session, cfg, p1: Phase1Result, ui=None) -> ExactResult:
    """The exact quantities of the warm model (``ExactResult``); never raises (a failure is
    reported, status "error": the exact gates then compare nothing)."""
    if ui is not None:
        ui.step("Tracing one pass: device kernels, fallbacks, copies")
    launch_us = (
        kproj.DEFAULT_LAUNCH_US if cfg.launch_overhead_us is None else cfg.launch_overhead_us
    )
    peak, basis = memory.measured_peak(p1)
    out = ExactResult(
        "pass",
        launch_us=launch_us,
        compile=_compile_counts(p1),
        peak_allocated_bytes=peak,
        peak_allocated_basis=basis,
    )
    # --mode compile: session.model is torch.compile's wrapper, its eager module _orig_mod
    eager = getattr(session.model, "_orig_mod", session.model)
    compiled = session.compiled_model
    if compiled is None and eager is not session.model:
        compiled = session.model
    try:
        for side, model in (("eager", eager), ("compiled", compiled)):
            if model is None:
                continue
            # two passes: the second's summary, and its signatures the first did not have
            first = trace.trace_pass(model, session.inputs, session.device, cfg.torch_dtype)
            before = _flat_stats()
            ks = trace.trace_pass(model, session.inputs, session.device, cfg.torch_dtype)
            after = _flat_stats()
            summary = trace.summarize(ks)
            setattr(out, side, summary)  # kept as far as it got should the rest raise
            summary["new_signatures"] = trace.new_signatures(first, ks)
            if side == "eager":
                summary["projection"] = kproj.project_all(ks, launch_us)
                summary["concatenation"] = concatenation(before, after)
    except Exception as e:  # an extra measurement: it must not sink the check
        out.status = "error"
        out.error = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    torch.neuron.synchronize(session.device)
    return out
