"""The terminal report's ``--details`` tables after phases 1 to 3: training, cost, the
Trainium projection, the per-pass trace and the baseline comparison."""

from __future__ import annotations

from dataclasses import replace

from rich import box
from rich.table import Table
from rich.text import Text

from .. import formatting
from ..result import CheckResult
from ..result_baseline import BaselineComparison
from ..result_cost import CostResult
from ..result_exact import ExactResult
from ..result_projection import ProjectionResult
from ..result_training import TrainingResult
from . import exact_terminal, summary
from .terminal_phases import phase1_tables, phase2_tables, phase3_tables, status_text


def cost_table(c: CostResult) -> list:
    """The cost table, the budget line and the cost notes (one line when nothing was timed)."""
    if not (
        c.device.get("throughput_samples_per_s") or c.reference.get("throughput_samples_per_s")
    ):
        return [Text("Cost: not computed (phase 3 did not run)", style="yellow")]
    t = Table(
        title="Cost per million samples (on-demand)",
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAVY,
        caption=f"{c.formula}, amortized over {c.amortize_samples:,} samples",
        caption_justify="left",
    )
    t.add_column("", style="cyan", no_wrap=True)
    t.add_column("device", justify="right")
    t.add_column("reference", justify="right")
    d, r = c.device, c.reference
    comp = c.compiled
    if comp:
        t.add_column("compiled (backend neuron)", justify="right")
    for label, fn in (
        ("priced as", lambda x: x["instance"]),
        ("USD per hour", lambda x: formatting.usd(x["usd_per_hour"])),
        ("price as of", lambda x: x.get("as_of") or "given"),
        ("throughput (samples/s)", lambda x: formatting.num(x.get("throughput_samples_per_s"))),
        ("one-time overhead", lambda x: formatting.ms(x.get("overhead_s"))),
        ("USD per 1M samples, steady", lambda x: formatting.usd(x.get("usd_per_million_steady"))),
        ("USD per 1M samples, amortized", lambda x: formatting.usd(x.get("usd_per_million"))),
    ):
        t.add_row(label, fn(d), fn(r), *([fn(d | comp)] if comp else []))
    out: list = [t]
    for label, x in (
        ("device", c.device),
        ("reference", c.reference),
        ("compiled", comp or {}),
    ):
        if x.get("overhead_label"):
            out.append(Text(f"{label} one-time overhead: {x['overhead_label']}", style="dim"))
    srcs = {x.get("source") for x in (c.device, c.reference) if x.get("source")}
    for s in sorted(srcs):
        out.append(Text(f"price source: {s}", style="dim"))
    if c.budget_usd_per_million is not None:
        out.append(
            Text(
                f"budget {formatting.usd(c.budget_usd_per_million)} per million: "
                + ("EXCEEDED" if c.over_budget else "within"),
                style="bold red" if c.over_budget else "green",
            )
        )
    for n in c.notes:
        out.append(Text(f"note: {n}", style="dim"))
    return out


