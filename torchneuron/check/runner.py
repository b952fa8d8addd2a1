"""One ``torchneuron check`` run: the phases in order, the baseline comparison, the cost,
the verdict, and the files asked for. The CLI is a thin layer over ``run``."""

from __future__ import annotations

import math
import numbers
import os
import time

import torch

from . import manifest
from .baseline import compare as baseline_compare
from .baseline import setup as baseline_setup
from .baseline import store as baseline_mod
from .config import DTYPES, CheckConfig
from .errors import EXIT_FAIL, EXIT_INCONCLUSIVE, EXIT_PASS, CheckUsageError
from .model import loading
from .phases import phase1, phase2, phase3
from .projection import cost as cost_mod
from .result import CheckResult, Phase1Result
from .result_baseline import BaselineComparison
from .result_exact import ExactResult
from .result_phases import Phase2Result, Phase3Result
from .result_profile import ProfileResult
from .result_projection import ProjectionResult
from .result_training import TrainingResult

#: What a baseline does not decide (docs/design/check-measurement.md, "Baselines and regressions", "Training").
TRAINING_NOT_BASELINED = (
    "training step times are saved in a baseline and shown on re-check, not decided: only "
    "the training's peak memory (with the optimizer's state) is compared"
)


class NullUI:
    """A UI that shows nothing (library use and tests)."""

    def step(self, msg: str) -> None:
        """Ignore a step."""

    def progress(self, description: str, total: int | None):
        """A progress bar that shows nothing."""
        return _NullProgress()


class _NullProgress:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def advance(self, info: str = "") -> None:
        """Ignore an iteration."""


def validate(cfg: CheckConfig) -> None:
    """Reject inconsistent options (CheckUsageError) before anything runs."""
    if cfg.dtype not in DTYPES:
        raise CheckUsageError(f"--dtype must be one of {', '.join(DTYPES)}, got {cfg.dtype!r}")
    if cfg.reference not in ("cpu", "cuda"):
        raise CheckUsageError(f"--reference must be cpu or cuda, got {cfg.reference!r}")
    if cfg.reference == "cuda" and not torch.cuda.is_available():
        raise CheckUsageError("--reference cuda: CUDA is not available on this machine")
    try:
        dev = torch.device(cfg.device)
    except RuntimeError as e:
        raise CheckUsageError(f"--device {cfg.device!r}: {e}") from e
    if dev.type != "neuron":
        raise CheckUsageError(f"--device must be a neuron device, got {cfg.device!r}")
    if dev.index is not None and not 0 <= dev.index < torch.neuron.device_count():
        raise CheckUsageError(
            f"--device {cfg.device}: {torch.neuron.device_count()} NeuronCore(s) visible"
        )
    if cfg.fallback not in (None, "warn", "error"):
        raise CheckUsageError(f"--fallback must be warn or error, got {cfg.fallback!r}")
    if cfg.iterations is None and cfg.seconds is None:
        raise CheckUsageError("give --iterations or --seconds")
    ints = [
        ("--batch-size", cfg.batch_size, 1),
        ("--iterations", cfg.iterations, 1),
        ("--max-warmup", cfg.max_warmup, 0),
        ("--cv-window", cfg.cv_window, 2),
        ("--amortize-samples", cfg.amortize_samples, 1),
        ("--max-rounds", cfg.max_rounds, 1),
        ("--baseline-runs", cfg.baseline_runs, 1),
        ("--timing-threads", cfg.timing_threads, 0),
        ("--train-steps", cfg.train_steps, 1),
    ]
    for name, v, lo in ints:
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise CheckUsageError(f"{name} must be an integer, got {v!r}")
        if v < lo:
            raise CheckUsageError(f"{name} must be >= {lo}, got {v}")
    positive = [
        ("--seconds", cfg.seconds),
        ("--tol", cfg.tol),
        ("--cv-threshold", cfg.cv_threshold),
        ("--price-per-hour", cfg.price_per_hour),
        ("--reference-price-per-hour", cfg.reference_price_per_hour),
        ("--max-cost-per-million", cfg.max_cost_per_million),
    ]
    fractions = [
        ("--max-latency-regression", cfg.max_latency_regression),
        ("--max-memory-regression", cfg.max_memory_regression),
        ("--max-projected-time-regression", cfg.max_projected_time_regression),
        ("--max-kernel-regression", cfg.max_kernel_regression),
        ("--max-fallback-increase", cfg.max_fallback_increase),
        ("--max-graph-break-increase", cfg.max_graph_break_increase),
        ("--max-recompile-increase", cfg.max_recompile_increase),
        ("--max-new-signature-increase", cfg.max_new_signature_increase),
        ("--launch-overhead-us", cfg.launch_overhead_us),
    ]
    for (name, v), strict in [(x, True) for x in positive] + [(x, False) for x in fractions]:
        if v is None:
            continue
        # NaN compares false with everything: it would pass every check below and then never
        # end a --seconds measurement, never fail a budget and never match a tolerance
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
            raise CheckUsageError(f"{name} must be a finite number, got {v!r}")
        if v < 0 or (strict and v == 0):
            raise CheckUsageError(f"{name} must be {'> 0' if strict else '>= 0'}, got {v}")
    if cfg.cv_window is not None and cfg.cv_window > cfg.max_warmup:
        raise CheckUsageError(
            f"--cv-window {cfg.cv_window} is longer than --max-warmup {cfg.max_warmup}: "
            "the rolling window could never fill, so warm-up could never end stable; "
            "give a smaller --cv-window or a larger --max-warmup"
        )
    _guard_paths(cfg)
    _guard_outputs(cfg)


