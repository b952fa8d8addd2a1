"""Comparison of a new run with its baseline: accuracy, latency (eager and compiled), compile
success, memory, the training check.
"""

from __future__ import annotations

from typing import Any

import torch

from .. import formatting
from .. import manifest as manifest_mod
from ..phases import memory as memory_mod
from ..result import CheckResult, Phase1Result
from ..result_baseline import BaselineComparison
from ..result_training import TrainingResult
from . import exact as exact_mod
from . import setup as baseline_setup
from .host_latency import as_metrics, latency, shown_only
from .host_latency import compiled_view as _compiled_view
from .store import Baseline, _measured_now, measured


def compare(
    base: Baseline,
    result: CheckResult,
    device_outputs: dict[str, torch.Tensor],
    dtype: torch.dtype,
    confirm: dict | None = None,
) -> BaselineComparison:
    """Compare a run with its baseline. Regressions (each one fails the check):

    - accuracy: the run's device outputs against the baseline's reference and fp64 outputs
      with the same benchmark rule as phase 2 (allclose, else RMSE vs fp64);
    - latency: ``latency`` (the interval of a normalized change entirely above the threshold),
      of the eager model (``latency``) and of the compiled one (``compiled.latency``), each when
      both runs timed it; a side's figures missing on either run are "not compared", with why;
      ``confirm``: fresh processes' figures of eager statistics this process read as regressed
      (``baseline_runs.confirm``), decided on the median over the processes;
    - compile: the baseline compiled the model and this run's compile failed (``compile_success``);
    - memory: peak allocated device memory above baseline * (1 + threshold) and above
      baseline + ``peak_memory_min_bytes`` (allocator-block noise of tiny models).

    Also listed, without failing: new or vanished fallback ops, changed narrowing, and the
    manifest entries that changed.
    """
    th = result.thresholds
    bmx = base.meta["metrics"]
    res = BaselineComparison(base.path, base.meta.get("created_utc"), accuracy={}, changes={})
    _accuracy(res, base, device_outputs, result.phase2.tol, dtype)
    seed = result.config.get("seed", 0)
    res.latency = _eager_latency(base, result, th["latency_p50"], seed, confirm)
    gate = bool(result.config.get("gate_host_latency"))
    res.regressions += res.latency.get("regressions", []) if gate else []
    res.compiled = compiled(
        base,
        result,
        th["latency_p50"],
        seed,
        skip=("model_or_inputs",)
        if "model_or_inputs" in (res.latency.get("statistics") or {})
        else (),
        gate=gate,
    )
    res.regressions += res.compiled["regressions"]
    if not gate:  # the emulator's host time: shown, decided only under --gate-host-latency
        for lat in (res.latency, res.compiled["latency"]):
            shown_only(lat)
    res.exact = exact_mod.compare(bmx, result, th)
    res.regressions += res.exact["regressions"]
    res.training = training(bmx, result.training, th)
    res.regressions += res.training.get("regressions", [])
    _memory(res, bmx, result.phase1, th)
    cur_fb, old_fb = set(result.phase1.fallback["ops"]), set(bmx.get("fallback_ops") or [])
    res.changes = {
        "new_fallback_ops": sorted(cur_fb - old_fb),
        "removed_fallback_ops": sorted(old_fb - cur_fb),
        "narrowing_changed": result.phase1.narrowing != (bmx.get("narrowing") or {}),
        "manifest": manifest_mod.diff(base.manifest, result.manifest),
    }
    res.status = "fail" if res.regressions else "pass"
    return res


def compile_only(base: Baseline, p1: Phase1Result) -> BaselineComparison:
    """After phase 1 failed: nothing to compare but whether the model still compiles (a
    compile failure fails phase 1)."""
    comp_cmp = compile_success(base, p1)
    return BaselineComparison(
        base.path,
        base.meta.get("created_utc"),
        status="fail" if comp_cmp.get("regressed") else "skipped",
        regressions=comp_cmp["regressions"],
        compiled={"compile": comp_cmp},
        reason="phase 1 failed: only whether the model compiles was compared",
    )


