"""The terminal report (rich): one table per phase, the cost, the baseline comparison and
the verdict; and the UI shown while a check runs (steps and progress bars)."""

from __future__ import annotations

from rich import box
from rich.console import Console, Group
from rich.panel import Panel
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from .. import formatting as F
from . import exact_terminal

_STATUS_STYLE = {"pass": "bold green", "fail": "bold red", "skipped": "yellow"}


def status_text(status: str | None) -> Text:
    """PASS / FAIL / SKIPPED, coloured."""
    s = status or "–"
    return Text(s.upper(), style=_STATUS_STYLE.get(s, ""))


class TerminalUI:
    """Steps as dim lines and rich progress bars, on ``console`` (stderr by default)."""

    def __init__(self, console: Console | None = None, progress: bool = True):
        self.console = console or Console(stderr=True)
        self.show_progress = progress and self.console.is_terminal

    def step(self, msg: str) -> None:
        """Announce a step of the run."""
        self.console.print(f"[dim]• {msg}[/dim]")

    def progress(self, description: str, total: int | None):
        """A progress bar (a context manager with ``advance(info)``); total None: unknown."""
        return _Bar(self.console, description, total, enabled=self.show_progress)


class _Bar:
    def __init__(self, console: Console, description: str, total: int | None, enabled: bool):
        self.description = description
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=not enabled,
        )
        self.task = self.progress.add_task(description, total=total, info="")

    def __enter__(self):
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)

    def advance(self, info: str = "") -> None:
        """One more iteration; ``info`` is shown beside the bar."""
        self.progress.update(self.task, advance=1, info=info)


def _kv_table(title: str) -> Table:
    t = Table(
        title=title,
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAVY,
        show_header=False,
    )
    t.add_column("what", style="cyan", no_wrap=True)
    t.add_column("value")
    return t


def phase1_tables(p1: dict) -> list:
    """Renderables of phase 1: its table, the fallback ops, device warnings, the failure."""
    t = _kv_table("Phase 1 — does it run on the device")
    t.add_row("result", status_text(p1["status"]))
    t.add_row("device", p1["device"])
    comp = p1.get("compile", {})
    t.add_row(
        "mode",
        (
            "eager and compile (torch.compile backend 'neuron'); phases 2 and 3 "
            + ("compiled" if comp.get("phases_2_3") == "compiled" else "eager")
        )
        if comp.get("checked")
        else f"eager  ({comp.get('note')})",
    )
    if comp.get("checked") and comp.get("ok"):
        t.add_row(
            "torch.compile",
            f"ok, {F.graphs_ran(comp)}, "
            f"{comp.get('graph_breaks')} graph break(s), {comp.get('recompiles')} recompile(s); "
            f"cold compile {F.ms(comp['compile_s'], 1)}, warm (cache hit) "
            f"{F.ms(comp.get('warm_compile_s'), 1)}",
        )
        for b in comp.get("break_reasons") or []:
            t.add_row(
                "  graph break", f"{b['reason']}" + (f" at {b['where']}" if b.get("where") else "")
            )
    elif comp.get("checked") and comp.get("error"):
        e = comp["error"]
        t.add_row(
            "torch.compile",
            f"FAILED at {e.get('compile_stage') or e.get('stage')}"
            + (f", op {e['op']}" if e.get("op") else "")
            + (f", from {e['raised_at']}" if e.get("raised_at") else ""),
        )
    t.add_row("fallback mode", p1.get("fallback_mode") or "–")
    if p1.get("cold_latency_s") is not None:
        t.add_row(
            "cold latency ("
            + ("eager " if (p1.get("compile") or {}).get("checked") else "")
            + "first iteration)",
            F.ms(p1["cold_latency_s"]),
        )
    fb = p1["fallback"]
    t.add_row(
        "CPU fallback ops",
        "none"
        if not fb["ops"]
        else f"{len(fb['ops'])} op(s), {F.ms(fb['total_seconds'])} = {F.pct(fb['share'])} of device run time",
    )
    t.add_row("64-bit narrowing", F.narrowing(p1))
    m = p1["memory"]
    t.add_row("peak device memory", F.peak_memory(m))
    det = p1.get("determinism")
    if det:
        t.add_row(
            "determinism (2 runs)",
            Text("bitwise identical", style="green")
            if det["identical"]
            else Text(
                "outputs differ: "
                + ", ".join(
                    f"{k} max |Δ| {F.num(v['max_abs_diff'])}"
                    for k, v in det["outputs"].items()
                    if not v["identical"]
                ),
                style="yellow",
            ),
        )
    if p1.get("outputs"):
        t.add_row(
            "outputs", ", ".join(f"{o['name']} {o['shape']} {o['dtype']}" for o in p1["outputs"])
        )
    out: list = [t]
    if fb["ops"]:
        ft = Table(title="CPU fallback ops (phase 1 runs)", title_justify="left", box=box.SIMPLE)
        for c in ("op", "calls", "seconds", "share of device run time"):
            ft.add_column(c, justify="left" if c == "op" else "right")
        for op, v in fb["ops"].items():
            ft.add_row(op, str(v["calls"]), F.ms(v["seconds"]), F.pct(v["share"]))
        out.append(ft)
    e = p1.get("error")
    if e:
        body = Text()
        body.append(f"{e['type']} during {e['stage']}\n", style="bold red")
        body.append(
            f"failing op: {e['op'] or 'none identified (raised outside an ATen operator)'}"
            + (f"  [{e['op_source']}]" if e.get("op_source") else "")
            + "\n"
        )
        if e.get("raised_at"):
            body.append(f"raised at: {e['raised_at']}\n")
        if e.get("reference"):
            body.append(f"reference: {e['reference'][:300]}\n")
        body.append((e.get("short_message") or e["message"][:240]) + "\n", style="red")
        if e.get("hint"):
            body.append(f"hint: {e['hint']}\n", style="bold yellow")
        body.append("(full message and traceback: --json)\n\n", style="dim")
        body.append(_frames_tail(e["traceback"], 8), style="dim")
        out.append(Panel(body, title="phase 1 failure", border_style="red"))
    return out