def _guard_paths(cfg: CheckConfig) -> None:
    """--save-baseline must not name a file, and report files need an existing folder:
    checked before anything runs, not after a whole check."""
    if cfg.save_baseline:
        p = cfg.save_baseline
        if os.path.exists(p) and not os.path.isdir(p):
            raise CheckUsageError(f"--save-baseline {p!r} is an existing file, not a folder")
        up = os.path.dirname(os.path.abspath(p))
        while not os.path.exists(up):
            up = os.path.dirname(up)
        if not os.path.isdir(up):
            raise CheckUsageError(f"--save-baseline {p!r}: {up!r} is a file, not a folder")
    for opt, path in (
        ("--json", cfg.json_path),
        ("--junit", cfg.junit_path),
        ("--html", cfg.html_path),
    ):
        if not path:
            continue
        if os.path.isdir(path):
            raise CheckUsageError(f"{opt} {path!r} is a folder; give a file name")
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise CheckUsageError(f"{opt} {path!r}: the folder {folder!r} does not exist")


def _guard_outputs(cfg: CheckConfig) -> None:
    """Report files must not land inside a --baseline folder that --save-baseline does not name
    (nothing in an existing baseline is overwritten unless --save-baseline names it)."""
    if not cfg.baseline:
        return
    base = os.path.realpath(cfg.baseline)
    if cfg.save_baseline and os.path.realpath(cfg.save_baseline) == base:
        return
    for opt, path in (
        ("--json", cfg.json_path),
        ("--junit", cfg.junit_path),
        ("--html", cfg.html_path),
    ):
        if path and os.path.dirname(os.path.realpath(path)) == base:
            raise CheckUsageError(
                f"{opt} {path!r} would write into the baseline folder {cfg.baseline!r}; "
                "a baseline is only written by --save-baseline"
            )


