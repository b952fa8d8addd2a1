"""The report's first screen as plain data, shared by the terminal and the HTML report: the
verdict, one line per phase, the actionable findings and where the details are. It answers
the three questions first: does it run, is it accurate, how fast will it be on Trainium."""

from __future__ import annotations

from .. import formatting
from ..result import CheckResult, Phase1Result
from ..result_baseline import BaselineComparison
from ..result_compile import CompileCheckResult
from ..result_exact import ExactResult
from ..result_training import TrainingResult

EXIT_CODES = "exit codes: 0 pass · 1 fail or regression · 2 bad usage · 3 inconclusive (--gate-host-latency only)"


def us(s: float | None) -> str:
    """Seconds as µs below 1 ms, else ms: the projected figures span both."""
    if s is None:
        return "–"
    return f"{s * 1e6:.4g} µs" if s < 1e-3 else f"{s * 1e3:.4g} ms"


def verdict(result: CheckResult) -> dict:
    """``{"label", "status", "meaning", "failures"}``: REGRESSION when every failure is a
    regression against the baseline, so a reader tells "it broke" from "it got worse"."""
    v, code, fails = result.verdict, result.exit_code, list(result.failures)
    if v == "pass":
        meaning = "every phase passed" + (
            ", no regression against the baseline" if result.baseline else ""
        )
        return {"label": "PASS", "status": "pass", "meaning": meaning, "failures": []}
    if v == "inconclusive":
        return {
            "label": "INCONCLUSIVE",
            "status": "inconclusive",
            "meaning": "the host was too noisy to decide host latency (--gate-host-latency)",
            "failures": [result.inconclusive or ""],
        }
    regressions = [f for f in fails if f.startswith("regression:")]
    label = "REGRESSION" if fails and len(regressions) == len(fails) else "FAIL"
    parts = []
    if len(regressions) < len(fails):
        parts.append(f"{len(fails) - len(regressions)} failure(s)")
    if regressions:
        parts.append(f"{len(regressions)} regression(s) against the baseline")
    meaning = " and ".join(parts) if parts else f"exit code {code}"
    return {"label": label, "status": "fail", "meaning": meaning, "failures": fails}


def extra_launches(exact: ExactResult | None) -> tuple[int, float]:
    """(graph executions per pass beyond the first, the launch cost in µs) of the exact
    quantities (``result.exact``): the StableHLO projection includes one execution's fixed
    cost; a pass split into n graphs pays n - 1 more (the eager projection's cost per launch)."""
    if exact is None:
        return 0, 0.0
    ep = exact.eager_projection() or {}
    graphs = (exact.compiled or {}).get("graphs") or 1
    return max(graphs - 1, 0), ep.get("launch_us", 0.0)


def compiled_pass_s(result: CheckResult, core: str = "trn2") -> float | None:
    """The compiled pass on Trainium (seconds): the StableHLO projection (one execution's
    fixed cost included) plus the launches of any further graphs, as the per-pass table
    shows it. None without a projection."""
    proj = result.projection
    if proj is None or proj.status != "pass":
        return None
    n, us = extra_launches(result.exact)
    return proj.core(core)["latency_s_per_core"] + n * us * 1e-6


def phase_lines(result: CheckResult) -> list[tuple[str, str, list[str]]]:
    """``[(phase, status, [text, ...])]``: run, accuracy, performance, then training,
    baseline and budget where they apply. Status: pass, fail, skipped, regression, saved."""
    lines = [_run_line(result.phase1), _accuracy_line(result), _performance_line(result)]
    tr = result.training
    if tr is not None and tr.status != "skipped":
        lines.append(_training_line(tr))
    if result.baseline:
        lines.append(_baseline_line(result.baseline))
    if result.baseline_saved:
        lines.append(("baseline", "saved", [f"saved to {result.baseline_saved}"]))
    cost = result.cost
    if cost is not None and cost.budget_usd_per_million is not None:
        over = cost.over_budget
        lines.append(
            (
                "budget",
                "fail" if over else "pass",
                [
                    f"{formatting.usd((cost.device or {}).get('usd_per_million'))} per 1M samples "
                    f"at the emulator's throughput: {'EXCEEDS' if over else 'within'} "
                    f"{formatting.usd(cost.budget_usd_per_million)}"
                ],
            )
        )
    return lines


