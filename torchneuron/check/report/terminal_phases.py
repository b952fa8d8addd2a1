"""The terminal report's tables of phases 1 to 3 (``--details``), and phase 1's failure panel,
which the first screen shows too."""

from __future__ import annotations

from dataclasses import replace

from rich import box
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .. import formatting
from ..result import Phase1Result
from ..result_compile import CompileCheckResult
from ..result_phases import Phase2Result, Phase3Result

_STATUS_STYLE = {"pass": "bold green", "fail": "bold red", "skipped": "yellow"}


def status_text(status: str | None) -> Text:
    """PASS / FAIL / SKIPPED, coloured."""
    s = status or "–"
    return Text(s.upper(), style=_STATUS_STYLE.get(s, ""))


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


def _compile_rows(t: Table, comp: CompileCheckResult) -> None:
    """Phase 1's torch.compile row: graphs, breaks with reasons, compile times, or where it failed."""
    if comp.checked and comp.ok:
        t.add_row(
            "torch.compile",
            f"ok, {formatting.graphs_ran(comp)}, "
            f"{comp.graph_breaks} graph break(s), {comp.recompiles} recompile(s); "
            f"cold compile {formatting.ms(comp.compile_s, 1)}, warm (cache hit) "
            f"{formatting.ms(comp.warm_compile_s, 1)}",
        )
        for b in comp.break_reasons or []:
            t.add_row(
                "  graph break", f"{b['reason']}" + (f" at {b['where']}" if b.get("where") else "")
            )
    elif comp.checked and comp.error:
        e = comp.error
        t.add_row(
            "torch.compile",
            f"FAILED at {e.get('compile_stage') or e.get('stage')}"
            + (f", op {e['op']}" if e.get("op") else "")
            + (f", from {e['raised_at']}" if e.get("raised_at") else ""),
        )


def phase1_tables(p1: Phase1Result) -> list:
    """Renderables of phase 1: its table, the fallback ops, device warnings, the failure."""
    t = _kv_table("Phase 1 — does it run on the device")
    t.add_row("result", status_text(p1.status))
    t.add_row("device", p1.device)
    comp = p1.compile
    t.add_row(
        "mode",
        (
            "eager and compile (torch.compile backend 'neuron'); phases 2 and 3 "
            + ("compiled" if comp.phases_2_3 == "compiled" else "eager")
        )
        if comp.checked
        else f"eager  ({comp.note})",
    )
    _compile_rows(t, comp)
    t.add_row("fallback mode", p1.fallback_mode or "–")
    if p1.cold_latency_s is not None:
        t.add_row(
            "cold latency (" + ("eager " if p1.compile.checked else "") + "first iteration)",
            formatting.ms(p1.cold_latency_s),
        )
    fb = p1.fallback
    t.add_row(
        "CPU fallback ops",
        "none"
        if not fb["ops"]
        else f"{len(fb['ops'])} op(s), {formatting.ms(fb['total_seconds'])} = {formatting.pct(fb['share'])} of device run time",
    )
    t.add_row("64-bit narrowing", formatting.narrowing(p1))
    m = p1.memory
    t.add_row("peak device memory", formatting.peak_memory(m))
    det = p1.determinism
    if det:
        t.add_row(
            "determinism (2 runs)",
            Text("bitwise identical", style="green")
            if det["identical"]
            else Text(
                "outputs differ: "
                + ", ".join(
                    f"{k} max |Δ| {formatting.num(v['max_abs_diff'])}"
                    for k, v in det["outputs"].items()
                    if not v["identical"]
                ),
                style="yellow",
            ),
        )
    if p1.outputs:
        t.add_row(
            "outputs", ", ".join(f"{o['name']} {o['shape']} {o['dtype']}" for o in p1.outputs)
        )
    out: list = [t]
    if fb["ops"]:
        ft = Table(title="CPU fallback ops (phase 1 runs)", title_justify="left", box=box.SIMPLE)
        for c in ("op", "calls", "seconds", "share of device run time"):
            ft.add_column(c, justify="left" if c == "op" else "right")
        for op, v in fb["ops"].items():
            ft.add_row(op, str(v["calls"]), formatting.ms(v["seconds"]), formatting.pct(v["share"]))
        out.append(ft)
    panel = failure_panel(p1)
    if panel:
        out.append(panel)
    return out


def failure_panel(p1: Phase1Result) -> Panel | None:
    """Phase 1's failure: type, failing op, short message, hint, the last frames."""
    e = p1.error
    if not e:
        return None
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
    return Panel(body, title="phase 1 failure", border_style="red")


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


def _phase2_table(p2: Phase2Result, title: str) -> Table:
    """An empty phase 2 table, its caption the rule and tolerance."""
    return Table(
        title=title,
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAVY,
        caption=f"rule: {p2.rule}; tol {p2.tol:g} ({p2.tol_source}), m = {p2.multiplier:g}",
        caption_justify="left",
    )


def _phase2_narrow(p2: Phase2Result, title: str) -> list:
    """Below 130 columns: one row per metric, one column per output."""
    t = _phase2_table(p2, title)
    t.add_column("", style="cyan", no_wrap=True)
    outs = list(p2.outputs.items())
    for name, _ in outs:
        t.add_column(name, justify="right", overflow="fold")
    rows = [
        ("shape", lambda o: str(o.get("shape", ""))),
        ("max abs", lambda o: formatting.num(o.get("max_abs"))),
        ("max rel", lambda o: formatting.num(o.get("max_rel"))),
        ("cosine", lambda o: "–" if o.get("cosine") is None else f"{o['cosine']:.7f}"),
        ("RMSE device vs fp64", lambda o: formatting.num(o.get("rmse_device_fp64"))),
        ("RMSE reference vs fp64", lambda o: formatting.num(o.get("rmse_reference_fp64"))),
        ("RMSE bound", lambda o: formatting.num(o.get("rmse_bound"))),
        ("decided by", lambda o: o.get("decided_by", "")),
    ]
    for label, fn in rows:
        t.add_row(label, *[fn(o) for _, o in outs])
    t.add_row("result", *[status_text("pass" if o.get("passed") else "fail") for _, o in outs])
    return [t]