def run(cfg: CheckConfig, ui=None) -> CheckResult:
    """Run a whole check. Returns its result (``result.to_dict()`` is the JSON);
    ``result.exit_code`` is 0
    (pass) or 1 (a phase failed, a regression, over budget). Bad usage or input raises
    CheckUsageError (exit code 2) before or while the model is loaded and compared."""
    ui = ui or NullUI()
    t_start = time.perf_counter()
    validate(cfg)
    device_price, reference_price = _prices(cfg)
    base = baseline_mod.load(cfg.baseline) if cfg.baseline else None
    loaded, model_desc = _load_model(cfg, base, ui)
    man = manifest.collect(cfg.device, cfg.argv)
    result = _new_result(cfg, model_desc, man, base)
    torch.manual_seed(cfg.seed)

    p1, session, skip = _run_phase1(result, loaded, cfg, base, ui)
    p2, extra = _run_phase2(result, loaded, cfg, session, skip, ui)
    p3 = _run_phase3(result, loaded, cfg, session, extra, skip, ui)
    _run_profile_and_exact(result, session, cfg, p1, skip, ui)
    _phase_warnings(result, p1, p2, p3)
    _run_training(result, loaded, cfg, p1, ui)
    _run_projection(result, loaded, cfg, p1, ui)
    _compare_baseline(result, base, session, extra, loaded, cfg, ui)
    result.cost = cost_mod.compute(
        p1,
        p3,
        cfg,
        device_price,
        reference_price,
        extra.get("reference_cold_s"),
        man["host"]["cpu_model"],
        man["device_stack"]["emulated"],
    )
    _decide(result, cfg)
    result.elapsed_s = time.perf_counter() - t_start
    _save_baseline(result, cfg, extra, session, ui)
    return result


def _prices(cfg: CheckConfig) -> tuple:
    """The device's and the reference's price per hour (``--instance``, ``--price-per-hour``
    and their reference counterparts, else the price table's defaults)."""
    prices = cost_mod.load_prices()
    device_price = cost_mod.price_for(
        cfg.instance, cfg.price_per_hour, cost_mod.DEFAULT_DEVICE_INSTANCE, prices
    )
    reference_price = cost_mod.price_for(
        cfg.reference_instance,
        cfg.reference_price_per_hour,
        cost_mod.DEFAULT_REFERENCE_INSTANCE[cfg.reference],
        prices,
        "--reference-price-per-hour",
    )
    return device_price, reference_price


def _load_model(cfg: CheckConfig, base, ui) -> tuple:
    """The model and its description, checked against the baseline's identity and setup."""
    ui.step(f"Loading model {cfg.model}")
    loaded = loading.load(cfg.model, cfg.batch_size, cfg.seed)
    model_desc = loaded.describe()
    if base is not None:
        baseline_mod.check_identity(base, model_desc, cfg)
        baseline_setup.check(base.path, base.meta, baseline_mod.measured(base), cfg)
    return loaded, model_desc


def _new_result(cfg: CheckConfig, model_desc: dict, man: dict, base) -> CheckResult:
    """The result's head: schema, empty verdict, config, model, manifest, thresholds."""
    return CheckResult(
        config=cfg.to_dict(),
        model=model_desc | {"dtype": cfg.dtype, "seed": cfg.seed},
        manifest=man,
        thresholds=baseline_mod.thresholds(cfg, base),
    )


def _run_phase1(result: CheckResult, loaded, cfg: CheckConfig, base, ui) -> tuple:
    """Phase 1; returns its result, the session, and why later phases skip (None: they run)."""
    p1, session = phase1.run(loaded, cfg, ui)
    result.phase1 = p1
    if base is not None and p1.status == "pass":
        baseline_mod.check_outputs(base, p1.outputs)
    skip = None
    if p1.status != "pass":
        e = p1.error
        skip = f"phase 1 failed ({e['type']}{' in ' + e['op'] if e['op'] else ''}): nothing to compare or time"
    return p1, session, skip


def _run_phase2(result: CheckResult, loaded, cfg: CheckConfig, session, skip, ui) -> tuple:
    """Phase 2 (and its compiled section under ``--mode both``); returns it and its extras."""
    p2, extra = phase2.run(loaded, cfg, session.outputs, ui, skip)
    result.phase2 = p2
    if cfg.mode == "both" and p2.status != "skipped" and session.compiled_outputs is not None:
        p2.compiled = phase2.compiled_section(session.compiled_outputs, session.outputs, extra, cfg)
    return p2, extra