def _run_line(p1: Phase1Result) -> tuple[str, str, list[str]]:
    e = p1.error
    if p1.status == "fail" and e:
        return (
            "run",
            "fail",
            [
                f"{e['type']} during {e.get('compile_stage') or e['stage']}"
                + (f" in {e['op']}" if e.get("op") else "")
                + f": {e.get('short_message') or e.get('message', '')[:200]}"
            ],
        )
    comp = p1.compile
    if comp.checked and comp.ok:
        mode = (
            f"eager and compiled ({formatting.graphs_ran(comp)}, {comp.graph_breaks} graph "
            f"break(s), {comp.recompiles} recompile(s))"
        )
    else:
        mode = "eager" + (f" ({comp.note})" if comp.note else "")
    fb = (p1.fallback or {}).get("ops") or {}
    mem = (p1.memory or {}).get("peak_allocated_bytes")
    return (
        "run",
        p1.status,
        [
            f"on {p1.device}: {mode}",
            f"{len(fb)} CPU fallback op(s) · peak device memory {formatting.nbytes(mem)}",
        ],
    )


def _accuracy_line(result: CheckResult) -> tuple[str, str, list[str]]:
    p2 = result.phase2
    if p2.status == "skipped":
        return ("accuracy", "skipped", [p2.reason or ""])
    sides = [("eager", p2.outputs)] + (
        [("compiled", p2.compiled.get("outputs"))] if p2.compiled else []
    )
    if _compiled_only(result):  # --mode compile: phases 2 and 3 are the compiled model's
        sides = [("compiled", p2.outputs)]
    texts, status = [], "pass"
    for name, outs in sides:
        outs = outs or {}
        bad = [k for k, v in outs.items() if not v.get("passed")]
        if bad:
            status = "fail"
            texts.append(f"{name}: {len(bad)} of {len(outs)} output(s) off: {', '.join(bad[:5])}")
        else:
            texts.append(f"{name}: {len(outs)} output(s) within the benchmark rule")
    texts[-1] += (
        f" (vs {p2.reference_device} and fp64, {p2.dtype}, tol {p2.tol:g})"
        if p2.tol is not None
        else ""
    )
    return ("accuracy", status if p2.status != "fail" else "fail", ["; ".join(texts)])


def _compiled_only(result: CheckResult) -> bool:
    return result.phase1.compile.phases_2_3 == "compiled"


def _performance_line(result: CheckResult) -> tuple[str, str, list[str]]:
    p3, ex = result.phase3, result.exact
    texts = []
    ep = ex.eager_projection() if ex else None
    cp = compiled_pass_s(result)
    if ep or cp is not None:
        parts = []
        if ep:
            n = ep["launches"]
            parts.append(f"eager {us(ep['latency_s'])} ({n} launch{'es' if n != 1 else ''})")
        if cp is not None:
            parts.append(f"compiled {us(cp)}")
        elif ex.compiled and ep:
            parts.append("compiled: run with --projection")
        texts.append("projected Trainium2 per pass (ESTIMATE): " + ", ".join(parts))
    elif ex is not None and ex.status and not ex.passed:
        texts.append(f"no projection: {ex.why_not()}")
    d = p3.device or {}
    if d.get("p50_s"):
        host = f"eager {formatting.ms(d['p50_s'])}"
        if _compiled_only(result):
            host = f"compiled {formatting.ms(d['p50_s'])}"
        c = p3.compiled or {}
        if c.get("p50_s"):
            host += f", compiled {formatting.ms(c['p50_s'])}"
        texts.append(f"emulator host p50 (this host, not Trainium): {host}")
    if p3.status != "pass":
        texts.append(p3.reason or "")
    return ("performance", p3.status, texts)