def _accuracy(
    res: BaselineComparison,
    base: Baseline,
    device_outputs: dict[str, torch.Tensor],
    tol: float,
    dtype,
) -> None:
    """Each device output against the baseline's reference and fp64 outputs (phase 2's rule),
    and whether it is bitwise the baseline's device output."""
    from ..phases.phase2 import compare as compare_tensors
    from ..phases.phase2 import failure_text

    for name, cur in device_outputs.items():
        r, g = base.outputs["reference"].get(name), base.outputs["fp64"].get(name)
        c = compare_tensors(cur, r, g, tol, dtype)
        bd = base.outputs["device"].get(name)
        c["identical_to_baseline_device"] = bool(
            bd is not None and bd.shape == cur.shape and torch.equal(bd, cur)
        )
        res.accuracy[name] = c
        if not c["passed"]:
            res.regressions.append(
                f"accuracy: output {name!r} does not match the baseline's reference "
                f"outputs ({failure_text(c)})"
            )


def _eager_latency(
    base: Baseline, result: CheckResult, threshold: float, seed: int, confirm: dict | None
) -> dict:
    """The eager model's latency against the baseline's, when both runs timed it with the same
    sides; else why not."""
    bmx, p3 = base.meta["metrics"], as_metrics(result.phase3)
    b_measured, c_measured = measured(base), _measured_now(result.phase1)
    other_sides = baseline_setup.differs(bmx, result.phase3)
    if b_measured == "eager" and c_measured == "eager" and other_sides:
        return _not_compared(other_sides)
    if b_measured == "eager" and c_measured == "eager":
        return latency(bmx, p3, threshold, seed, confirm=confirm)
    return _not_compared(
        "the baseline timed the compiled model only (--mode compile): its figures are compared with "
        "this run's compiled ones"
        if b_measured == "compiled"
        else "this run timed the compiled model only (--mode compile): it is compared with the baseline's "
        "compiled figures"
    )


def _memory(res: BaselineComparison, bmx: dict, p1: Phase1Result, th: dict) -> None:
    """Peak device memory against the baseline's (``res.memory``): a regression above
    ``baseline * (1 + peak_memory)`` and ``baseline + peak_memory_min_bytes``; a compiled
    model's peak never compared with an eager one's."""
    cur_mem, cur_basis = memory_mod.measured_peak(p1)
    base_basis = bmx.get("peak_allocated_basis") or "run ahead"
    if bmx.get("peak_allocated_bytes") and (
        (base_basis == "compiled") != (cur_basis == "compiled") or cur_mem is None
    ):
        # a compiled model's peak is never compared with an eager one's
        res.memory = {
            "regressed": False,
            "note": "not compared: "
            + (
                "this run's compiled peak was not measured"
                if cur_mem is None
                else f"the baseline's peak is the {'compiled' if base_basis == 'compiled' else 'eager'} model's, "
                f"this run's the {'compiled' if cur_basis == 'compiled' else 'eager'} model's"
            ),
        }
    elif bmx.get("peak_allocated_bytes"):
        base_mem = bmx["peak_allocated_bytes"]
        limit = max(base_mem * (1 + th["peak_memory"]), base_mem + th["peak_memory_min_bytes"])
        change = cur_mem / base_mem - 1
        res.memory = {
            "baseline_peak_allocated_bytes": base_mem,
            "current_peak_allocated_bytes": cur_mem,
            "change": change,
            "threshold": th["peak_memory"],
            "min_increase_bytes": th["peak_memory_min_bytes"],
            "limit_bytes": limit,
            "regressed": cur_mem > limit,
            # older baselines hold the run-ahead peak (phase1 / memory.py), never below in-order
            "basis": {"baseline": base_basis, "current": cur_basis},
        }
        if res.memory["regressed"]:
            res.regressions.append(
                f"memory: peak allocated {cur_mem / 2**20:.2f} MiB is {change:+.1%} vs "
                f"the baseline's {bmx['peak_allocated_bytes'] / 2**20:.2f} MiB "
                f"(threshold +{th['peak_memory']:.0%} and "
                f"+{formatting.nbytes(th['peak_memory_min_bytes'])})"
            )