def _frames_tail(tb: str, lines: int) -> str:
    """The last frames of a formatted traceback without its exception message: the message
    (a compiler's IR dump, Dynamo's advice) is the short message above, and whole in the JSON."""
    ls = tb.rstrip().splitlines()
    heads = [i for i, ln in enumerate(ls) if ln.startswith("Traceback (most recent call last)")]
    if not heads:
        return _tail(tb, lines)
    start = end = heads[-1] + 1  # the last (outermost) exception of a chain
    while end < len(ls) and ls[end].startswith("  "):  # frames, their source lines and carets
        end += 1
    return "\n".join([ls[heads[-1]]] + _tail("\n".join(ls[start:end]), lines).splitlines())


def _tail(text: str, lines: int) -> str:
    ls = text.rstrip().splitlines()
    return "\n".join((["..."] if len(ls) > lines else []) + ls[-lines:])


def phase2_tables(p2: dict, width: int = 200, label: str = "") -> list:
    """The accuracy table: one row per output, or one column per output below 130 columns;
    the compiled model's (``--mode both``) in a second table."""
    if p2.get("compiled") and not label:
        return phase2_tables(
            {k: v for k, v in p2.items() if k != "compiled"}, width, ""
        ) + phase2_tables(
            p2
            | {
                "status": p2["compiled"]["status"],
                "outputs": p2["compiled"]["outputs"],
                "compiled": None,
            },
            width,
            " (compiled, backend neuron)",
        )
    title = f"Phase 2{label} — is it accurate  (reference {p2['reference_device']}, golden fp64 on cpu, {p2['dtype']})"
    if p2["status"] == "skipped":
        t = _kv_table(title)
        t.add_row("result", status_text("skipped"))
        t.add_row("reason", p2.get("reason") or "")
        return [t]
    if width < 130:  # one row per metric, one column per output
        t = Table(
            title=title,
            title_justify="left",
            title_style="bold",
            box=box.SIMPLE_HEAVY,
            caption=f"rule: {p2['rule']}; tol {p2['tol']:g} ({p2['tol_source']}), m = {p2['multiplier']:g}",
            caption_justify="left",
        )
        t.add_column("", style="cyan", no_wrap=True)
        outs = list(p2["outputs"].items())
        for name, _ in outs:
            t.add_column(name, justify="right", overflow="fold")
        rows = [
            ("shape", lambda o: str(o.get("shape", ""))),
            ("max abs", lambda o: F.num(o.get("max_abs"))),
            ("max rel", lambda o: F.num(o.get("max_rel"))),
            ("cosine", lambda o: "–" if o.get("cosine") is None else f"{o['cosine']:.7f}"),
            ("RMSE device vs fp64", lambda o: F.num(o.get("rmse_device_fp64"))),
            ("RMSE reference vs fp64", lambda o: F.num(o.get("rmse_reference_fp64"))),
            ("RMSE bound", lambda o: F.num(o.get("rmse_bound"))),
            ("decided by", lambda o: o.get("decided_by", "")),
        ]
        for label, fn in rows:
            t.add_row(label, *[fn(o) for _, o in outs])
        t.add_row("result", *[status_text("pass" if o.get("passed") else "fail") for _, o in outs])
        return [t]
    t = Table(
        title=title,
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAVY,
        caption=f"rule: {p2['rule']}; tol {p2['tol']:g} ({p2['tol_source']}), m = {p2['multiplier']:g}",
        caption_justify="left",
    )
    for c in (
        "output",
        "shape",
        "max abs",
        "max rel",
        "cosine",
        "RMSE dev/fp64",
        "RMSE ref/fp64",
        "RMSE bound",
        "decided by",
        "result",
    ):
        wrap = c in ("output", "decided by", "shape")
        t.add_column(c, justify="left" if wrap else "right", overflow="fold", no_wrap=not wrap)
    for name, o in p2["outputs"].items():
        t.add_row(
            name,
            str(o.get("shape", "")),
            F.num(o.get("max_abs")),
            F.num(o.get("max_rel")),
            "–" if o.get("cosine") is None else f"{o['cosine']:.7f}",
            F.num(o.get("rmse_device_fp64")),
            F.num(o.get("rmse_reference_fp64")),
            F.num(o.get("rmse_bound")),
            o.get("decided_by", ""),
            status_text("pass" if o.get("passed") else "fail"),
        )
    return [t]