def _training_line(tr: TrainingResult) -> tuple[str, str, list[str]]:
    if tr.per_step is None:
        return ("training", tr.status, [tr.reason or tr.note or ""])
    fp = tr.final_params or {}
    text = (
        f"{tr.steps} {tr.optimizer} steps: loss, grad norms and "
        f"{fp.get('compared', 0) - len(fp.get('failed', []))}/{fp.get('compared', 0)} "
        "parameter updates vs the reference and fp64"
    )
    c = tr.compiled
    extra = []
    if c:
        extra.append(f"compiled: {c.status.upper()}" + _why(c))
    if tr.status == "fail":
        extra.append(tr.reason or "")
    return ("training", tr.status, [text] + [x for x in extra if x])


def _why(c: TrainingResult) -> str:
    return f" ({c.reason})" if c.status == "fail" and c.reason else ""


def _baseline_line(b: BaselineComparison) -> tuple[str, str, list[str]]:
    where = f"{b.path} (saved {b.created_utc or '?'})"
    if b.status == "skipped" and not b.regressions:
        return ("baseline", "skipped", [f"{where}: {b.reason}"])
    regs = b.regressions or []
    rows = (b.exact or {}).get("rows") or []
    if regs:
        text = f"{len(regs)} regression(s) against {where}"
    else:
        text = f"no regression against {where}: {len(rows)} exact gate(s) + accuracy, memory"
    out = [text]
    for n in (b.exact or {}).get("notes") or []:
        out.append(n)
    # gates that could not be compared: the reader may need to save the baseline again
    cc = (b.compiled or {}).get("compile") or {}
    for what, note in (
        ("compile", cc.get("note")),
        ("memory", (b.memory or {}).get("note")),
    ):
        if note:
            out.append(f"{what}: {note}")
    return ("baseline", "regression" if regs else "pass", out)


FALLBACK_HINT = (
    "each call copies its tensors to the host and back: a native kernel or another op avoids "
    "it; --fallback error fails on the first one, with its traceback"
)
NARROWING_HINT = (
    "float64/int64 math runs as 32-bit on the device (the result keeps its dtype): cast to "
    "float32/int32 where the range allows; TORCHNEURON_NARROW_64BIT=0 keeps full width"
)


def findings(result: CheckResult) -> list[tuple[str, str, str | None]]:
    """``[(what, text, hint or None)]``: what a team acts on before moving to Trainium. The
    quantities that are zero are gathered into one "clean" line."""
    p1, ex = result.phase1, result.exact
    out, clean = [], []
    fb = (p1.fallback or {}).get("ops") or {}
    if fb:
        ops = sorted(fb.items(), key=lambda kv: -kv[1]["seconds"])
        text = ", ".join(
            f"{op} ({v['calls']} calls, {formatting.pct(v['share'])} of device run time)"
            for op, v in ops[:6]
        ) + (f" and {len(ops) - 6} more" if len(ops) > 6 else "")
        out.append(("CPU fallback", text, FALLBACK_HINT))
    elif p1.status == "pass":
        clean.append("no CPU fallback")
    narrow = formatting.narrowing(p1)
    if narrow != "none":
        out.append(("64-bit narrowing", narrow, NARROWING_HINT))
    comp = p1.compile
    if comp.checked and comp.ok:
        out += _compile_findings(comp, clean)
    out += _signature_findings(ex, clean)
    out += _fusion_findings(ex)
    if clean:
        out.append(("clean", ", ".join(clean), None))
    out += _projection_findings(result)
    out += _baseline_findings(result.baseline)
    return out


def _compile_findings(comp: CompileCheckResult, clean: list) -> list:
    out = []
    if comp.graph_breaks:
        reasons = "; ".join(
            b["reason"] + (f" at {b['where']}" if b.get("where") else "")
            for b in (comp.break_reasons or [])[:3]
        )
        out.append(
            (
                "graph breaks",
                f"{comp.graph_breaks}" + (f": {reasons}" if reasons else ""),
                "each break splits the model into more graphs, each a launch on Trainium",
            )
        )
    else:
        clean.append("no graph break")
    fell = comp.fallback_graphs
    if fell:  # ran by the backend op by op: not what Trainium would run compiled
        n = len(fell) if isinstance(fell, list) else fell
        out.append(
            (
                "graphs run eagerly",
                f"{n} of {comp.compiled_graphs} graph(s) fell back to eager",
                "the backend could not compile them (phase1.compile.fallback_graphs in the JSON "
                "says why); on Trainium they would run op by op",
            )
        )
    if comp.recompiles:
        out.append(
            (
                "recompiles",
                f"{comp.recompiles} on a repeated call",
                "a guard failed between calls (a shape, a Python value): on Trainium each "
                "recompile is a Neuron compile",
            )
        )
    else:
        clean.append("no recompile")
    return out