#: Why training step times are shown, not decided, against a baseline.
TRAINING_TIME_NOTE = (
    "step times shown, not decided: a few synchronized wall-time steps, not interleaved with a "
    "reference, give no interval a verdict could rest on on a shared host"
)


def training(bmx: dict, t: TrainingResult | None, th: dict) -> dict:
    """The training check against the baseline's: peak allocated device memory with the
    optimizer's state by the inference memory rule (above ``baseline * (1 + peak_memory)`` and
    by more than ``peak_memory_min_bytes``: a regression); step times listed beside."""
    if t is None or t.status not in ("pass", "fail"):
        return _not_compared(
            "this run has no training check (an inference factory, or it did not run)"
        )
    b = bmx.get("training")
    if not b or not b.get("peak_allocated_bytes"):
        return _not_compared(
            "the baseline has no training figures (saved from an inference factory, from a failing "
            "training check, or by an earlier version: save it again)"
        )
    base_mem, cur_mem = b["peak_allocated_bytes"], t.peak_allocated_bytes or 0
    limit = max(base_mem * (1 + th["peak_memory"]), base_mem + th["peak_memory_min_bytes"])
    bt, ct = b.get("step_time") or {}, t.step_time or {}
    out = {
        "baseline_peak_allocated_bytes": base_mem,
        "current_peak_allocated_bytes": cur_mem,
        "change": cur_mem / base_mem - 1,
        "threshold": th["peak_memory"],
        "min_increase_bytes": th["peak_memory_min_bytes"],
        "limit_bytes": limit,
        "regressed": cur_mem > limit,
        "step_time": {
            "baseline_device_p50_s": bt.get("device_p50_s"),
            "current_device_p50_s": ct.get("device_p50_s"),
            "baseline_reference_p50_s": bt.get("reference_p50_s"),
            "current_reference_p50_s": ct.get("reference_p50_s"),
            "note": TRAINING_TIME_NOTE,
        },
        "regressions": [],
    }
    out["decision"] = "regressed" if out["regressed"] else "pass"
    if out["regressed"]:
        out["regressions"].append(
            f"training memory: peak allocated with the optimizer's state {cur_mem / 2**20:.2f} MiB is "
            f"{out['change']:+.1%} vs the baseline's {base_mem / 2**20:.2f} MiB (threshold +{th['peak_memory']:.0%} "
            f"and +{formatting.nbytes(th['peak_memory_min_bytes'])})"
        )
    return out


def _not_compared(why: str) -> dict:
    return {
        "regressed": False,
        "decision": "pass",
        "regressions": [],
        "note": f"not compared: {why}",
    }


#: Why compiled figures are compared on the wall-time basis when they are.
COMPILED_BASIS = (
    "the compiled model's process CPU time is missing on a side (--mode compile, --timing-threads "
    "other than 1, a non-CPU reference, or a baseline saved by an earlier version: save it again)"
)


