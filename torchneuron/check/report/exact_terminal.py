"""Terminal rows of the exact quantities (``phases/exact.py``) and their gates
(``baseline/exact.py``)."""

from __future__ import annotations

from rich import box
from rich.table import Table
from rich.text import Text

from ..result import CheckResult
from . import summary


def _us(s: float | None) -> str:
    return "" if s is None else f"{s * 1e6:.4g} µs"


def _status(r: dict) -> Text:
    if r["regressed"]:
        return Text("FAIL", style="bold red")
    return Text("pass" + (" (changed)" if r["changed"] else ""), style="green")


def per_pass_table(result: CheckResult) -> list:
    """What the device ran per forward pass, eager and compiled, with the eager projection
    beside the compiled one (``--projection``)."""
    ex = result.exact
    if ex is None or not ex.passed:
        return [Text(f"Per pass: {ex.why_not()}", style="yellow")] if ex else []
    t = Table(
        title="Per forward pass: what the device ran (exact: equal in every run of this build)",
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAVY,
    )
    t.add_column("", style="cyan", no_wrap=True)
    sides = ex.sides()
    for s in sides:
        t.add_column(s, justify="right")
    rows = (
        ("device kernels", lambda x: str(x["kernels"])),
        ("compiled graph executions", lambda x: str(x["graphs"])),
        ("fused segments (kernels held)", _fused),
        ("kernel signatures", lambda x: str(x["signatures"])),
        ("CPU fallback calls", lambda x: str(x["fallback_calls"])),
        ("host→device copies (bytes)", lambda x: _copies(x["copies"]["htod"])),
        ("device→host copies (bytes)", lambda x: _copies(x["copies"]["dtoh"])),
    )
    for label, fn in rows:
        t.add_row(label, *(fn(ex.side(s)) for s in sides))
    out: list = [t]
    e = ex.eager
    if e and e.get("projection"):
        p2, p3 = e["projection"]["trn2"], e["projection"]["trn3"]
        c2 = summary.compiled_pass_s(result)
        extra, _ = summary.extra_launches(result.exact)
        comp = (
            f"; compiled Trainium2 (StableHLO, one execution's fixed cost included"
            f"{f', + {extra} more graph launch(es)' if extra else ''}): {_us(c2)}"
            if c2 is not None
            else ("; compiled: run with --projection" if ex.compiled else "")
        )
        out.append(
            Text(
                f"projected eager pass (ESTIMATE): Trainium2 {_us(p2['latency_s'])}, Trainium3 "
                f"{_us(p3['latency_s'])} ({p2['launches']} launches x {p2['launch_us']:g} µs "
                f"+ roofline {_us(p2['roofline_s'])}){comp}",
                style="dim",
            )
        )
    if e and e.get("concatenation"):
        out.append(Text(concatenation_line(e["concatenation"]), style="dim"))
    tr = (result.training.exact if result.training else None) or {}
    for side, x in tr.items():
        if x:
            out.append(
                Text(
                    f"training step ({side}): {x['kernels']} kernels, {x['graphs']} graph "
                    f"executions, {x['fallback_calls']} CPU fallback calls",
                    style="dim",
                )
            )
    if e and e.get("kernels_by_op"):
        top = sorted(e["kernels_by_op"].items(), key=lambda kv: -kv[1])[:8]
        out.append(Text("eager kernels: " + ", ".join(f"{k} x{v}" for k, v in top), style="dim"))
    return out


def _fused(x: dict) -> str:
    return f"{x.get('fused_segments', 0)} ({x.get('fused_kernels', 0)})"


def concatenation_line(c: dict) -> str:
    """Adaptive eager execution's counters (``phases/exact.concatenation``) in a line."""
    t = c["check"]
    return (
        f"adaptive eager execution, eager pass: {c['segments']} fused segment(s) of "
        f"{c['ops_fused']} ops, {c['ops_unfused']} ops unfused, {c['cache_hits']} cache hit(s), "
        f"{c['cache_misses']} miss(es); whole check: {t['compiles']} compile(s) in "
        f"{t['compile_s']:.2f} s, {t['unfusable']} refused (torchneuron.compiler.fused.refusals())"
    )


def _copies(c: dict) -> str:
    return f"{c['count']} ({c['bytes']:,})"


def baseline_rows(t: Table, ex: dict | None) -> list:
    """The exact gates' rows in the baseline table; returns notes to print after it."""
    if not ex:
        return []
    for r in ex["rows"]:
        sec = r["unit"] == "seconds"
        fmt = _us if sec else str
        change = (
            f"{r['current'] / r['baseline'] - 1:+.1%}"
            if r["baseline"]
            else ("" if r["current"] == r["baseline"] else f"+{r['current']}")
        )
        th = (
            f"+{r['threshold']:.0%}"
            if r["unit"] in ("fraction", "seconds")
            else f"+{r['threshold']:g}"
        )
        t.add_row(
            r["quantity"],
            fmt(r["baseline"]),
            fmt(r["current"]),
            change,
            th,
            _status(r),
        )
    notes = [Text(f"exact gates: {n}", style="yellow") for n in ex["notes"]]
    for r in ex["rows"]:
        if r["changed"] and r["ops"]:
            notes.append(Text(f"{r['quantity']} changed: {', '.join(r['ops'])}", style="dim"))
    return notes
