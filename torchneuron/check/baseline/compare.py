"""Comparison of a new run with its baseline: accuracy, latency (eager and compiled), compile
success, memory, the training check.
"""

from __future__ import annotations

from typing import Any

import torch

from .. import formatting
from .. import manifest as manifest_mod
from ..phases import memory as memory_mod
from . import exact as exact_mod
from . import runs as baseline_runs
from . import setup as baseline_setup
from .store import Baseline, _measured_now, measured


def compare(
    base: Baseline,
    result: dict,
    device_outputs: dict[str, torch.Tensor],
    dtype: torch.dtype,
    confirm: dict | None = None,
) -> dict:
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
    from ..phases.phase2 import compare as compare_tensors
    from ..phases.phase2 import failure_text

    th = result["thresholds"]
    bmx = base.meta["metrics"]
    tol = result["phase2"]["tol"]
    res: dict[str, Any] = {
        "path": base.path,
        "created_utc": base.meta.get("created_utc"),
        "regressions": [],
        "accuracy": {},
        "latency": None,
        "memory": None,
        "changes": {},
    }
    for name, cur in device_outputs.items():
        r, g = base.outputs["reference"].get(name), base.outputs["fp64"].get(name)
        c = compare_tensors(cur, r, g, tol, dtype)
        bd = base.outputs["device"].get(name)
        c["identical_to_baseline_device"] = bool(
            bd is not None and bd.shape == cur.shape and torch.equal(bd, cur)
        )
        res["accuracy"][name] = c
        if not c["passed"]:
            res["regressions"].append(
                f"accuracy: output {name!r} does not match the baseline's reference "
                f"outputs ({failure_text(c)})"
            )
    p3, seed = result["phase3"] or {}, result["config"].get("seed", 0)
    b_measured, c_measured = measured(base), _measured_now(result["phase1"])
    other_sides = baseline_setup.differs(bmx, p3)
    if b_measured == "eager" and c_measured == "eager" and other_sides:
        res["latency"] = _not_compared(other_sides)
    elif b_measured == "eager" and c_measured == "eager":
        res["latency"] = latency(bmx, p3, th["latency_p50"], seed, confirm=confirm)
    else:
        res["latency"] = _not_compared(
            "the baseline timed the compiled model only (--mode compile): its figures are compared with "
            "this run's compiled ones"
            if b_measured == "compiled"
            else "this run timed the compiled model only (--mode compile): it is compared with the baseline's "
            "compiled figures"
        )
    gate = bool(result["config"].get("gate_host_latency"))
    res["regressions"] += res["latency"].get("regressions", []) if gate else []
    res["compiled"] = compiled(
        base,
        result,
        th["latency_p50"],
        seed,
        skip=("model_or_inputs",)
        if "model_or_inputs" in (res["latency"].get("statistics") or {})
        else (),
        gate=gate,
    )
    res["regressions"] += res["compiled"]["regressions"]
    if not gate:  # the emulator's host time: shown, decided only under --gate-host-latency
        for lat in (res["latency"], res["compiled"]["latency"]):
            shown_only(lat)
    res["exact"] = exact_mod.compare(bmx, result, th)
    res["regressions"] += res["exact"]["regressions"]
    res["training"] = training(bmx, result.get("training") or {}, th)
    res["regressions"] += res["training"].get("regressions", [])
    cur_mem, cur_basis = memory_mod.measured_peak(result["phase1"])
    base_basis = bmx.get("peak_allocated_basis") or "run ahead"
    if bmx.get("peak_allocated_bytes") and (
        (base_basis == "compiled") != (cur_basis == "compiled") or cur_mem is None
    ):
        # a compiled model's peak is never compared with an eager one's
        res["memory"] = {
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
        res["memory"] = {
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
        if res["memory"]["regressed"]:
            res["regressions"].append(
                f"memory: peak allocated {cur_mem / 2**20:.2f} MiB is {change:+.1%} vs "
                f"the baseline's {bmx['peak_allocated_bytes'] / 2**20:.2f} MiB "
                f"(threshold +{th['peak_memory']:.0%} and "
                f"+{formatting.nbytes(th['peak_memory_min_bytes'])})"
            )
    cur_fb, old_fb = set(result["phase1"]["fallback"]["ops"]), set(bmx.get("fallback_ops") or [])
    res["changes"] = {
        "new_fallback_ops": sorted(cur_fb - old_fb),
        "removed_fallback_ops": sorted(old_fb - cur_fb),
        "narrowing_changed": result["phase1"]["narrowing"] != (bmx.get("narrowing") or {}),
        "manifest": manifest_mod.diff(base.manifest, result["manifest"]),
    }
    res["status"] = "fail" if res["regressions"] else "pass"
    return res


#: Why training step times are shown, not decided, against a baseline.
TRAINING_TIME_NOTE = (
    "step times shown, not decided: a few synchronized wall-time steps, not interleaved with a "
    "reference, give no interval a verdict could rest on on a shared host"
)


def training(bmx: dict, t: dict, th: dict) -> dict:
    """The training check against the baseline's: peak allocated device memory with the
    optimizer's state by the inference memory rule (above ``baseline * (1 + peak_memory)`` and
    by more than ``peak_memory_min_bytes``: a regression); step times listed beside."""
    if t.get("status") not in ("pass", "fail"):
        return _not_compared(
            "this run has no training check (an inference factory, or it did not run)"
        )
    b = bmx.get("training")
    if not b or not b.get("peak_allocated_bytes"):
        return _not_compared(
            "the baseline has no training figures (saved from an inference factory, from a failing "
            "training check, or by an earlier version: save it again)"
        )
    base_mem, cur_mem = b["peak_allocated_bytes"], t.get("peak_allocated_bytes") or 0
    limit = max(base_mem * (1 + th["peak_memory"]), base_mem + th["peak_memory_min_bytes"])
    bt, ct = b.get("step_time") or {}, t.get("step_time") or {}
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


def compile_success(base: Baseline, p1: dict) -> dict:
    """Whether the model still compiles: a regression when the baseline compiled it with
    ``torch.compile(backend="neuron")`` and this run's compile failed. Graph and graph-break
    counts are listed beside, without failing."""
    bc, cc = base.meta["metrics"].get("compile"), p1.get("compile") or {}
    if bc is None:
        return _not_compared(
            "the baseline does not record whether the model compiled (saved by an earlier "
            "version: save it again)"
        )
    if not bc.get("checked"):
        return _not_compared(
            "the baseline did not compile the model (--mode eager, or no compile path)"
        )
    if not cc.get("checked"):
        return _not_compared(
            "this run did not compile the model (" + (cc.get("note") or "--mode eager") + ")"
        )
    out: dict[str, Any] = {
        "baseline_ok": bool(bc.get("ok")),
        "current_ok": bool(cc.get("ok")),
        "regressions": [],
    }
    for k in ("compiled_graphs", "graph_breaks", "recompiles"):
        out[k] = {"baseline": bc.get(k), "current": cc.get(k)}
    # counts; None: a baseline saved before fallback graphs were recorded
    nfb = [
        None if x.get("fallback_graphs") is None else len(x["fallback_graphs"]) for x in (bc, cc)
    ]
    out["fallback_graphs"] = {"baseline": nfb[0], "current": nfb[1]}
    # graphs that fell back to eager since the baseline: partly off the compiled path
    fell_off = (
        bool(bc.get("ok")) and bool(cc.get("ok")) and nfb[0] is not None and (nfb[1] or 0) > nfb[0]
    )
    out["regressed"] = bool(bc.get("ok")) and (not cc.get("ok") or fell_off)
    out["decision"] = "regressed" if out["regressed"] else "pass"
    e, was = cc.get("error") or {}, formatting.graphs_ran(bc)
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
    result: dict,
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
    res: dict[str, Any] = {"compile": compile_success(base, result["phase1"]), "regressions": []}
    res["regressions"] += res["compile"].get("regressions", [])
    bmx, p3 = base.meta["metrics"], result["phase3"] or {}
    b = bmx if measured(base) == "compiled" else _compiled_view(bmx, bmx.get("compiled"), "p50_s")
    c = (
        p3
        if _measured_now(result["phase1"]) == "compiled"
        else _compiled_view(p3, p3.get("compiled"), "device")
    )
    if c is None:
        why = (
            "this run did not time the compiled model (--mode eager)"
            if result["config"].get("mode") == "eager"
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


#: How a latency comparison is labelled when it does not decide.
HOST_TIME_NOTE = (
    "the emulator's host time: shown, not decided (it moves with the host's load and is not "
    "Trainium's time; --gate-host-latency decides on it)"
)


def shown_only(lat: dict) -> None:
    """Mark a latency comparison as shown, not deciding: its would-be regressions kept
    apart (``host_time_regressions``), its statistics deciding nothing."""
    lat["gated"] = False
    lat["host_time_note"] = HOST_TIME_NOTE
    lat["host_time_regressions"] = lat.get("regressions", [])
    lat["regressions"] = []
    lat["regressed"] = False
    for st in (lat.get("statistics") or {}).values():
        st["decides"] = False


def _compiled_view(src: dict, fig: dict | None, key: str) -> dict | None:
    """A baseline's metrics (``key`` "p50_s") or a run's phase 3 (``key`` "device") with the
    compiled model's figures and samples in the device's place, as ``latency`` reads them."""
    smp = src.get("samples") or {}
    if not fig or not fig.get("p50_s") or not smp.get("compiled"):
        return None
    view = {
        "samples": smp | {"device": smp["compiled"]},
        "rounds": src.get("rounds"),
        "cpu_clock": src.get("cpu_clock"),
        "work_time_basis": None,
    }
    cpu = src.get("cpu_samples") or {}
    if src.get("compiled_work_time_basis") and cpu.get("compiled"):
        # on the process's CPU time (workclock.COMPILED_SIDES): a host-like side, its waiting added
        view |= {
            "cpu_samples": cpu | {"device": cpu["compiled"]},
            "cpu_clock": f"{src.get('cpu_clock')}; {src.get('compiled_cpu_clock')}",
            "work_time_basis": src["compiled_work_time_basis"],
            "busy_time_sides": ("device_calibration",),
        }
    return view | (
        {"device": fig}
        if key == "device"
        else {
            "p50_s": fig["p50_s"],
            "throughput_samples_per_s": fig.get("throughput_samples_per_s"),
        }
    )


def latency(
    bmx: dict,
    p3: dict,
    threshold: float,
    seed: int = 0,
    side: str = "device",
    skip: tuple = (),
    wall_reason: str | None = None,
    confirm: dict | None = None,
) -> dict:
    """The latency comparison of a run's phase 3 with a baseline's metrics (``perfstats``).

    With per-iteration samples on both sides: ``device_alone`` and ``model_or_inputs``
    decide; ``device_over_device_calibration`` is reported only (it decides when the
    reference was not timed, ``--skip-reference-perf``); ``decision`` is
    ``regressed`` when any statistic's interval lies entirely above ``1 + threshold`` (times
    its margin; against a baseline measured in several processes, ``baseline_runs.adjust``:
    read against their median, the margin at least their spread; with ``confirm``, a
    regression of this process is decided on the median of its figure and fresh processes',
    ``baseline_runs.confirmed``),
    ``undecided`` when one straddles it, else ``pass``. A baseline saved without samples
    (an older version) is compared by the raw p50, and says so. Raw p50s are kept.

    Time basis: the work time (``perfstats.work_times``: each iteration's CPU seconds of the
    working threads (the device's: its busy time) plus the host sides' least waiting; a run's figure is the median of
    the per-iteration ratios) when this run and the baseline both measured it
    (``work_time_basis``: one intra-op thread, a CPU reference, eager mode); otherwise
    the minimum wall seconds of each side, as baselines saved before the work time existed
    were compared (the calibration then is the small-op workload alone).

    ``side`` names the timed model in labels and messages (``compiled``: ``bmx`` and ``p3`` are
    ``_compiled_view``s); ``skip`` names statistics left out; ``wall_reason`` says why the
    wall-time basis decides when the caller knows it (the compiled model's)."""
    from ..stats import perfstats

    dev = p3.get("device")
    if not dev or not bmx.get("p50_s"):
        return {
            "regressed": False,
            "decision": "pass",
            "regressions": [],
            "note": "not compared: phase 3 did not run here or in the baseline",
        }
    what = "latency" if side == "device" else f"latency ({side})"
    out: dict[str, Any] = {
        "side": side,
        "baseline_p50_s": bmx["p50_s"],
        "current_p50_s": dev["p50_s"],
        "change": dev["p50_s"] / bmx["p50_s"] - 1,
        "threshold": threshold,
        "baseline_throughput_samples_per_s": bmx.get("throughput_samples_per_s"),
        "current_throughput_samples_per_s": dev.get("throughput_samples_per_s"),
        "rounds": p3.get("rounds"),
        "statistics": {},
        "regressions": [],
    }
    cur, base = p3.get("samples") or {}, bmx.get("samples") or {}
    if not base.get("device") or not base.get("calibration"):
        limit = bmx["p50_s"] * (1 + threshold)
        out |= {
            "method": "raw p50 (the baseline has no per-iteration samples: save it again)",
            "limit_s": limit,
            "regressed": dev["p50_s"] > limit,
            "decision": "regressed" if dev["p50_s"] > limit else "pass",
        }
        if out["regressed"]:
            out["regressions"].append(
                f"{what}: p50 {dev['p50_s'] * 1e3:.3f} ms is {out['change']:+.1%} vs the "
                f"baseline's {bmx['p50_s'] * 1e3:.3f} ms (threshold +{threshold:.0%})"
            )
        return out
    same_clock = p3.get("cpu_clock") == bmx.get("cpu_clock")
    busy = tuple(p3.get("busy_time_sides", perfstats.BUSY_TIME_SIDES))
    # a busy-time device side adds its least launch time: both runs need those samples
    launched = "device" not in busy or (
        (p3.get("launch_samples") or {}).get("device")
        and (bmx.get("launch_samples") or {}).get("device")
    )
    work = bool(
        p3.get("work_time_basis")
        and bmx.get("work_time_basis")
        and same_clock
        and (p3.get("cpu_samples") or {}).get("calibration_matmul")
        and (bmx.get("cpu_samples") or {}).get("calibration_matmul")
        and launched
    )
    boot = f"95% moving-block bootstrap interval ({perfstats.BOOTSTRAP_RESAMPLES} resamples)"
    if work:
        out["time_basis"] = "work time: " + p3["work_time_basis"]
        out["method"] = (
            "normalized work time (per iteration: the device's busy time; the host sides' thread CPU "
            "seconds + their least waiting of any iteration; median of the per-iteration ratios), "
            f"current over baseline, {boot}"
        )
        cur = {
            "cpu": p3["cpu_samples"],
            "wall": p3["samples"],
            "launch": p3.get("launch_samples"),
            "busy": busy,
        }
        base = {
            "cpu": bmx["cpu_samples"],
            "wall": bmx["samples"],
            "launch": bmx.get("launch_samples"),
            "busy": busy,
        }
    else:
        why = (
            wall_reason
            if wall_reason
            else "the baseline was saved without work-time samples (save it again)"
            if not bmx.get("work_time_basis")
            else "the baseline's CPU samples are of another clock, or it has no launch samples (save it again)"
            if not same_clock or not (bmx.get("launch_samples") or {}).get("device")
            else "this run cannot measure work time (--timing-threads other than 1, a non-CPU reference, "
            "or --mode compile)"
            if not p3.get("work_time_basis")
            else "a side lacks the matmul calibration's samples"
        )
        out["time_basis"] = f"wall seconds per step ({why})"
        out["method"] = (
            "normalized time (minimum of each side over the interleaved iterations), current over "
            f"baseline, {boot}"
        )
    has_ref = (cur["wall"] if work else cur).get("reference") and (
        base["wall"] if work else base
    ).get("reference")
    names = [
        n
        for n in (["device_alone", "model_or_inputs"] if has_ref else [])
        + ["device_over_device_calibration"]
        if n not in skip
    ]
    # without a timed reference, the device against its fixed workload is all there is
    deciding = (
        {"device_alone", "model_or_inputs"}
        if "device_alone" in names
        else {"device_over_device_calibration"}
    )
    labels = {
        "device_alone": f"{side} alone ({side}/reference)",
        "device_over_device_calibration": f"{side}/device calibration",
        "model_or_inputs": "model or inputs (reference/host calibration)",
    }
    for name in names:
        # compiled_alone carries the compiled model's load offset (perfstats.COMPILED_MARGIN)
        compiled_alone = side != "device" and name == "device_alone"
        if work:
            c = perfstats.compare_work(
                name,
                cur,
                base,
                threshold,
                seed,
                perfstats.COMPILED_MARGIN if compiled_alone else None,
            )
            if c is not None and side == "device":  # read against the baseline's processes' median
                c = baseline_runs.adjust(c, name, bmx.get("processes"), threshold)
                c = baseline_runs.confirmed(
                    c, name, confirm, threshold
                )  # and on this run's processes'
        else:
            c = perfstats.compare(
                name,
                cur,
                base,
                threshold,
                seed,
                perfstats.COMPILED_MARGIN if compiled_alone else 1.0,
            )
        if c is None:
            continue
        c["decides"] = name in deciding
        key = name
        if (
            side != "device" and name != "model_or_inputs"
        ):  # compiled_alone: min compiled / min reference
            key, c["statistic"] = (
                name.replace("device", side, 1),
                c["statistic"].replace("device", side, 1),
            )
        out["statistics"][key] = c
        ci = c["ci"]
        if c["decides"] and c["decision"] == "regressed":
            out["regressions"].append(
                f"{what}, {labels[name]}: x{ci['ratio']:.2f} the baseline's (95% CI x{ci['low']:.2f}-"
                f"x{ci['high']:.2f}, entirely above the threshold +{threshold:.0%}"
                + (
                    f" and the between-run margin (x{c['regression_above']:.2f})"
                    if c.get("regression_above", 1 + threshold) > 1 + threshold
                    else ""
                )
                + ")"
                + (
                    f"; the median of {len(c['confirmation']['values'])} processes (each x"
                    + ", x".join(f"{x:.2f}" for x in c["confirmation"]["ratios"])
                    + ")"
                    if c.get("confirmation")
                    else ""
                )
                + "; raw p50 "
                f"{dev['p50_s'] * 1e3:.3f} ms vs {bmx['p50_s'] * 1e3:.3f} ms"
            )
    decisions = [c["decision"] for c in out["statistics"].values() if c["decides"]] or ["undecided"]
    out["decision"] = (
        "regressed"
        if "regressed" in decisions
        else "undecided"
        if "undecided" in decisions
        else "pass"
    )
    out["regressed"] = out["decision"] == "regressed"
    return out
