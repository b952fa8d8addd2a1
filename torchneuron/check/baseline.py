"""Baselines: what an accepted run leaves behind, and the comparison of a new run with it.

A baseline folder holds four files:

- ``baseline.json``: the model's identity (name, architecture fingerprint, inputs,
  outputs), the settings (dtype, seed, reference, tol, mode) and the metrics (latency
  percentiles, throughput, peak memory, per-output accuracy; whether the model compiled,
  and the compiled model's figures when phase 3 timed it; the sides phase 3 interleaved and
  each process's figures, ``--baseline-runs``; the training check's peak memory and step times);
- ``thresholds.json``: the regression thresholds (fractions; 0.10 = +10 %);
- ``manifest.json``: the version manifest of the run;
- ``outputs.safetensors``: the outputs of that run: ``reference/<name>`` (the reference
  device), ``fp64/<name>`` (the golden float64 run) and ``device/<name>``.

Only ``save`` writes, and only into the folder given to ``--save-baseline``.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from typing import Any

import torch

from . import baseline_runs, baseline_setup
from . import formatting as F
from . import manifest as manifest_mod
from . import memory as memory_mod
from .config import DEFAULT_THRESHOLDS
from .errors import CheckUsageError

FORMAT = "torchneuron.check.baseline/1"
#: What a baseline keeps of phase 1's compile check (``compiled.check_compile``).
COMPILE_KEYS = (
    "checked",
    "ok",
    "compiled_graphs",
    "fallback_graphs",
    "graph_breaks",
    "recompiles",
    "compile_s",
    "warm_compile_s",
)
FILES = ("baseline.json", "thresholds.json", "manifest.json", "outputs.safetensors")
KINDS = ("reference", "fp64", "device")


@dataclass
class Baseline:
    """A loaded baseline folder: its JSON documents and its outputs by kind and name."""

    path: str
    meta: dict
    thresholds: dict
    manifest: dict
    outputs: dict[str, dict[str, torch.Tensor]]  # kind -> name -> tensor


def _write_atomic(path: str, data: bytes) -> None:
    from .._atomic_file import write_atomic

    write_atomic(path, data)


def _json_bytes(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n").encode()


def save(folder: str, result: dict, outputs: dict[str, dict[str, torch.Tensor]]) -> list[str]:
    """Write a baseline into ``folder`` (created if needed; the four files replaced
    atomically, nothing else in the folder touched). Returns the paths written."""
    from safetensors.torch import save as st_save

    os.makedirs(folder, exist_ok=True)
    p1, p2, p3 = result["phase1"], result["phase2"], result["phase3"]
    dev, ref = (p3.get("device") or {}), (p3.get("reference") or {})
    comp = p1.get("compile") or {}
    c3 = p3.get("compiled") if (p3.get("compiled") or {}).get("p50_s") else None
    meta = {
        "format": FORMAT,
        "created_utc": result["manifest"]["created_utc"],
        "model": {
            k: result["model"][k]
            for k in ("name", "spec", "source", "fingerprint", "parameters", "batch_size", "inputs")
        },
        "outputs": p1["outputs"],
        "settings": {
            k: result["config"][k] for k in ("dtype", "seed", "device", "reference", "mode")
        }
        | {"tol": p2["tol"]},
        "metrics": {
            # what the device figures below are: the eager model's, or (--mode compile) the compiled one's
            "measured": _measured_now(p1),
            "compile": {k: comp.get(k) for k in COMPILE_KEYS}
            if comp.get("checked")
            else {"checked": False},
            # --mode both: the compiled model's figures; its per-iteration seconds are samples["compiled"]
            "compiled": (
                {
                    k: c3.get(k)
                    for k in (
                        "p50_s",
                        "p90_s",
                        "p99_s",
                        "median_ci95_s",
                        "throughput_samples_per_s",
                    )
                }
                if c3
                else None
            ),
            "cold_latency_s": p1.get("cold_latency_s"),
            "p50_s": dev.get("p50_s"),
            "p90_s": dev.get("p90_s"),
            "p99_s": dev.get("p99_s"),
            "median_ci95_s": dev.get("median_ci95_s"),
            "throughput_samples_per_s": dev.get("throughput_samples_per_s"),
            "reference_p50_s": ref.get("p50_s"),
            "reference_throughput_samples_per_s": ref.get("throughput_samples_per_s"),
            # per-iteration seconds of the interleaved measurement (device, reference,
            # calibration): the samples the next run's latency interval is computed against
            "samples": p3.get("samples"),
            # the sides phase 3 timed in the same iterations: a re-check must time the same (baseline_setup)
            "interleaved": list(p3.get("samples") or {}) or None,
            # each statistic's figure in each process phase 3 was measured in (--baseline-runs, baseline_runs.py)
            "processes": p3.get("baseline_processes"),
            "cpu_samples": p3.get("cpu_samples"),
            "launch_samples": p3.get("launch_samples"),
            "cpu_clock": p3.get("cpu_clock"),
            "work_time_basis": p3.get("work_time_basis"),
            "compiled_cpu_clock": p3.get("compiled_cpu_clock"),
            "compiled_work_time_basis": p3.get("compiled_work_time_basis"),
            # --mode compile: the compiled model's own peak (memory.measured_peak)
            "peak_allocated_bytes": memory_mod.measured_peak(p1)[0],
            "peak_allocated_basis": memory_mod.measured_peak(p1)[1],
            "peak_reserved_bytes": p1["memory"]["peak_reserved_bytes"],
            "training": _training_figures(result.get("training") or {}),
            "fallback_ops": sorted(p1["fallback"]["ops"]),
            "narrowing": p1["narrowing"],
            "accuracy": {
                k: {
                    m: v.get(m)
                    for m in (
                        "passed",
                        "decided_by",
                        "max_abs",
                        "rmse_device_fp64",
                        "rmse_reference_fp64",
                    )
                }
                for k, v in p2["outputs"].items()
            },
        },
    }
    thresholds = dict(result["thresholds"])
    tensors = {
        f"{kind}/{name}": t.detach().to("cpu").contiguous()
        for kind, named in outputs.items()
        for name, t in named.items()
    }
    written = []
    for name, data in (
        (
            "outputs.safetensors",
            st_save(tensors, metadata={"format": FORMAT, "model": meta["model"]["name"]}),
        ),
        ("manifest.json", _json_bytes(result["manifest"])),
        ("thresholds.json", _json_bytes(thresholds)),
        ("baseline.json", _json_bytes(meta)),
    ):  # last: marks the folder complete
        path = os.path.join(folder, name)
        _write_atomic(path, data)
        written.append(path)
    return written


def load(folder: str) -> Baseline:
    """Read a baseline folder. Raises CheckUsageError when it is missing, partial or
    unreadable, naming what is wrong."""
    if not os.path.exists(folder):
        raise CheckUsageError(
            f"baseline folder {folder!r} does not exist (create one with --save-baseline DIR)"
        )
    if not os.path.isdir(folder):
        raise CheckUsageError(f"baseline {folder!r} is not a folder")
    missing = [f for f in FILES if not os.path.isfile(os.path.join(folder, f))]
    if missing:
        raise CheckUsageError(
            f"baseline folder {folder!r} is partial: missing {', '.join(missing)} "
            f"(a baseline holds {', '.join(FILES)}; save a complete one with --save-baseline)"
        )
    docs = {}
    for f in FILES[:3]:
        try:
            with open(os.path.join(folder, f)) as fh:
                docs[f] = json.load(fh)
        except (OSError, ValueError) as e:
            raise CheckUsageError(f"baseline folder {folder!r}: {f} is unreadable: {e}") from e
        if not isinstance(docs[f], dict):
            raise CheckUsageError(f"baseline folder {folder!r}: {f} is not a JSON object")
    meta = docs["baseline.json"]
    if meta.get("format") != FORMAT:
        raise CheckUsageError(
            f"baseline folder {folder!r}: baseline.json has format "
            f"{meta.get('format')!r}, expected {FORMAT!r}"
        )
    for key in ("model", "outputs", "settings", "metrics"):
        if key not in meta:
            raise CheckUsageError(
                f"baseline folder {folder!r} is partial: baseline.json lacks {key!r}"
            )
    try:
        from safetensors.torch import load_file

        flat = load_file(os.path.join(folder, "outputs.safetensors"))
    except Exception as e:
        raise CheckUsageError(
            f"baseline folder {folder!r}: outputs.safetensors is unreadable: {e}"
        ) from e
    outputs: dict[str, dict[str, torch.Tensor]] = {k: {} for k in KINDS}
    for key, t in flat.items():
        kind, _, name = key.partition("/")
        if kind in outputs:
            outputs[kind][name] = t
    names = [o["name"] for o in meta["outputs"]]
    lacking = [
        f"{kind}/{n}" for kind in ("reference", "fp64") for n in names if n not in outputs[kind]
    ]
    if lacking:
        raise CheckUsageError(
            f"baseline folder {folder!r} is partial: outputs.safetensors lacks {', '.join(lacking)}"
        )
    return Baseline(
        path=folder,
        meta=meta,
        thresholds=docs["thresholds.json"],
        manifest=docs["manifest.json"],
        outputs=outputs,
    )


def thresholds(cfg, base: Baseline | None) -> dict:
    """Regression thresholds: the command line's, else the baseline's, else the defaults."""
    res = dict(DEFAULT_THRESHOLDS)
    src = {k: "default" for k in res}
    if base is not None:
        for k in res:
            if k not in base.thresholds:  # an absent key: the default
                continue
            v = base.thresholds[k]
            # a quoted number, true or null is not silently the default (json reads NaN and Infinity)
            if (
                isinstance(v, bool)
                or not isinstance(v, (int, float))
                or not math.isfinite(v)
                or v < 0
            ):
                shown = json.dumps(v) if isinstance(v, (str, bool)) or v is None else v
                raise CheckUsageError(
                    f"baseline folder {base.path!r}: thresholds.json has {k} = {shown}; "
                    "expected a finite number >= 0"
                )
            res[k], src[k] = float(v), "baseline"
    for k, v in (
        ("latency_p50", cfg.max_latency_regression),
        ("peak_memory", cfg.max_memory_regression),
    ):
        if v is not None:
            res[k], src[k] = float(v), "command line"
    res["accuracy"] = "any failure"
    res["source"] = src
    return res


def check_identity(base: Baseline, model_desc: dict, cfg) -> None:
    """Raise CheckUsageError when the baseline was saved for another model or with other
    settings (a comparison would be meaningless)."""
    bm, where = base.meta["model"], f"baseline {base.path!r}"
    if bm.get("name") != model_desc["name"]:
        raise CheckUsageError(
            f"{where} is from another model: saved for {bm.get('name')!r}, "
            f"this run checks {model_desc['name']!r}"
        )
    if bm.get("fingerprint") != model_desc["fingerprint"]:
        raise CheckUsageError(
            f"{where} is from another model: {bm.get('name')!r} had architecture "
            f"fingerprint {bm.get('fingerprint')}, this model has {model_desc['fingerprint']} "
            "(parameter names, shapes or dtypes differ)"
        )
    if bm.get("inputs") != model_desc["inputs"]:
        raise CheckUsageError(
            f"{where} was saved with other inputs: {_sig(bm.get('inputs'))}, this run "
            f"has {_sig(model_desc['inputs'])} (same --batch-size?)"
        )
    s = base.meta["settings"]
    if s.get("dtype") != cfg.dtype:
        raise CheckUsageError(
            f"{where} was saved with --dtype {s.get('dtype')}, this run uses --dtype {cfg.dtype}"
        )
    if "seed" in s and s["seed"] != cfg.seed:  # other weights (seeded factories) and other inputs
        raise CheckUsageError(
            f"{where} was saved with --seed {s['seed']}, this run uses --seed {cfg.seed}"
        )


def check_outputs(base: Baseline, outputs: list[dict]) -> None:
    """Raise CheckUsageError when the run's outputs differ in names or shapes from the baseline's."""
    bo = {o["name"]: o["shape"] for o in base.meta["outputs"]}
    co = {o["name"]: o["shape"] for o in outputs}
    if bo != co:
        raise CheckUsageError(
            f"baseline {base.path!r} is from another model: its outputs are "
            f"{bo}, this run's are {co}"
        )


def _sig(inputs) -> str:
    if not inputs:
        return "none"
    return ", ".join(f"{i['name']}{i['shape']}:{i['dtype']}" for i in inputs)


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
    from .phase2 import compare as compare_tensors
    from .phase2 import failure_text

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
    res["regressions"] += res["latency"].get("regressions", [])
    res["compiled"] = compiled(
        base,
        result,
        th["latency_p50"],
        seed,
        skip=("model_or_inputs",)
        if "model_or_inputs" in (res["latency"].get("statistics") or {})
        else (),
    )
    res["regressions"] += res["compiled"]["regressions"]
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
                f"+{F.nbytes(th['peak_memory_min_bytes'])})"
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


def _training_figures(t: dict) -> dict | None:
    """What a baseline keeps of the training check (a passing one): the device's peak memory
    with the optimizer's state and the step times (shown on re-check, not decided)."""
    if t.get("status") != "pass":
        return None
    return {"peak_allocated_bytes": t.get("peak_allocated_bytes"), "step_time": t.get("step_time")}


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
            f"and +{F.nbytes(th['peak_memory_min_bytes'])})"
        )
    return out