def phase3_tables(p3: dict, reference: str) -> list:
    """The performance table: device, reference and their ratio."""
    title = "Phase 3 — stable performance after warm-up"
    if p3["status"] != "pass" and not p3.get("device"):
        t = _kv_table(title)
        t.add_row("result", status_text(p3["status"]))
        t.add_row("reason", p3.get("reason") or "")
        return [t]
    d, r, ratio = p3["device"], p3.get("reference"), p3.get("ratio") or {}
    t = Table(
        title=title,
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAVY,
        caption=f"{p3['timing']}; {p3['samples_per_iteration']} samples per iteration; CI: {p3['ci_method']}",
        caption_justify="left",
    )
    t.add_column("", style="cyan")
    t.add_column(f"device ({d['device']})", justify="right")
    t.add_column(f"reference ({reference})", justify="right")
    t.add_column("device / reference", justify="right")
    c = p3.get("compiled") if (p3.get("compiled") or {}).get("p50_s") else None
    if c:  # --mode both: the compiled model beside eager
        t.add_column("compiled (backend neuron)", justify="right")
        t.add_column("compiled / eager", justify="right")
        _row = t.add_row

        def add_row(label, *cells, key=None, cx=None):
            cx = cx or (
                F.ms(c.get(key)) if key else "",
                F.ratio(c[key] / d[key]) if key and d.get(key) else "",
            )
            _row(label, *cells, *cx)
    else:

        def add_row(label, *cells, key=None, cx=None):
            t.add_row(label, *cells)

    def wu(x):
        if not x:
            return "–"
        w = x["warmup"]
        cv = "–" if w["final_cv"] is None else f"{w['final_cv']:.3f}"
        return (
            f"{w['iterations']} it, " + ("stable" if w["stable"] else "NOT stable") + f" (CV {cv})"
        )

    def ci(x):
        return (
            "–"
            if not x or not x.get("median_ci95_s")
            else f"{F.ms(x['median_ci95_s'][0])} – {F.ms(x['median_ci95_s'][1])}"
        )

    g = lambda k: r.get(k) if r else None
    add_row(F.cold_label(p3), F.ms(d.get("cold_s")), F.ms(g("cold_s")), "", key="cold_s")
    add_row("warm-up", wu(d), wu(r), "", cx=(wu(c), ""))
    add_row(
        "measured iterations",
        str(d["iterations"]),
        str(g("iterations") or "–"),
        "",
        cx=(str(c["iterations"]) if c else "", ""),
    )
    for k, label in (("p50_s", "p50 latency"), ("p90_s", "p90 latency"), ("p99_s", "p99 latency")):
        rat = F.ratio(d[k] / r[k]) if r and r.get(k) else ""
        add_row(label, F.ms(d[k]), F.ms(g(k)), rat, key=k)
    add_row("95% CI of the median", ci(d), ci(r), "")
    add_row(
        "throughput (samples/s)",
        F.num(d["throughput_samples_per_s"]),
        F.num(g("throughput_samples_per_s")),
        F.ratio(ratio.get("throughput_device_over_reference")),
    )
    if c:
        t.add_row(
            "compiled throughput (samples/s)",
            "",
            "",
            "",
            F.num(c["throughput_samples_per_s"]),
            F.ratio(c["throughput_samples_per_s"] / d["throughput_samples_per_s"]),
        )
    if d.get("fallback_share") is not None:
        t.add_row("CPU fallback share (steady state)", F.pct(d["fallback_share"]), "", "")
    return [t]