def _run_phase3(
    result: CheckResult, loaded, cfg: CheckConfig, session, extra: dict, skip, ui
) -> Phase3Result:
    """Phase 3, and a host-latency baseline's extra rounds up to ``--max-rounds``."""
    p1 = result.phase1
    # --mode both: the compiled model in the same interleaved iterations as eager
    comp = p1.compile
    if cfg.mode == "both" and skip is None and comp.ok:
        session.compiled_model = torch.compile(
            session.model, backend="neuron"
        )  # in-memory executables
    # --mode compile: the device's cold figure is the compiled model's first call (compile
    # included), never phase 1's eager first pass
    compiled_device = comp.phases_2_3 == "compiled"
    p3 = phase3.run(
        session,
        extra["reference"],
        cfg,
        loaded.batch_size,
        comp.compile_s if compiled_device else p1.cold_latency_s,
        ui,
        skip,
        extra.get("reference_cold_s"),
        comp.compile_s,
    )
    p3.cold_basis = (
        "compiled first call (compile included)" if compiled_device else "eager first pass"
    )
    result.phase3 = p3
    if cfg.save_baseline and p3.status == "pass" and cfg.gate_host_latency:
        # A baseline for host-latency gates is measured --max-rounds rounds (pooled): every later
        # check is compared with it, so its own sampling error is in every interval (docs/design/check-measurement.md)
        while p3.rounds < cfg.max_rounds:
            ui.step(f"Baseline: measuring round {p3.rounds + 1} of {cfg.max_rounds} (--max-rounds)")
            phase3.another_round(p3, session, extra["reference"], cfg, loaded.batch_size, ui)
    return p3


def _run_profile_and_exact(
    result: CheckResult, session, cfg: CheckConfig, p1: Phase1Result, skip, ui
) -> None:
    """``--profile`` (after phase 3's warm-up) and the exact quantities per pass."""
    if cfg.profile:  # after phase 3's warm-up: a steady-state iteration (check/phases/profile.py)
        from .phases import profile as profile_mod

        result.profile = (
            profile_mod.run(session, cfg, ui)
            if skip is None
            else ProfileResult(status="skipped", reason=skip)
        )
    # exact quantities per pass (phases/exact.py): the default performance gates
    from .phases import exact

    result.exact = (
        exact.run(session, cfg, p1, ui)
        if skip is None and not cfg.baseline_process
        else ExactResult("skipped", reason=skip or "a baseline's extra process")
    )


def _phase_warnings(
    result: CheckResult, p1: Phase1Result, p2: Phase2Result, p3: Phase3Result
) -> None:
    """The warnings of phases 2 and 3, outputs not compared, a non-deterministic device."""
    result.warnings += p2.warnings + p3.warnings
    if p1.uncomparable_outputs:
        result.warnings.append(
            "outputs not compared (not tensors): "
            + ", ".join(f"{u['name']} ({u['type']})" for u in p1.uncomparable_outputs)
        )
    if p1.determinism and not p1.determinism["identical"]:
        why = ""
        if os.environ.get("TORCHNEURON_CONCATENATION_FUSE") == "1":
            why = " (adaptive eager execution: a fused segment rounds once per graph)"
        result.warnings.append(
            f"two device runs gave different outputs (not bitwise deterministic){why}"
        )


def _run_training(result: CheckResult, loaded, cfg: CheckConfig, p1: Phase1Result, ui) -> None:
    """The training check (factories returning a loss_fn) and its warnings."""
    from .phases import training

    result.training = (
        training.run(loaded, cfg, ui, cfg.train_steps)
        if p1.status == "pass" and not cfg.baseline_process
        else TrainingResult(
            status="skipped",
            reason="phase 1 failed"
            if p1.status != "pass"
            else "a baseline's extra process measures phase 3 only",
        )
    )
    tr = result.training
    result.warnings += [f"training: {w}" for w in (tr.warnings or []) + (tr.device_warnings or [])]


def _run_projection(result: CheckResult, loaded, cfg: CheckConfig, p1: Phase1Result, ui) -> None:
    """The Trainium projection (an estimate from the graph, never a verdict)."""
    from .phases import projection as project_phase

    result.projection = (
        project_phase.run(loaded, cfg, ui)
        if p1.status == "pass" and not cfg.baseline_process
        else ProjectionResult(status="skipped", reason="phase 1 failed")
    )