def baseline_table(b: BaselineComparison | None) -> list:
    """The baseline comparison (nothing without --baseline)."""
    if not b:
        return []
    t = Table(
        title=f"Baseline comparison ({b.path}, saved {b.created_utc or '?'})",
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAVY,
    )
    for col in ("check", "baseline", "current", "change", "threshold", "result"):
        t.add_column(col)
    if b.status == "skipped":
        t.add_row("all", "", "", "", "", status_text("skipped"))
        return [t, Text(f"reason: {b.reason}", style="yellow")]
    for name, a in (b.accuracy or {}).items():
        t.add_row(
            f"accuracy {name}",
            "reference + fp64 outputs",
            f"max abs {formatting.num(a.get('max_abs'))}",
            "identical" if a.get("identical_to_baseline_device") else "",
            a.get("decided_by", ""),
            status_text("pass" if a.get("passed") else "fail"),
        )
    comp = b.compiled or {}
    exact_notes = exact_terminal.baseline_rows(t, b.exact)
    _latency_rows(t, b.latency or {}, "")
    cc = comp.get("compile") or {}
    if "note" in cc:
        t.add_row("compiles (torch.compile)", "", "", "", "", Text(cc["note"], style="yellow"))
    elif cc:
        t.add_row(
            "compiles (torch.compile)",
            *formatting.compile_cells(cc),
            f"{cc['graph_breaks']['baseline']} → {cc['graph_breaks']['current']} graph break(s)",
            "must compile",
            status_text("fail" if cc["regressed"] else "pass"),
        )
    if comp:
        _latency_rows(t, comp.get("latency") or {}, " (compiled)")
    mem = b.memory or {}
    if mem.get("note"):  # not compared (a compiled peak against an eager one)
        t.add_row("peak memory (allocated)", "", "", mem["note"], "", "not compared")
        mem = {}
    elif mem:
        t.add_row(
            formatting.peak_label(mem),
            formatting.nbytes(mem["baseline_peak_allocated_bytes"]),
            formatting.nbytes(mem["current_peak_allocated_bytes"]),
            formatting.signed_pct(mem["change"]),
            f"+{mem['threshold']:.0%} and +{formatting.nbytes(mem['min_increase_bytes'])}",
            status_text("fail" if mem["regressed"] else "pass"),
        )
    for cells, res in formatting.training_baseline_rows(b.training or {}):
        t.add_row(*cells, Text("info only", style="dim") if res == "info" else status_text(res))
    return [t, *exact_notes, *_baseline_notes(b, mem)]


def _baseline_notes(b: BaselineComparison, mem: dict) -> list:
    """The lines under the baseline table: host latency, memory rule, what changed."""
    out: list = []
    lat = b.latency or {}
    if lat.get("host_time_note"):
        out.append(Text(f"latency: {lat['host_time_note']}", style="dim"))
    if b.reason:
        out.append(Text(f"reason: {b.reason}", style="yellow"))
    if mem:
        out.append(
            Text(
                f"peak memory: a regression needs both +{mem['threshold']:.0%} and at least "
                f"{formatting.nbytes(mem['min_increase_bytes'])} more (peak_memory_min_bytes): a small model's peak is a few "
                "allocator blocks, and a baseline saved before the program-order peak holds the run-ahead "
                "one, which moves by several blocks between identical runs (frees follow the device queue)",
                style="dim",
            )
        )
    ch = b.changes or {}
    if ch.get("new_fallback_ops"):
        out.append(
            Text(
                f"new CPU fallback ops since the baseline: {', '.join(ch['new_fallback_ops'])}",
                style="yellow",
            )
        )
    if ch.get("manifest"):
        out.append(
            Text(
                "changed since the baseline: "
                + "; ".join(
                    f"{m['key']}: {m['baseline']} → {m['current']}" for m in ch["manifest"][:12]
                ),
                style="dim",
            )
        )
    return out


