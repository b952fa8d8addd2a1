"""Number formatting shared by the terminal and HTML reports."""

from __future__ import annotations

from .result import Phase1Result
from .result_compile import CompileCheckResult
from .result_phases import Phase3Result


def ms(seconds: float | None, digits: int = 3) -> str:
    """Seconds shown as milliseconds."""
    if seconds is None:
        return "–"
    return f"{seconds * 1e3:.{digits}f} ms"


def nbytes(n: float | None) -> str:
    """Bytes in binary units (KiB = 1024 B)."""
    if n is None:
        return "–"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def num(x: float | None, digits: int = 3) -> str:
    """Short general number: '–' for None, 3 significant digits in e-notation when small."""
    if x is None:
        return "–"
    if x == 0:
        return "0"
    if abs(x) < 1e-3 or abs(x) >= 1e9:
        return f"{x:.{digits - 1}e}"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def pct(x: float | None) -> str:
    """A fraction as a percentage."""
    return "–" if x is None else f"{x:.1%}"


def signed_pct(x: float | None) -> str:
    """A relative change as a signed percentage."""
    return "–" if x is None else f"{x:+.1%}"


def usd(x: float | None) -> str:
    """US dollars."""
    if x is None:
        return "–"
    if x == float("inf"):
        return "∞"
    if 0 < abs(x) < 0.01:  # a few significant figures, not $0.0000
        return f"${x:.3g}"
    return f"${x:,.4f}" if x < 1 else f"${x:,.2f}"


def ratio(x: float | None) -> str:
    """A ratio, e.g. 1.25×."""
    if x is None:
        return "–"
    return f"{x:.2f}×" if x >= 0.1 else f"{x:.2g}×"


def peak_memory(m: dict) -> str:
    """Phase 1's ``memory`` in one line: the compared peak (in program order where measured),
    the run-ahead peak, reserved, weights and capacity."""
    ahead = m.get("peak_allocated_run_ahead_bytes")
    basis = (
        f" in program order ({nbytes(ahead)} with the host running ahead)"
        if m.get("peak_allocated_basis") == "in order"
        else ""
    )
    line = (
        f"allocated {nbytes(m['peak_allocated_bytes'])}{basis}, reserved {nbytes(m['peak_reserved_bytes'])}, "
        f"weights {nbytes(m.get('weights_bytes'))}, capacity {nbytes(m['capacity_bytes'])}"
    )
    c = m.get("compiled_peak_detail")
    if not c:
        return line
    if c.get("peak_allocated_bytes") is None:
        return f"eager: {line}; compiled: not measured ({c.get('note')})"
    return (
        f"eager: {line}; compiled: {nbytes(c['peak_allocated_bytes'])} (a warm call's rise "
        f"{nbytes(c['rise_bytes'])} + its graphs' temporaries {nbytes(c['temp_bytes'])})"
    )


def graphs_ran(comp: CompileCheckResult | dict) -> str:
    """Graphs of phase 1's compile entry (or a baseline's dict): ``"2 graph(s)"`` when all ran
    compiled (or a baseline saved before ``fallback_graphs`` was recorded), else ``"1 graph(s) ran
    compiled (1 fell back to eager)"``, ``"0 graph(s) ran compiled"``."""
    if isinstance(comp, dict):
        n, fb = comp.get("compiled_graphs"), comp.get("fallback_graphs")
    else:
        n, fb = comp.compiled_graphs, comp.fallback_graphs
    fb = len(fb) if isinstance(fb, list) else fb
    if n is None or (not fb and n):
        return f"{n} graph(s)"
    return f"{n - (fb or 0)} graph(s) ran compiled" + (f" ({fb} fell back to eager)" if fb else "")


def compile_cells(cc: dict) -> tuple[str, str]:
    """The baseline table's "compiles" cells (baseline, current) from ``baseline.compile_success``."""
    side = (
        [
            graphs_ran(
                {
                    "compiled_graphs": cc["compiled_graphs"][k],
                    "fallback_graphs": cc["fallback_graphs"][k],
                }
            )
            for k in ("baseline", "current")
        ]
        if "fallback_graphs" in cc
        else [f"{cc['compiled_graphs'][k]} graph(s)" for k in ("baseline", "current")]
    )
    cur = (
        f"yes, {side[1]}"
        if cc["current_ok"]
        else f"NO: {side[1]}"
        if cc.get("current_not_compiled")
        else "NO: compile failed"
    )
    return f"yes, {side[0]}", cur


def cold_label(p3: Phase3Result) -> str:
    """Phase 3's cold row: under ``--mode compile`` the compiled model's first call, compile included."""
    return (
        "cold (first call, compile included)"
        if (p3.cold_basis or "").startswith("compiled")
        else "cold (first iteration)"
    )


def peak_label(mem: dict) -> str:
    """The baseline comparison's memory row: ``(compiled)`` when the compiled model's peaks are compared."""
    return "peak memory (allocated)" + (
        " (compiled)" if (mem.get("basis") or {}).get("current") == "compiled" else ""
    )