def _compare_baseline(
    result: CheckResult, base, session, extra: dict, loaded, cfg: CheckConfig, ui
) -> None:
    """The baseline comparison; an undecided latency interval measures another round, up to
    ``--max-rounds``. After phase 1 failed, only whether the model still compiles."""
    p1, p3 = result.phase1, result.phase3
    if base is not None:
        if p1.status == "pass":
            result.baseline = baseline_compare.compare(
                base, result, session.outputs, cfg.torch_dtype
            )
            while (
                cfg.gate_host_latency
                and _undecided(result.baseline)
                and p3.status == "pass"
                and p3.rounds < cfg.max_rounds
            ):
                ui.step(
                    f"Latency against the baseline undecided after {p3.rounds} round(s): measuring again"
                )
                phase3.another_round(p3, session, extra["reference"], cfg, loaded.batch_size, ui)
                result.baseline = baseline_compare.compare(
                    base, result, session.outputs, cfg.torch_dtype
                )
            _confirm_regressions(result, base, session, cfg, ui)
        else:
            # nothing to compare but whether the model still compiles (a compile failure fails phase 1)
            result.baseline = baseline_compare.compile_only(base, p1)
    else:
        result.baseline = None
    if result.training.status in ("pass", "fail") and (base is not None or cfg.save_baseline):
        result.warnings.append(TRAINING_NOT_BASELINED)  # baseline.training


def _decide(result: CheckResult, cfg: CheckConfig) -> None:
    """The verdict and exit code from the failures; inconclusive only under
    ``--gate-host-latency``."""
    fails = result.failures
    fails += _failures(result, cfg)
    # exit 3 belongs to --gate-host-latency alone: the exact gates always decide
    undecided = _undecided(result.baseline) if cfg.gate_host_latency else []
    inconclusive = not fails and bool(undecided)
    if inconclusive:
        result.inconclusive = _inconclusive_reason(result, undecided)
    result.verdict = "fail" if fails else "inconclusive" if inconclusive else "pass"
    result.exit_code = EXIT_FAIL if fails else EXIT_INCONCLUSIVE if inconclusive else EXIT_PASS


def _failures(result: CheckResult, cfg: CheckConfig) -> list[str]:
    """One line per failure: phases 1–3, training, regressions, the cost budget."""
    p1, p2, p3 = result.phase1, result.phase2, result.phase3
    fails = []
    if p1.status == "fail":
        e = p1.error
        fails.append(
            f"phase 1: the model failed on {p1.device} during {e['stage']}: {e['type']}"
            + (f" in {e['op']}" if e["op"] else "")
            + f": {e.get('short_message') or ''}"
            + (f" (hint: {e['hint']})" if e.get("hint") else "")
        )
    if p2.status == "fail":
        bad = [k for k, v in p2.outputs.items() if not v["passed"]]
        fails.append(
            f"phase 2: {len(bad)} output(s) not accurate against {cfg.reference}: {', '.join(bad)}"
        )
    if (p2.compiled or {}).get("status") == "fail":
        bad = [k for k, v in p2.compiled["outputs"].items() if not v["passed"]]
        fails.append(
            f"phase 2 (compiled): {len(bad)} output(s) not accurate against {cfg.reference}: "
            f"{', '.join(bad)}"
        )
    if p3.status == "fail":
        fails.append(f"phase 3: {p3.reason}")
    if result.training.status == "fail":
        fails.append(f"training: {result.training.reason}")
    if result.baseline and result.baseline.regressions:
        fails += [f"regression: {r}" for r in result.baseline.regressions]
    if result.cost.over_budget:
        fails.append(
            f"cost: {result.cost.device['usd_per_million']:.4g} USD per million samples exceeds "
            f"the budget of {cfg.max_cost_per_million:g} (--max-cost-per-million)"
        )
    return fails