def _latency_rows(t: Table, lat: dict, label: str) -> None:
    """The rows of one latency comparison (eager: ``label`` "", compiled: " (compiled)")."""
    if "baseline_p50_s" not in lat:
        t.add_row(
            f"p50 latency{label}",
            "",
            "",
            "",
            "",
            Text(lat.get("note", "not compared"), style="yellow"),
        )
        return
    st_all = lat.get("statistics") or {}
    t.add_row(
        f"p50 latency{label} (emulator host time"
        + (", shown only)" if lat.get("gated") is False else ", raw)"),
        formatting.ms(lat["baseline_p50_s"]),
        formatting.ms(lat["current_p50_s"]),
        formatting.signed_pct(lat["change"]),
        "" if st_all else f"+{lat['threshold']:.0%}",
        "" if st_all else status_text("fail" if lat["regressed"] else "pass"),
    )
    if lat.get("baseline_throughput_samples_per_s") and lat.get("current_throughput_samples_per_s"):
        bt, ct = lat["baseline_throughput_samples_per_s"], lat["current_throughput_samples_per_s"]
        t.add_row(
            f"throughput{label} (samples/s, raw)",
            formatting.num(bt),
            formatting.num(ct),
            formatting.signed_pct(ct / bt - 1),
            "",
            "",
        )
    for name, st in st_all.items():
        ci = st["ci"]
        change = "" if ci is None else f"x{ci['ratio']:.3f} [{ci['low']:.3f}, {ci['high']:.3f}]"
        res = (
            {
                "regressed": status_text("fail"),
                "pass": status_text("pass"),
                "undecided": Text("undecided", style="yellow"),
            }[st["decision"]]
            if st.get("decides")
            else Text("info only", style="dim")
        )
        t.add_row(
            f"latency{label} {name.replace('_', ' ')} ({st['statistic']})",
            formatting.num(st["baseline_value"]),
            formatting.num(st["current_value"]),
            change,
            f"+{st['threshold']:.0%}",
            res,
        )
        conf = formatting.confirmation_row(name, st)
        if conf:
            t.add_row(*conf, "")


def training_tables(tr: TrainingResult | None, label: str = "") -> list:
    """The training check: loss curve and gradient norms per step, parameter updates; the
    compiled mode's steps (``tr.compiled``) in a table of their own."""
    if not tr or tr.status == "skipped":
        return []
    compiled = []
    if tr.compiled:
        c = replace(tr.compiled, steps=tr.steps, optimizer=tr.optimizer)
        compiled = (
            training_tables(c, " (compiled, backend neuron)")
            if c.per_step is not None
            else [Text(f"Training (compiled): {c.reason}", style="red")]
        )
    if tr.per_step is None:
        return (
            [Text(f"Training: {tr.reason}", style="red")]
            if tr.status == "fail" and not compiled
            else [Text(f"Training (eager): {tr.note or tr.reason}", style="dim")]
        ) + compiled
    t = Table(
        title=f"Training{label} — {tr.steps} steps, {tr.optimizer}  {tr.status.upper()}",
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAVY,
    )
    groups = list(tr.per_step[0]["grad_norm_device"])
    for col in (
        ["step", "loss device", "loss reference", "loss fp64", "loss"]
        + [f"|grad| {g}" for g in groups]
        + ["step time device"]
    ):
        t.add_column(col, justify="right")
    for s in tr.per_step:
        t.add_row(
            str(s["step"]),
            f"{s['loss_device']:.6g}",
            f"{s['loss_reference']:.6g}",
            f"{s['loss_fp64']:.6g}",
            status_text("pass" if s["loss_passed"] else "fail"),
            *[
                f"{s['grad_norm_device'][g]:.4g} vs {s['grad_norm_reference'][g]:.4g} "
                + ("ok" if s["grad_norm_passed"][g] else "FAIL")
                for g in groups
            ],
            formatting.ms(s["step_time_device_s"]),
        )
    fp = tr.final_params
    return [
        t,
        Text(
            f"parameter updates (final - initial): {fp['compared'] - len(fp['failed'])}/{fp['compared']} "
            "pass the benchmark rule"
            + (f" (failing: {', '.join(fp['failed'][:5])})" if fp["failed"] else "")
            + f"; device step p50 {formatting.ms(tr.step_time['device_p50_s'])} (reference "
            f"{formatting.ms(tr.step_time['reference_p50_s'])}); peak device memory with optimizer state "
            f"{formatting.nbytes(tr.peak_allocated_bytes)}"
        ),
    ] + compiled


