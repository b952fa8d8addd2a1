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

from ..config import DEFAULT_THRESHOLDS
from ..errors import CheckUsageError
from ..phases import memory as memory_mod
from ..result import CheckResult, Phase1Result
from ..result_phases import Phase2Result, Phase3Result
from ..result_projection import ProjectionResult
from ..result_training import TrainingResult

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
    from ..._atomic_file import write_atomic

    write_atomic(path, data)


def _json_bytes(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n").encode()


def save(
    folder: str, result: CheckResult, outputs: dict[str, dict[str, torch.Tensor]]
) -> list[str]:
    """Write a baseline into ``folder`` (created if needed; the four files replaced
    atomically, nothing else in the folder touched). Returns the paths written."""
    from safetensors.torch import save as st_save

    os.makedirs(folder, exist_ok=True)
    meta = _metadata(result)
    thresholds = dict(result.thresholds)
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
        ("manifest.json", _json_bytes(result.manifest)),
        ("thresholds.json", _json_bytes(thresholds)),
        ("baseline.json", _json_bytes(meta)),
    ):  # last: marks the folder complete
        path = os.path.join(folder, name)
        _write_atomic(path, data)
        written.append(path)
    return written


def _metadata(result: CheckResult) -> dict:
    """``baseline.json``: the model's identity, its outputs, the settings and the metrics."""
    p1, p2 = result.phase1, result.phase2
    return {
        "format": FORMAT,
        "created_utc": result.manifest["created_utc"],
        "model": {
            k: result.model[k]
            for k in ("name", "spec", "source", "fingerprint", "parameters", "batch_size", "inputs")
        },
        "outputs": p1.outputs,
        "settings": {k: result.config[k] for k in ("dtype", "seed", "device", "reference", "mode")}
        | {"tol": p2.tol},
        "metrics": _metrics(result),
    }


def _metrics(result: CheckResult) -> dict:
    """What the run measured: latency, compile, memory, accuracy, the exact quantities."""
    p1, p2, p3 = result.phase1, result.phase2, result.phase3
    dev, ref = (p3.device or {}), (p3.reference or {})
    comp = p1.compile
    return {
        # what the device figures below are: the eager model's, or (--mode compile) the compiled one's
        "measured": _measured_now(p1),
        "compile": {k: getattr(comp, k) for k in COMPILE_KEYS}
        if comp.checked
        else {"checked": False},
        # --mode both: the compiled model's figures; its per-iteration seconds are samples["compiled"]
        "compiled": _compiled_figures(p3),
        "cold_latency_s": p1.cold_latency_s,
        "p50_s": dev.get("p50_s"),
        "p90_s": dev.get("p90_s"),
        "p99_s": dev.get("p99_s"),
        "median_ci95_s": dev.get("median_ci95_s"),
        "throughput_samples_per_s": dev.get("throughput_samples_per_s"),
        "reference_p50_s": ref.get("p50_s"),
        "reference_throughput_samples_per_s": ref.get("throughput_samples_per_s"),
        # per-iteration seconds of the interleaved measurement (device, reference,
        # calibration): the samples the next run's latency interval is computed against
        "samples": p3.samples,
        # the sides phase 3 timed in the same iterations: a re-check must time the same (baseline_setup)
        "interleaved": list(p3.samples or {}) or None,
        # each statistic's figure in each process phase 3 was measured in (--baseline-runs, baseline_runs.py)
        "processes": p3.baseline_processes,
        "cpu_samples": p3.cpu_samples,
        "launch_samples": p3.launch_samples,
        "cpu_clock": p3.cpu_clock,
        "work_time_basis": p3.work_time_basis,
        "compiled_cpu_clock": p3.compiled_cpu_clock,
        "compiled_work_time_basis": p3.compiled_work_time_basis,
        # --mode compile: the compiled model's own peak (memory.measured_peak)
        "peak_allocated_bytes": memory_mod.measured_peak(p1)[0],
        "peak_allocated_basis": memory_mod.measured_peak(p1)[1],
        "peak_reserved_bytes": p1.memory["peak_reserved_bytes"],
        "training": _training_figures(result.training),
        "fallback_ops": sorted(p1.fallback["ops"]),
        # --projection: the compiled graph's projected seconds per pass (an exact function
        # of the StableHLO), gated as the eager projection is (baseline/exact.py)
        "projection": _projected(result.projection),
        # the exact quantities per pass the default gates compare (phases/exact.py)
        "exact": result.exact.to_dict() if result.exact and result.exact.passed else None,
        "narrowing": p1.narrowing,
        "accuracy": _accuracy_figures(p2),
    }


def _compiled_figures(p3: Phase3Result) -> dict | None:
    """``--mode both``: the compiled model's figures; its per-iteration seconds are
    ``samples["compiled"]``."""
    c3 = p3.compiled if (p3.compiled or {}).get("p50_s") else None
    return (
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
    )


def _accuracy_figures(p2: Phase2Result) -> dict:
    """Each output's accuracy verdict and figures of phase 2."""
    return {
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
        for k, v in p2.outputs.items()
    }


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
        ("projected_time", cfg.max_projected_time_regression),
        ("kernels", cfg.max_kernel_regression),
        ("fallbacks", cfg.max_fallback_increase),
        ("graph_breaks", cfg.max_graph_break_increase),
        ("recompiles", cfg.max_recompile_increase),
        ("new_signatures", cfg.max_new_signature_increase),
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


def _projected(p: ProjectionResult | None) -> dict | None:
    if p is None or p.status != "pass":
        return None
    out = {k: p.core(k)["latency_s_per_core"] for k in ("trn2", "trn3")}
    # the fixed costs the times include (projection/overheads.py): compared only under the same
    out["overheads"] = p.trn2.get("overheads")
    return out


def _training_figures(t: TrainingResult | None) -> dict | None:
    """What a baseline keeps of the training check (a passing one): the device's peak memory
    with the optimizer's state and the step times (shown on re-check, not decided)."""
    if t is None or t.status != "pass":
        return None
    return {
        "peak_allocated_bytes": t.peak_allocated_bytes,
        "step_time": t.step_time,
        "exact": t.exact,  # the last step's kernel trace per mode (training.py)
    }


def _measured_now(p1: Phase1Result) -> str:
    """What phase 3 timed as the device in this run: ``compiled`` under ``--mode compile``."""
    return "compiled" if p1.compile.phases_2_3 == "compiled" else "eager"


def measured(base: Baseline) -> str:
    """What the baseline's device figures are: ``eager`` or ``compiled``. Baselines saved before
    this was recorded: ``compiled`` when their command line had ``--mode compile``."""
    m = base.meta["metrics"].get("measured")
    if m in ("eager", "compiled"):
        return m
    cmd = base.manifest.get("command") or ""
    return "compiled" if re.search(r"--mode[= ]compile\b", cmd) else "eager"