def projected_instance(x: dict) -> str:
    """A projection's instance, e.g. ``trn2.48xlarge (128 cores)``, marked when assumed."""
    return (
        f"{x['instance']} ({x['cores_per_instance']} cores"
        + (", assumed" if x.get("instance_assumed") else "")
        + ")"
    )


def projected_serial(x: dict) -> str:
    """A projection's serial HBM row (weights and inputs read, outputs written): time, share, bytes."""
    share = x.get("weights_and_inputs_share")
    return (
        f"{x['weights_and_inputs_s'] * 1e6:.4g} µs"
        + (f" ({share:.0%} of the pass)" if share is not None else "")
        + f", {nbytes(x['weights_and_inputs_bytes'] + x.get('outputs_bytes', 0))}"
    )


def projected_top(x: dict, n: int) -> list:
    """The first ``n`` top ops, and the serial HBM row and the fixed cost per execution
    when they rank lower."""
    rows = x["top_ops"][:n]
    return rows + [r for r in x["top_ops"][n:] if r["engine"] in ("dma", "runtime")]


def projected_rest(x: dict, shown: list) -> tuple[str, str]:
    """The ops not shown in a projection's top table: ``("N other operations", "T µs")``, so
    the table's times add up to the pass."""
    # + the serial HBM row, + the fixed cost per execution (a projection saved before it: none)
    n = x["operations"] + 1 + any(r["engine"] == "runtime" for r in x["top_ops"]) - len(shown)
    rest = x["latency_s_per_core"] - sum(r["time_s"] for r in shown)
    return f"{n} other operations", f"{max(rest, 0.0) * 1e6:.3g} µs"


def projected_cost(x: dict) -> str:
    """A projection's USD per million samples, or how to give the price it lacks."""
    if not x["usd_per_million"]:
        return (
            f"not priced: no verified {x['instance']} price in prices.csv; give yours with "
            f"--instance {x['instance']} --price-per-hour USD"
        )
    return usd(x["usd_per_million"]) + (
        " (your price)" if x.get("price_source") == "--price-per-hour" else ""
    )


def narrowing(p1: Phase1Result) -> str:
    """Phase 1's 64-bit narrowing: the eager runs' ops, then the compiled runs' (calls each)."""
    eager = ", ".join(f"{k} ×{v}" for k, v in p1.narrowing.items())
    comp = ", ".join(f"{k} ×{v}" for k, v in (p1.compile.narrowing or {}).items())
    return "; ".join(x for x in (eager, f"compiled: {comp}" if comp else "") if x) or "none"


def training_baseline_rows(tr: dict) -> list[tuple[list[str], str]]:
    """The baseline comparison's training rows (``baseline.training``, when compared): the peak
    with the optimizer's state (``pass``/``fail``) and the device step p50 (``info``: shown, not
    decided). Each row: ``([check, baseline, current, change, threshold], result)``."""
    if "regressed" not in tr or "note" in tr:
        return []
    # a result written before the threshold was kept: its limit, the same rule's figure
    th = (
        f"+{tr['threshold']:.0%} and +{nbytes(tr['min_increase_bytes'])}"
        if "threshold" in tr
        else f"above {nbytes(tr.get('limit_bytes'))}"
    )
    rows = [
        (
            [
                "training peak memory (with optimizer state)",
                nbytes(tr["baseline_peak_allocated_bytes"]),
                nbytes(tr["current_peak_allocated_bytes"]),
                signed_pct(tr["change"]),
                th,
            ],
            "fail" if tr["regressed"] else "pass",
        )
    ]
    st = tr.get("step_time") or {}
    b, c = st.get("baseline_device_p50_s"), st.get("current_device_p50_s")
    if b and c:
        rows.append(
            (
                [
                    "training device step p50 (wall, not decided)",
                    ms(b),
                    ms(c),
                    signed_pct(c / b - 1),
                    "",
                ],
                "info",
            )
        )
    return rows


def confirmation_row(name: str, st: dict) -> list[str] | None:
    """A latency statistic re-measured in fresh processes (``st["confirmation"]``): the cells
    ``[check, baseline, current, change, threshold]`` of the row under the statistic's, with
    the first process's interval, each fresh process's ratio and their median. None when it
    was not."""
    c = st.get("confirmation")
    if not c:
        return None
    fp = c["first_process"]["ci"]
    fresh = ", ".join(f"x{r:.3f}" for r in c["ratios"][1:])
    return [
        f"  {name.replace('_', ' ')}: re-measured in {len(c['ratios']) - 1} fresh process(es)",
        "",
        "",
        f"this process x{fp['ratio']:.3f} [{fp['low']:.3f}, {fp['high']:.3f}]; fresh {fresh}; "
        f"median x{c['median'] / st['baseline_value']:.3f}",
        "",
    ]