def phase2_tables(p2: Phase2Result, width: int = 200, label: str = "") -> list:
    """The accuracy table: one row per output, or one column per output below 130 columns;
    the compiled model's (``--mode both``) in a second table."""
    if p2.compiled and not label:
        c = p2.compiled
        return phase2_tables(replace(p2, compiled=None), width, "") + phase2_tables(
            replace(p2, status=c["status"], outputs=c["outputs"], compiled=None),
            width,
            " (compiled, backend neuron)",
        )
    title = f"Phase 2{label} — is it accurate  (reference {p2.reference_device}, golden fp64 on cpu, {p2.dtype})"
    if p2.status == "skipped":
        t = _kv_table(title)
        t.add_row("result", status_text("skipped"))
        t.add_row("reason", p2.reason or "")
        return [t]
    if width < 130:
        return _phase2_narrow(p2, title)
    t = _phase2_table(p2, title)
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
    for name, o in p2.outputs.items():
        t.add_row(
            name,
            str(o.get("shape", "")),
            formatting.num(o.get("max_abs")),
            formatting.num(o.get("max_rel")),
            "–" if o.get("cosine") is None else f"{o['cosine']:.7f}",
            formatting.num(o.get("rmse_device_fp64")),
            formatting.num(o.get("rmse_reference_fp64")),
            formatting.num(o.get("rmse_bound")),
            o.get("decided_by", ""),
            status_text("pass" if o.get("passed") else "fail"),
        )
    return [t]


def _warmup(x: dict | None) -> str:
    if not x:
        return "–"
    w = x["warmup"]
    cv = "–" if w["final_cv"] is None else f"{w['final_cv']:.3f}"
    return f"{w['iterations']} it, " + ("stable" if w["stable"] else "NOT stable") + f" (CV {cv})"


def _ci(x: dict | None) -> str:
    if not x or not x.get("median_ci95_s"):
        return "–"
    return f"{formatting.ms(x['median_ci95_s'][0])} – {formatting.ms(x['median_ci95_s'][1])}"


def phase3_tables(p3: Phase3Result, reference: str) -> list:
    """The performance table: device, reference and their ratio."""
    title = "Phase 3 — stable performance after warm-up"
    if p3.status != "pass" and not p3.device:
        t = _kv_table(title)
        t.add_row("result", status_text(p3.status))
        t.add_row("reason", p3.reason or "")
        return [t]
    d, r, ratio = p3.device, p3.reference, p3.ratio or {}
    t = Table(
        title=title,
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAVY,
        caption=f"{p3.timing}; {p3.samples_per_iteration} samples per iteration; CI: {p3.ci_method}",
        caption_justify="left",
    )
    t.add_column("", style="cyan")
    t.add_column(f"device ({d['device']})", justify="right")
    t.add_column(f"reference ({reference})", justify="right")
    t.add_column("device / reference", justify="right")
    c = p3.compiled if (p3.compiled or {}).get("p50_s") else None
    if c:  # --mode both: the compiled model beside eager
        t.add_column("compiled (backend neuron)", justify="right")
        t.add_column("compiled / eager", justify="right")
        _row = t.add_row

        def add_row(label, *cells, key=None, cx=None):
            cx = cx or (
                formatting.ms(c.get(key)) if key else "",
                formatting.ratio(c[key] / d[key]) if key and d.get(key) else "",
            )
            _row(label, *cells, *cx)
    else:

        def add_row(label, *cells, key=None, cx=None):
            t.add_row(label, *cells)

    g = lambda k: r.get(k) if r else None
    add_row(
        formatting.cold_label(p3),
        formatting.ms(d.get("cold_s")),
        formatting.ms(g("cold_s")),
        "",
        key="cold_s",
    )
    add_row("warm-up", _warmup(d), _warmup(r), "", cx=(_warmup(c), ""))
    add_row(
        "measured iterations",
        str(d["iterations"]),
        str(g("iterations") or "–"),
        "",
        cx=(str(c["iterations"]) if c else "", ""),
    )
    for k, label in (("p50_s", "p50 latency"), ("p90_s", "p90 latency"), ("p99_s", "p99 latency")):
        rat = formatting.ratio(d[k] / r[k]) if r and r.get(k) else ""
        add_row(label, formatting.ms(d[k]), formatting.ms(g(k)), rat, key=k)
    add_row("95% CI of the median", _ci(d), _ci(r), "")
    add_row(
        "throughput (samples/s)",
        formatting.num(d["throughput_samples_per_s"]),
        formatting.num(g("throughput_samples_per_s")),
        formatting.ratio(ratio.get("throughput_device_over_reference")),
    )
    if c:
        t.add_row(
            "compiled throughput (samples/s)",
            "",
            "",
            "",
            formatting.num(c["throughput_samples_per_s"]),
            formatting.ratio(c["throughput_samples_per_s"] / d["throughput_samples_per_s"]),
        )
    if d.get("fallback_share") is not None:
        t.add_row("CPU fallback share (steady state)", formatting.pct(d["fallback_share"]), "", "")
    return [t]
