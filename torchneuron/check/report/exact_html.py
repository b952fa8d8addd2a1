"""The HTML section of the exact quantities per forward pass (``phases/exact.py``): device
kernels by op, eager and compiled, and the eager projection beside the compiled one."""

from __future__ import annotations

from ..result import CheckResult
from .exact_terminal import concatenation_line
from .html_parts import _e, _kv, _table


def section(result: CheckResult) -> str:
    """``<h2>`` and tables; a line saying why when the trace did not run."""
    ex = result.exact
    head = '<h2 id="per-pass">Per forward pass — what the device ran (exact)</h2>'
    if ex is None or not ex.passed:
        return head + f"<p>{_e((ex.why_not() if ex else None) or 'not traced')}</p>"
    sides = ex.sides()
    by = {s: ex.side(s) for s in sides}
    ops = sorted({op for s in sides for op in by[s]["kernels_by_op"]})
    rows = [[_e(op)] + [str(by[s]["kernels_by_op"].get(op, 0)) for s in sides] for op in ops]
    for label, key in (
        ("compiled graph executions", "graphs"),
        ("CPU fallback calls", "fallback_calls"),
        ("kernel signatures", "signatures"),
    ):
        rows.append([_e(label)] + [str(by[s][key]) for s in sides])
    rows.append(
        [_e("fused segments (kernels held)")]
        + [f"{by[s].get('fused_segments', 0)} ({by[s].get('fused_kernels', 0)})" for s in sides]
    )
    for d, label in (("htod", "host→device"), ("dtoh", "device→host")):
        rows.append(
            [_e(f"{label} copies (bytes)")]
            + [f"{by[s]['copies'][d]['count']} ({by[s]['copies'][d]['bytes']:,})" for s in sides]
        )
    out = head + _table(["device kernels by op"] + sides, rows)
    e = ex.eager or {}
    if e.get("projection"):
        p2, p3 = e["projection"]["trn2"], e["projection"]["trn3"]
        out += _kv(
            [
                (
                    "projected eager pass, Trainium2 (ESTIMATE)",
                    _e(f"{p2['latency_s'] * 1e6:.4g} µs"),
                ),
                (
                    "projected eager pass, Trainium3 (ESTIMATE)",
                    _e(f"{p3['latency_s'] * 1e6:.4g} µs"),
                ),
                (
                    "of which launches (fixed cost each)",
                    _e(f"{p2['launches']} x {p2['launch_us']:g} µs"),
                ),
            ]
        )
    if e.get("concatenation"):
        out += f"<p>{_e(concatenation_line(e['concatenation']))}</p>"
    return out
