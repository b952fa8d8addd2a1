"""The default performance gates: a run's exact quantities (``phases/exact.py``) against its
baseline's. Exact, so an unchanged build reads equal values and never fails or stalls:

- projected Trainium time of the eager pass (``projected_time``, a fraction; Trn2), and of
  the compiled graph where both runs had ``--projection``;
- device launches per pass and per training step, eager and compiled (``kernels``, a fraction);
- CPU fallback calls per pass and per training step, eager and compiled (``fallbacks``, calls);
- graph breaks and recompiles of the compile check (``graph_breaks``, ``recompiles``: counts);
- kernel signatures a pass (a training step) ran that the one before did not: shapes that
  change between passes compile new kernels in the loop on Trainium (``new_signatures``).

A quantity regresses when it exceeds the baseline's by more than its threshold; the message
names it and the ops whose counts changed ("aten::addmm x12 -> x36"). A quantity the
baseline lacks (saved by an earlier version) is not compared, and the report says to save
the baseline again; so is a projected time whose fixed costs (``projection/overheads.py``:
the cost per execution or launch, the roofline factor) differ from the baseline's. Host<->device copies and kernel signatures are listed, not gated.
"""

from __future__ import annotations

from ..result import CheckResult
from ..result_compile import CompileCheckResult
from ..result_exact import ExactResult
from ..result_projection import ProjectionResult


def op_diff(base: dict, cur: dict, limit: int = 8) -> list[str]:
    """``["aten::addmm x12 -> x36", ...]``: the ops whose counts changed, largest change first."""
    names = sorted(set(base) | set(cur), key=lambda n: (-abs(cur.get(n, 0) - base.get(n, 0)), n))
    out = [
        f"{n} x{base.get(n, 0)} -> x{cur.get(n, 0)}"
        for n in names
        if base.get(n, 0) != cur.get(n, 0)
    ]
    return out[:limit] + ([f"and {len(out) - limit} more"] if len(out) > limit else [])


def _row(quantity, base, cur, limit, threshold, unit, ops=None) -> dict:
    return {
        "quantity": quantity,
        "baseline": base,
        "current": cur,
        "limit": limit,
        "threshold": threshold,
        "unit": unit,
        "regressed": cur > limit,
        "changed": cur != base,
        "ops": ops or [],
    }


def _launches(side: dict) -> dict:
    """Device launches by name: kernels, and compiled graphs and fused segments (adaptive
    eager execution) each as one name."""
    by = dict(side.get("kernels_by_op") or {})
    if side.get("graphs"):
        by["compiled graph executions"] = side["graphs"]
    if side.get("fused_segments"):
        by["fused segments"] = side["fused_segments"]
    return by


def _side_rows(name: str, b: dict, c: dict, th: dict, per: str = "per pass") -> list[dict]:
    rows = []
    bl, cl = _launches(b), _launches(c)
    nb, nc = sum(bl.values()), sum(cl.values())
    rows.append(
        _row(
            f"{name} device launches {per}",
            nb,
            nc,
            nb * (1 + th["kernels"]),
            th["kernels"],
            "fraction",
            op_diff(bl, cl),
        )
    )
    fb, fc = b.get("fallbacks_by_op") or {}, c.get("fallbacks_by_op") or {}
    rows.append(
        _row(
            f"{name} CPU fallback calls {per}",
            b.get("fallback_calls", 0),
            c.get("fallback_calls", 0),
            b.get("fallback_calls", 0) + th["fallbacks"],
            th["fallbacks"],
            "calls",
            op_diff(fb, fc),
        )
    )
    sb, sc = b.get("new_signatures"), c.get("new_signatures")
    if sb is not None and sc is not None:  # None: an older baseline, or one training step
        rows.append(
            _row(
                f"{name} new kernel signatures after warm-up {per}",
                len(sb),
                len(sc),
                len(sb) + th["new_signatures"],
                th["new_signatures"],
                "count",
                sorted(set(sc) - set(sb))[:8],
            )
        )
    if name == "eager":
        pb = ((b.get("projection") or {}).get("trn2") or {}).get("latency_s")
        pc = ((c.get("projection") or {}).get("trn2") or {}).get("latency_s")
        if pb and pc and _same_overheads(b["projection"]["trn2"], c["projection"]["trn2"]):
            r = _row(
                "eager projected Trainium2 time per pass",
                pb,
                pc,
                pb * (1 + th["projected_time"]),
                th["projected_time"],
                "seconds",
                op_diff(bl, cl),
            )
            r["launch_us"] = {
                "baseline": b["projection"]["trn2"].get("launch_us"),
                "current": c["projection"]["trn2"].get("launch_us"),
            }
            rows.insert(0, r)
    return rows


def _eager_overheads(p: dict) -> tuple:
    """What an eager projection's seconds include besides the trace: the cost per launch,
    the roofline factor (1 before ``projection/overheads.py``) and whether matmuls were
    priced at the TensorEngine's utilization (not before ``roofline.pe_utilization``)."""
    return p.get("launch_us"), p.get("roofline_factor", 1.0), p.get("pe_utilization", False)


def _same_overheads(b: dict, c: dict) -> bool:
    return _eager_overheads(b) == _eager_overheads(c)