def projection_tables(p: ProjectionResult | None, exact: ExactResult | None = None) -> list:
    """The Trainium projection (nothing unless --projection was given)."""
    if not p or p.status == "skipped":
        return []
    if p.status != "pass":
        return [Text(f"Trainium projection: {p.reason}", style="yellow")]
    t = Table(
        title="Trainium projection: ESTIMATE from a roofline model of the StableHLO graph, not a measurement",
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAVY,
    )
    t.add_column("", style="cyan", no_wrap=True)
    for key in ("trn2", "trn3"):
        t.add_column(f"{p.core(key)['chip']} ({p.core(key)['core']})", justify="right")
    a, b = p.trn2, p.trn3
    for label, fn in (
        ("latency per pass, one core", lambda x: f"{x['latency_s_per_core'] * 1e6:.4g} µs"),
        ("of which HBM weights/inputs/outputs (serial)", formatting.projected_serial),
        ("throughput per core (samples/s)", lambda x: formatting.num(x["throughput_per_core"])),
        ("priced as", formatting.projected_instance),
        (
            "throughput per instance (samples/s)",
            lambda x: formatting.num(x["throughput_per_instance"]),
        ),
        ("USD per 1M samples", formatting.projected_cost),
        ("GFLOP per pass", lambda x: f"{x['total_flops'] / 1e9:.3g}"),
    ):
        t.add_row(label, fn(a), fn(b))
    ep = (exact.eager or {}).get("projection") if exact else None
    if ep:  # the eager pass from its kernel trace, beside the compiled graph's
        extra, us = summary.extra_launches(exact)
        t.add_row(
            f"compiled pass (+ {extra} more graph launch(es) x {us:g} µs)",
            f"{a['latency_s_per_core'] * 1e6 + extra * us:.4g} µs",
            f"{b['latency_s_per_core'] * 1e6 + extra * us:.4g} µs",
        )
        t.add_row(
            f"eager pass (kernel trace, {ep['trn2']['launches']} launches)",
            f"{ep['trn2']['latency_s'] * 1e6:.4g} µs",
            f"{ep['trn3']['latency_s'] * 1e6:.4g} µs",
        )
    top = Table(
        title="Top operations by projected time (Trainium2)", title_justify="left", box=box.SIMPLE
    )
    for col in ("op", "shape", "engine", "GFLOP", "time", "bound"):
        top.add_column(col)
    shown = formatting.projected_top(a, 8)
    for r in shown:
        top.add_row(
            r["op"],
            r["shape"],
            r["engine"],
            f"{r['flops'] / 1e9:.3g}",
            f"{r['time_s'] * 1e6:.3g} µs",
            r["bound"],
        )
    label, rest = formatting.projected_rest(a, shown)
    if not label.startswith("0 "):
        top.add_row(label, "", "", "", rest, "")
    return [
        t,
        top,
        Text(
            f"{p.note}; lowered with {p.how}; matmuls at the TensorE {a['matmul_dtype'].upper()} "
            "rate (Neuron's default matmul autocast); see docs/check.md",
            style="dim",
        ),
    ]


def tables(result: CheckResult, width: int) -> list[list]:
    """Every table of the report, in order: the run's settings, phases 1 to 3, training,
    cost, projection, the per-pass trace, the baseline comparison."""
    m, ds = result.model, result.manifest["device_stack"]
    head = Text(
        f"{m['description']}\nbatch {m['batch_size']} · {m['dtype']} · seed {m['seed']} · "
        f"{m['parameters']:,} parameters · device {result.phase1.device} "
        f"({ds['device_name']}, runtime {ds['runtime']} {ds['runtime_version']}) · reference "
        f"{result.config['reference']}"
    )
    note = (
        [
            Text(
                "The device is the NeuronCore emulator: timings and throughput are the "
                "emulator's on this host, not Trainium's.",
                style="yellow",
            )
        ]
        if ds.get("emulated")
        else []
    )
    return [
        [head, *note],
        phase1_tables(result.phase1),
        phase2_tables(result.phase2, width),
        phase3_tables(result.phase3, result.config["reference"]),
        training_tables(result.training),
        cost_table(result.cost),
        projection_tables(result.projection, result.exact),
        exact_terminal.per_pass_table(result),
        baseline_table(result.baseline),
    ]