def cost_table(c: dict) -> list:
    """The cost table, the budget line and the cost notes (one line when nothing was timed)."""
    if not (
        c["device"].get("throughput_samples_per_s")
        or c["reference"].get("throughput_samples_per_s")
    ):
        return [Text("Cost: not computed (phase 3 did not run)", style="yellow")]
    t = Table(
        title="Cost per million samples (on-demand)",
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAVY,
        caption=f"{c['formula']}, amortized over {c['amortize_samples']:,} samples",
        caption_justify="left",
    )
    t.add_column("", style="cyan", no_wrap=True)
    t.add_column("device", justify="right")
    t.add_column("reference", justify="right")
    d, r = c["device"], c["reference"]
    comp = c.get("compiled")
    if comp:
        t.add_column("compiled (backend neuron)", justify="right")
    for label, fn in (
        ("priced as", lambda x: x["instance"]),
        ("USD per hour", lambda x: F.usd(x["usd_per_hour"])),
        ("price as of", lambda x: x.get("as_of") or "given"),
        ("throughput (samples/s)", lambda x: F.num(x.get("throughput_samples_per_s"))),
        ("one-time overhead", lambda x: F.ms(x.get("overhead_s"))),
        ("USD per 1M samples, steady", lambda x: F.usd(x.get("usd_per_million_steady"))),
        ("USD per 1M samples, amortized", lambda x: F.usd(x.get("usd_per_million"))),
    ):
        t.add_row(label, fn(d), fn(r), *([fn(d | comp)] if comp else []))
    out: list = [t]
    for label, x in (
        ("device", c["device"]),
        ("reference", c["reference"]),
        ("compiled", comp or {}),
    ):
        if x.get("overhead_label"):
            out.append(Text(f"{label} one-time overhead: {x['overhead_label']}", style="dim"))
    srcs = {x.get("source") for x in (c["device"], c["reference"]) if x.get("source")}
    for s in sorted(srcs):
        out.append(Text(f"price source: {s}", style="dim"))
    if c.get("budget_usd_per_million") is not None:
        out.append(
            Text(
                f"budget {F.usd(c['budget_usd_per_million'])} per million: "
                + ("EXCEEDED" if c.get("over_budget") else "within"),
                style="bold red" if c.get("over_budget") else "green",
            )
        )
    for n in c.get("notes", []):
        out.append(Text(f"note: {n}", style="dim"))
    return out