def _not_compared(why: str) -> dict:
    return {
        "regressed": False,
        "decision": "pass",
        "regressions": [],
        "note": f"not compared: {why}",
    }


def _measured_now(p1: dict) -> str:
    """What phase 3 timed as the device in this run: ``compiled`` under ``--mode compile``."""
    return "compiled" if (p1.get("compile") or {}).get("phases_2_3") == "compiled" else "eager"


def measured(base: Baseline) -> str:
    """What the baseline's device figures are: ``eager`` or ``compiled``. Baselines saved before
    this was recorded: ``compiled`` when their command line had ``--mode compile``."""
    m = base.meta["metrics"].get("measured")
    if m in ("eager", "compiled"):
        return m
    cmd = base.manifest.get("command") or ""
    return "compiled" if re.search(r"--mode[= ]compile\b", cmd) else "eager"


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
    e, was = cc.get("error") or {}, F.graphs_ran(bc)
    out["current_not_compiled"] = (
        e.get("type") == "NotCompiled"
    )  # it ran, but no graph ran compiled
    if fell_off:
        out["regressions"].append(
            f"compile: {nfb[1] - nfb[0]} more graph(s) fell back to eager than in the baseline ({was}; now "
            f"{F.graphs_ran(cc)}): the model partly fell off the compiled path"
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
    base: Baseline, result: dict, threshold: float, seed: int = 0, skip: tuple = ()
) -> dict:
    """The compiled model against the baseline's: compile success (``compile_success``) and its
    latency by ``latency``'s statistics and verdict rules, on the work-time basis with the
    process's CPU time as its clock (``workclock.COMPILED_SIDES``) where both runs measured it,
    else on wall seconds (``COMPILED_BASIS``). The compiled figures are phase 3's device figures under
    ``--mode compile`` and its ``compiled`` figures under ``--mode both``, on either side.
    ``skip``: statistics not repeated here (``model_or_inputs``, when eager's decided it)."""
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
    res["regressions"] += res["latency"].get("regressions", [])
    return res


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
    from . import perfstats

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