def _overhead_notes(bmx: dict, result: CheckResult) -> list[str]:
    """Why a projected time was not compared: its fixed costs differ from the baseline's (a
    baseline saved before ``projection/overheads.py``, or another ``--launch-overhead-us``)."""
    notes = []
    b = (((bmx.get("exact") or {}).get("eager") or {}).get("projection") or {}).get("trn2")
    c = result.exact.eager_projection() if result.exact else None
    if b and c and not _same_overheads(b, c):
        (bl, br, _), (cl, cr, _) = _eager_overheads(b), _eager_overheads(c)
        why = (
            f"fixed costs (launch {bl:g} us, roofline x{br:g}) differ from this run's "
            f"({cl:g} us, x{cr:g}); save the baseline again (or pass its --launch-overhead-us)"
            if (bl, br) != (cl, cr)
            else "was projected without the TensorEngine's utilization; save it again"
        )
        notes.append(f"eager projected time not compared: the baseline's {why}")
    pb, pc = bmx.get("projection") or {}, result.projection
    if pb.get("trn2") and pc is not None and pc.status == "pass" and not _same_compiled(pb, pc):
        notes.append(
            "compiled projected time not compared: the baseline was projected without this "
            "version's fixed costs (projection/overheads.py); save it again"
        )
    return notes


def _same_compiled(pb: dict, pc: ProjectionResult) -> bool:
    return pb.get("overheads") == pc.trn2.get("overheads")


def _compile_rows(bc: dict | None, cc: CompileCheckResult | None, th: dict) -> list[dict]:
    if not bc or cc is None or not bc.get("checked") or not cc.checked:
        return []
    rows = []
    for key, label in (("graph_breaks", "graph breaks"), ("recompiles", "recompiles")):
        b, c = bc.get(key), getattr(cc, key)
        if b is None or c is None:
            continue
        rows.append(_row(label, b, c, b + th[key], th[key], "count"))
    return rows


def compare(bmx: dict, result: CheckResult, th: dict) -> dict:
    """The exact gates of a run (``result``) against a baseline's metrics (``bmx``), per
    forward pass and per training step (device launches, fallbacks):
    ``{"rows", "regressions", "notes"}``."""
    cur, base = result.exact, bmx.get("exact")  # this run's ExactResult, the baseline's dict
    rows, notes = [], []
    rows += _compile_rows(bmx.get("compile"), result.phase1.compile if result.phase1 else None, th)
    if not base:
        notes.append(
            "the baseline has no kernel trace (saved by an earlier version): projected time, "
            "device launches and fallbacks were not compared; save it again"
        )
    elif cur is None or not cur.passed:
        notes.append(f"this run's kernel trace failed ({cur.error if cur else None}): not compared")
    else:
        for side in ("eager", "compiled"):
            b, c = base.get(side), cur.side(side)
            if b and c:
                rows += _side_rows(side, b, c, th)
            elif b or c:
                notes.append(
                    f"{side}: not compared (traced "
                    + ("in the baseline only" if b else "in this run only")
                    + "; --mode differs or the compiled model did not run)"
                )
    notes += _overhead_notes(bmx, result)
    pb, pc = (bmx.get("projection") or {}).get("trn2"), _projected_now(result)
    if pb and pc and _same_compiled(bmx["projection"], result.projection):
        # both ran --projection: the compiled graph's projection, from the StableHLO
        rows.append(
            _row(
                "compiled projected Trainium2 time per pass (StableHLO)",
                pb,
                pc,
                pb * (1 + th["projected_time"]),
                th["projected_time"],
                "seconds",
            )
        )
    bt = (bmx.get("training") or {}).get("exact") or {}
    ct = (result.training.exact if result.training else None) or {}
    for side in ("eager", "compiled"):  # a training step, where both runs traced one
        if bt.get(side) and ct.get(side):
            rows += _side_rows(f"training ({side})", bt[side], ct[side], th, "per step")
    regressions = [_message(r) for r in rows if r["regressed"]]
    return {
        "rows": rows,
        "regressions": regressions,
        "notes": notes,
        "by_op": _by_op(base, cur) if base and cur is not None and cur.passed else {},
    }


def by_op_table(base: dict, cur: dict) -> list[dict]:
    """The kernel trace diff of one side: every op launched in either run with its launches
    per pass in each, changed ops first (largest change first), then by name."""
    bl, cl = _launches(base), _launches(cur)
    names = sorted(set(bl) | set(cl), key=lambda n: (-abs(cl.get(n, 0) - bl.get(n, 0)), n))
    return [{"op": n, "baseline": bl.get(n, 0), "current": cl.get(n, 0)} for n in names]


def _by_op(base: dict, cur: ExactResult) -> dict:
    """``{side: by_op_table}`` for the sides both runs traced (eager, compiled)."""
    return {
        s: by_op_table(base[s], cur.side(s))
        for s in ("eager", "compiled")
        if base.get(s) and cur.side(s)
    }


def _projected_now(result: CheckResult) -> float | None:
    p = result.projection
    return p.trn2["latency_s_per_core"] if p is not None and p.status == "pass" else None


def _fmt(v, unit: str) -> str:
    return f"{v * 1e6:.1f} us" if unit == "seconds" else f"{v:g}"


def _message(r: dict) -> str:
    th = (
        f"+{r['threshold']:.0%}" if r["unit"] in ("fraction", "seconds") else f"+{r['threshold']:g}"
    )
    msg = (
        f"{r['quantity']}: {_fmt(r['current'], r['unit'])} vs the baseline's "
        f"{_fmt(r['baseline'], r['unit'])} (threshold {th})"
    )
    return msg + (f"; changed: {', '.join(r['ops'])}" if r["ops"] else "")