def _signature_findings(ex: ExactResult | None, clean: list) -> list:
    if ex is None or not ex.passed:
        return []
    new = {s: (ex.side(s) or {}).get("new_signatures") for s in ("eager", "compiled")}
    shown = {s: v for s, v in new.items() if v}
    if not shown:
        if any(v is not None for v in new.values()):
            clean.append("no new kernel signature after warm-up")
        return []
    text = "; ".join(f"{s}: {len(v)} ({', '.join(map(str, v[:3]))})" for s, v in shown.items())
    return [
        (
            "new kernel signatures after warm-up",
            text,
            "shapes change between passes: on Trainium each new signature compiles a kernel "
            "inside the loop; pad or bucket the shapes",
        )
    ]


def _fusion_findings(ex: ExactResult | None) -> list:
    c = (ex.eager or {}).get("concatenation") if ex is not None and ex.passed else None
    if not c:
        return []
    t = c["check"]
    text = (
        f"each eager pass: {c['segments']} fused segment(s) of {c['ops_fused']} ops, "
        f"{c['ops_unfused']} ops unfused; the check compiled {t['compiles']} segment(s) in "
        f"{t['compile_s']:.2f} s"
    )
    hint = None
    if t["unfusable"]:
        text += f", {t['unfusable']} refused"
        hint = "refused segments run op by op: torchneuron.compiler.fused.refusals() says why"
    return [("adaptive eager execution", text, hint)]


def _projection_findings(result: CheckResult) -> list:
    proj = result.projection
    ep = result.exact.eager_projection() if result.exact else None
    if result.phase1.status != "pass":
        return []  # nothing ran to project
    if proj is None or proj.status != "pass":
        asked = (result.config or {}).get("projection")
        why = (
            f"not projected: {proj.reason if proj else None}"
            if asked
            else "run with --projection for throughput and cost"
        )
        if ep:
            return [("projected Trainium2", f"eager pass {us(ep['latency_s'])}; {why}", None)]
        return [("projected Trainium2", why, None)]
    t = proj.trn2
    cp = compiled_pass_s(result)
    text = (
        f"compiled pass {us(cp)} · {formatting.num(t['throughput_per_core'])} samples/s per core · "
        f"{formatting.num(t['throughput_per_instance'])} samples/s per {formatting.projected_instance(t)} · "
        + (
            f"{formatting.projected_cost(t)} per 1M samples"
            if t.get("usd_per_million")
            else f"cost {formatting.projected_cost(t)}"
        )
    )
    if ep and cp:
        text += f" · eager pays ×{ep['latency_s'] / cp:.1f} the compiled pass"
    return [("projected Trainium2 (ESTIMATE)", text, None)]


def _baseline_findings(b: BaselineComparison | None) -> list:
    """Changes against the baseline that did not fail a gate: the failing ones are in the
    verdict already."""
    if b is None:
        return []
    out = []
    for r in (b.exact or {}).get("rows") or []:
        if r["changed"] and not r["regressed"] and r["ops"]:
            out.append((f"changed: {r['quantity']}", ", ".join(r["ops"]), None))
    new_fb = (b.changes or {}).get("new_fallback_ops")
    if new_fb:
        out.append(("new CPU fallback ops since the baseline", ", ".join(new_fb), None))
    return out


def details_pointer(result: CheckResult, details: bool) -> list[str]:
    """Where the rest is: the tables (``--details``), the HTML page and the JSON."""
    cfg = result.config or {}
    tables = (
        "the full tables are below"
        if details
        else "--details prints the full tables (phases, cost, projection, per-pass trace, baseline)"
    )
    html = cfg.get("html_path")
    js = cfg.get("json_path")
    return [
        tables,
        f"HTML report: {html}" if html else "HTML report: --html FILE",
        f"JSON: {js}" if js else "JSON (the whole result): --json FILE",
    ]