def baseline_table(b: dict | None) -> list:
    """The baseline comparison (nothing without --baseline)."""
    if not b:
        return []
    t = Table(
        title=f"Baseline comparison ({b['path']}, saved {b.get('created_utc') or '?'})",
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAVY,
    )
    for col in ("check", "baseline", "current", "change", "threshold", "result"):
        t.add_column(col)
    if b.get("status") == "skipped":
        t.add_row("all", "", "", "", "", status_text("skipped"))
        return [t, Text(f"reason: {b.get('reason')}", style="yellow")]
    for name, a in b.get("accuracy", {}).items():
        t.add_row(
            f"accuracy {name}",
            "reference + fp64 outputs",
            f"max abs {F.num(a.get('max_abs'))}",
            "identical" if a.get("identical_to_baseline_device") else "",
            a.get("decided_by", ""),
            status_text("pass" if a.get("passed") else "fail"),
        )
    comp = b.get("compiled") or {}
    exact_notes = exact_terminal.baseline_rows(t, b.get("exact"))
    _latency_rows(t, b.get("latency") or {}, "")
    cc = comp.get("compile") or {}
    if "note" in cc:
        t.add_row("compiles (torch.compile)", "", "", "", "", Text(cc["note"], style="yellow"))
    elif cc:
        t.add_row(
            "compiles (torch.compile)",
            *F.compile_cells(cc),
            f"{cc['graph_breaks']['baseline']} → {cc['graph_breaks']['current']} graph break(s)",
            "must compile",
            status_text("fail" if cc["regressed"] else "pass"),
        )
    if comp:
        _latency_rows(t, comp.get("latency") or {}, " (compiled)")
    mem = b.get("memory") or {}
    if mem.get("note"):  # not compared (a compiled peak against an eager one)
        t.add_row("peak memory (allocated)", "", "", mem["note"], "", "not compared")
        mem = {}
    elif mem:
        t.add_row(
            F.peak_label(mem),
            F.nbytes(mem["baseline_peak_allocated_bytes"]),
            F.nbytes(mem["current_peak_allocated_bytes"]),
            F.signed_pct(mem["change"]),
            f"+{mem['threshold']:.0%} and +{F.nbytes(mem['min_increase_bytes'])}",
            status_text("fail" if mem["regressed"] else "pass"),
        )
    for cells, res in F.training_baseline_rows(b.get("training") or {}):
        t.add_row(*cells, Text("info only", style="dim") if res == "info" else status_text(res))
    out: list = [t, *exact_notes]
    lat = b.get("latency") or {}
    if lat.get("host_time_note"):
        out.append(Text(f"latency: {lat['host_time_note']}", style="dim"))
    if b.get("reason"):
        out.append(Text(f"reason: {b['reason']}", style="yellow"))
    if mem:
        out.append(
            Text(
                f"peak memory: a regression needs both +{mem['threshold']:.0%} and at least "
                f"{F.nbytes(mem['min_increase_bytes'])} more (peak_memory_min_bytes): a small model's peak is a few "
                "allocator blocks, and a baseline saved before the program-order peak holds the run-ahead "
                "one, which moves by several blocks between identical runs (frees follow the device queue)",
                style="dim",
            )
        )
    ch = b.get("changes", {})
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
        F.ms(lat["baseline_p50_s"]),
        F.ms(lat["current_p50_s"]),
        F.signed_pct(lat["change"]),
        "" if st_all else f"+{lat['threshold']:.0%}",
        "" if st_all else status_text("fail" if lat["regressed"] else "pass"),
    )
    if lat.get("baseline_throughput_samples_per_s") and lat.get("current_throughput_samples_per_s"):
        bt, ct = lat["baseline_throughput_samples_per_s"], lat["current_throughput_samples_per_s"]
        t.add_row(
            f"throughput{label} (samples/s, raw)",
            F.num(bt),
            F.num(ct),
            F.signed_pct(ct / bt - 1),
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
            F.num(st["baseline_value"]),
            F.num(st["current_value"]),
            change,
            f"+{st['threshold']:.0%}",
            res,
        )
        conf = F.confirmation_row(name, st)
        if conf:
            t.add_row(*conf, "")