def compile_success(base: Baseline, p1: Phase1Result) -> dict:
    """Whether the model still compiles: a regression when the baseline compiled it with
    ``torch.compile(backend="neuron")`` and this run's compile failed. Graph and graph-break
    counts are listed beside, without failing."""
    bc, cc = base.meta["metrics"].get("compile"), p1.compile
    if bc is None:
        return _not_compared(
            "the baseline does not record whether the model compiled (saved by an earlier "
            "version: save it again)"
        )
    if not bc.get("checked"):
        return _not_compared(
            "the baseline did not compile the model (--mode eager, or no compile path)"
        )
    if not cc.checked:
        return _not_compared(
            "this run did not compile the model (" + (cc.note or "--mode eager") + ")"
        )
    out: dict[str, Any] = {
        "baseline_ok": bool(bc.get("ok")),
        "current_ok": bool(cc.ok),
        "regressions": [],
    }
    for k in ("compiled_graphs", "graph_breaks", "recompiles"):
        out[k] = {"baseline": bc.get(k), "current": getattr(cc, k)}
    # counts; None: a baseline saved before fallback graphs were recorded
    nfb = [None if x is None else len(x) for x in (bc.get("fallback_graphs"), cc.fallback_graphs)]
    out["fallback_graphs"] = {"baseline": nfb[0], "current": nfb[1]}
    # graphs that fell back to eager since the baseline: partly off the compiled path
    fell_off = bool(bc.get("ok")) and bool(cc.ok) and nfb[0] is not None and (nfb[1] or 0) > nfb[0]
    out["regressed"] = bool(bc.get("ok")) and (not cc.ok or fell_off)
    out["decision"] = "regressed" if out["regressed"] else "pass"
    e, was = cc.error or {}, formatting.graphs_ran(bc)
    out["current_not_compiled"] = (
        e.get("type") == "NotCompiled"
    )  # it ran, but no graph ran compiled
    if fell_off:
        out["regressions"].append(
            f"compile: {nfb[1] - nfb[0]} more graph(s) fell back to eager than in the baseline ({was}; now "
            f"{formatting.graphs_ran(cc)}): the model partly fell off the compiled path"
        )
    elif out["regressed"] and e.get("type") == "NotCompiled":
        out["regressions"].append(
            f"compile: the model ran compiled in the baseline ({was}); now it fell off the "
            f"compiled path: {e.get('short_message') or ''}"
        )
    elif out["regressed"]:
        out["regressions"].append(
            f"compile: the model compiled in the baseline ({was}); now "
            f"torch.compile(backend='neuron') fails at {e.get('compile_stage') or e.get('stage')}: {e.get('type')}"
            + (f" in {e['op']}" if e.get("op") else "")
            + f": {e.get('short_message') or ''}"
        )
    return out


def compiled(
    base: Baseline,
    result: CheckResult,
    threshold: float,
    seed: int = 0,
    skip: tuple = (),
    gate: bool = True,
) -> dict:
    """The compiled model against the baseline's: compile success (``compile_success``) and its
    latency by ``latency``'s statistics and verdict rules, on the work-time basis with the
    process's CPU time as its clock (``workclock.COMPILED_SIDES``) where both runs measured it,
    else on wall seconds (``COMPILED_BASIS``). The compiled figures are phase 3's device figures under
    ``--mode compile`` and its ``compiled`` figures under ``--mode both``, on either side.
    ``skip``: statistics not repeated here (``model_or_inputs``, when eager's decided it);
    ``gate``: whether the latency's regressions fail (``--gate-host-latency``)."""
    res: dict[str, Any] = {"compile": compile_success(base, result.phase1), "regressions": []}
    res["regressions"] += res["compile"].get("regressions", [])
    bmx, p3 = base.meta["metrics"], as_metrics(result.phase3)
    b = bmx if measured(base) == "compiled" else _compiled_view(bmx, bmx.get("compiled"), "p50_s")
    c = (
        p3
        if _measured_now(result.phase1) == "compiled"
        else _compiled_view(p3, p3.get("compiled"), "device")
    )
    if c is None:
        why = (
            "this run did not time the compiled model (--mode eager)"
            if result.config.get("mode") == "eager"
            else "this run has no compiled figures ("
            + (
                (p3.get("compiled") or {}).get("reason")
                or "phase 3 did not time the compiled model"
            )
            + ")"
        )
        res["latency"] = _not_compared(why)
    elif b is None:
        res["latency"] = _not_compared(
            "the baseline has no compiled figures (saved with --mode eager, or by an "
            "earlier version: save it again with --mode both or --mode compile)"
        )
    else:
        res["latency"] = latency(
            b, c, threshold, seed, side="compiled", skip=skip, wall_reason=COMPILED_BASIS
        )
    res["regressions"] += res["latency"].get("regressions", []) if gate else []
    return res