def _inconclusive_reason(result: CheckResult, undecided: list[str]) -> str:
    """Why the host latency could not be decided: the comparisons, rounds and processes."""
    lat = (result.baseline.latency if result.baseline else None) or {}
    procs = max(
        [
            len((c.get("confirmation") or {}).get("values", [1]))
            for c in lat.get("statistics", {}).values()
        ]
        or [1]
    )
    return (
        f"inconclusive: the host was too noisy to decide latency ({', '.join(undecided)}) "
        f"against the baseline after {result.phase3.rounds} round(s) (--max-rounds)"
        + (f" and on the median of {procs} processes" if procs > 1 else "")
        + f": an interval of the change straddles the threshold "
        f"+{result.thresholds['latency_p50']:.0%}"
    )


def _save_baseline(result: CheckResult, cfg: CheckConfig, extra: dict, session, ui) -> None:
    """Baseline save: only what --save-baseline names, only for a passing run."""
    result.baseline_saved = None
    if cfg.save_baseline:
        if result.verdict == "pass":
            _measure_processes(result, cfg, ui)
            outs = {
                "reference": extra["outputs"]["reference"],
                "fp64": extra["outputs"]["fp64"],
                "device": session.outputs,
            }
            baseline_mod.save(cfg.save_baseline, result, outs)
            result.baseline_saved = cfg.save_baseline
        else:
            result.warnings.append(f"baseline not saved to {cfg.save_baseline!r}: the check failed")


def _measure_processes(result: CheckResult, cfg: CheckConfig, ui) -> None:
    """``--baseline-runs N``: phase 3 in N - 1 more fresh processes, their figures beside this
    one's in ``phase3.baseline_processes`` (baseline_runs.py), which the baseline keeps."""
    from .baseline import runs as baseline_runs

    p3 = result.phase3
    own = baseline_runs.estimates(p3)
    # --mode compile: the compiled figures are compared with their own margin, not these;
    # without --gate-host-latency the host's figures decide nothing: one process is enough
    if cfg.baseline_runs < 2 or not own or cfg.mode == "compile" or not cfg.gate_host_latency:
        p3.put("baseline_processes", baseline_runs.summary([own]) if own else None)
        return
    extra = baseline_runs.measure(cfg, cfg.baseline_runs - 1, ui)
    failed = [e["error"] for e in extra if "error" in e]
    p3.put(
        "baseline_processes", baseline_runs.summary([own] + [e for e in extra if "error" not in e])
    )
    p3.baseline_processes["failed"] = failed
    result.warnings += [
        f"baseline: an extra process of --baseline-runs failed ({why})" for why in failed
    ]


def _confirm_regressions(result: CheckResult, base, session, cfg: CheckConfig, ui) -> None:
    """A latency regression of this process re-measured in up to ``--baseline-runs`` − 1 fresh
    processes and decided on the median over the processes (baseline_runs.confirm): one
    process's offset is not a verdict, as a baseline is not one process's figure."""
    from .baseline import runs as baseline_runs

    if result.phase3.status != "pass" or cfg.baseline_process or not cfg.gate_host_latency:
        return
    conf = baseline_runs.confirm(result.baseline.latency or {}, cfg, ui)
    if conf is None:
        return
    result.baseline = baseline_compare.compare(base, result, session.outputs, cfg.torch_dtype, conf)
    result.warnings += [
        f"baseline: a fresh process confirming a latency regression failed ({why})"
        for why in conf["failed"]
    ]


def _undecided(b: BaselineComparison | None) -> list[str]:
    """Which latency comparisons with the baseline are undecided: ``eager``, ``compiled``."""
    if b is None:
        return []
    lats = (
        ("eager", b.latency or {}),
        ("compiled", (b.compiled or {}).get("latency") or {}),
    )
    return [name for name, lat in lats if lat.get("decision") == "undecided"]


def write_outputs(result: CheckResult, cfg: CheckConfig) -> list[str]:
    """Write the --json, --junit and --html files asked for; returns their paths."""
    from .report import html as report_html
    from .report import junit
    from .report.json_report import write_json

    written = []
    if cfg.json_path:
        write_json(result, cfg.json_path)
        written.append(cfg.json_path)
    if cfg.junit_path:
        junit.write(result, cfg.junit_path)
        written.append(cfg.junit_path)
    if cfg.html_path:
        report_html.write(result, cfg.html_path)
        written.append(cfg.html_path)
    return written