def training_tables(tr: dict | None, label: str = "") -> list:
    """The training check: loss curve and gradient norms per step, parameter updates; the
    compiled mode's steps (``tr["compiled"]``) in a table of their own."""
    if not tr or tr.get("status") == "skipped":
        return []
    compiled = []
    if tr.get("compiled"):
        c = tr["compiled"] | {"steps": tr["steps"], "optimizer": tr["optimizer"]}
        compiled = (
            training_tables(c, " (compiled, backend neuron)")
            if "per_step" in c
            else [Text(f"Training (compiled): {c['reason']}", style="red")]
        )
    if "per_step" not in tr:
        return (
            [Text(f"Training: {tr['reason']}", style="red")]
            if tr.get("status") == "fail" and not compiled
            else [Text(f"Training (eager): {tr.get('note') or tr.get('reason')}", style="dim")]
        ) + compiled
    t = Table(
        title=f"Training{label} — {tr['steps']} steps, {tr['optimizer']}  {tr['status'].upper()}",
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAVY,
    )
    groups = list(tr["per_step"][0]["grad_norm_device"])
    for col in (
        ["step", "loss device", "loss reference", "loss fp64", "loss"]
        + [f"|grad| {g}" for g in groups]
        + ["step time device"]
    ):
        t.add_column(col, justify="right")
    for s in tr["per_step"]:
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
            F.ms(s["step_time_device_s"]),
        )
    fp = tr["final_params"]
    return [
        t,
        Text(
            f"parameter updates (final - initial): {fp['compared'] - len(fp['failed'])}/{fp['compared']} "
            "pass the benchmark rule"
            + (f" (failing: {', '.join(fp['failed'][:5])})" if fp["failed"] else "")
            + f"; device step p50 {F.ms(tr['step_time']['device_p50_s'])} (reference "
            f"{F.ms(tr['step_time']['reference_p50_s'])}); peak device memory with optimizer state "
            f"{F.nbytes(tr['peak_allocated_bytes'])}"
        ),
    ] + compiled


def projection_tables(p: dict | None, exact: dict | None = None) -> list:
    """The Trainium projection (nothing unless --projection was given)."""
    if not p or p.get("status") == "skipped":
        return []
    if p["status"] != "pass":
        return [Text(f"Trainium projection: {p['reason']}", style="yellow")]
    t = Table(
        title="Trainium projection: ESTIMATE from a roofline model of the StableHLO graph, not a measurement",
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAVY,
    )
    t.add_column("", style="cyan", no_wrap=True)
    for key in ("trn2", "trn3"):
        t.add_column(f"{p[key]['chip']} ({p[key]['core']})", justify="right")
    a, b = p["trn2"], p["trn3"]
    for label, fn in (
        ("latency per pass, one core", lambda x: f"{x['latency_s_per_core'] * 1e6:.4g} µs"),
        ("of which HBM weights/inputs/outputs (serial)", F.projected_serial),
        ("throughput per core (samples/s)", lambda x: F.num(x["throughput_per_core"])),
        ("priced as", F.projected_instance),
        ("throughput per instance (samples/s)", lambda x: F.num(x["throughput_per_instance"])),
        ("USD per 1M samples", F.projected_cost),
        ("GFLOP per pass", lambda x: f"{x['total_flops'] / 1e9:.3g}"),
    ):
        t.add_row(label, fn(a), fn(b))
    ep = ((exact or {}).get("eager") or {}).get("projection")
    if ep:  # the eager pass from its kernel trace, beside the compiled graph's
        n, us = ((exact or {}).get("compiled") or {}).get("graphs") or 1, ep["trn2"]["launch_us"]
        t.add_row(
            f"compiled pass + {n} launch(es) x {us:g} µs (assumed)",
            f"{a['latency_s_per_core'] * 1e6 + n * us:.4g} µs",
            f"{b['latency_s_per_core'] * 1e6 + n * us:.4g} µs",
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
    shown = F.projected_top(a, 8)
    for r in shown:
        top.add_row(
            r["op"],
            r["shape"],
            r["engine"],
            f"{r['flops'] / 1e9:.3g}",
            f"{r['time_s'] * 1e6:.3g} µs",
            r["bound"],
        )
    label, rest = F.projected_rest(a, shown)
    if not label.startswith("0 "):
        top.add_row(label, "", "", "", rest, "")
    return [
        t,
        top,
        Text(
            f"{p['note']}; lowered with {p['how']}; matmuls at the TensorE {a['matmul_dtype'].upper()} "
            "rate (Neuron's default matmul autocast); see docs/check.md",
            style="dim",
        ),
    ]


def render(result: dict, console: Console | None = None) -> None:
    """Print the whole report."""
    con = console or Console()
    m = result["model"]
    ds = result["manifest"]["device_stack"]
    con.rule(f"[bold]torchneuron check[/bold] {m['name']}")
    con.print(
        f"{m['description']}\nbatch {m['batch_size']} · {m['dtype']} · seed {m['seed']} · "
        f"{m['parameters']:,} parameters · device {result['phase1']['device']} ({ds['device_name']}, "
        f"runtime {ds['runtime']} {ds['runtime_version']}) · reference {result['config']['reference']}"
    )
    if ds.get("emulated"):
        con.print(
            "[yellow]The device is the NeuronCore emulator: timings and throughput are the "
            "emulator's on this host, not Trainium's.[/yellow]"
        )
    for part in (
        phase1_tables(result["phase1"]),
        phase2_tables(result["phase2"], con.width),
        phase3_tables(result["phase3"], result["config"]["reference"]),
        training_tables(result.get("training")),
        cost_table(result["cost"]),
        projection_tables(result.get("projection"), result.get("exact")),
        exact_terminal.per_pass_table(result),
        baseline_table(result.get("baseline")),
    ):
        for x in part:
            con.print(x)
    dev_w = result["phase1"].get("warnings", [])
    if dev_w or result.get("warnings"):
        con.rule("Warnings", style="yellow")  # one section, not between the tables
        for w in dev_w[:10]:
            con.print(Text(f"device warning: {w[:300]}", style="dim"))
        if len(dev_w) > 10:
            con.print(Text(f"... {len(dev_w) - 10} more device warnings in the JSON", style="dim"))
        for w in result.get("warnings", []):
            con.print(Text(f"warning: {w}", style="yellow"))
    if result.get("baseline_saved"):
        con.print(f"baseline saved to [bold]{result['baseline_saved']}[/bold]")
    verdict = result["verdict"]
    body = Group(
        *(
            [
                Text(
                    "all phases passed" + (", no regression" if result.get("baseline") else ""),
                    style="green",
                )
            ]
            if verdict == "pass"
            else [Text(result.get("inconclusive", ""), style="yellow")]
            if verdict == "inconclusive"
            else [Text(f"• {f}", style="red") for f in result["failures"]]
        )
    )
    con.print(
        Panel(
            body,
            title=f"verdict: {verdict.upper()} (exit code {result['exit_code']})",
            border_style={"pass": "green", "inconclusive": "yellow"}.get(verdict, "red"),
            expand=False,
        )
    )


def list_models(console: Console | None = None) -> None:
    """Print the built-in models, one line each (``--list``)."""
    from ..model.loading import builtin_models

    con = console or Console()
    t = Table(
        title="Built-in models (torchneuron check MODEL)", title_justify="left", box=box.SIMPLE
    )
    t.add_column("name", style="cyan")
    t.add_column("description")
    for name, (_, desc) in builtin_models().items():
        t.add_row(name, desc)
    con.print(t)
    con.print(
        "Your own model: torchneuron check path/to/file.py:factory  "
        "(factory() returns (model, example_inputs))"
    )
