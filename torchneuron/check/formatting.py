"""Number formatting shared by the terminal and HTML reports."""
from __future__ import annotations

from typing import Optional


def ms(seconds: Optional[float], digits: int = 3) -> str:
    """Seconds shown as milliseconds."""
    if seconds is None:
        return "–"
    return f"{seconds * 1e3:.{digits}f} ms"


def nbytes(n: Optional[float]) -> str:
    """Bytes in binary units (KiB = 1024 B)."""
    if n is None:
        return "–"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def num(x: Optional[float], digits: int = 3) -> str:
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


def pct(x: Optional[float]) -> str:
    """A fraction as a percentage."""
    return "–" if x is None else f"{x:.1%}"


def signed_pct(x: Optional[float]) -> str:
    """A relative change as a signed percentage."""
    return "–" if x is None else f"{x:+.1%}"


def usd(x: Optional[float]) -> str:
    """US dollars."""
    if x is None:
        return "–"
    if x == float("inf"):
        return "∞"
    if 0 < abs(x) < 0.01:   # a few significant figures, not $0.0000
        return f"${x:.3g}"
    return f"${x:,.4f}" if x < 1 else f"${x:,.2f}"


def ratio(x: Optional[float]) -> str:
    """A ratio, e.g. 1.25×."""
    if x is None:
        return "–"
    return f"{x:.2f}×" if x >= 0.1 else f"{x:.2g}×"


def peak_memory(m: dict) -> str:
    """Phase 1's ``memory`` in one line: the compared peak (in program order where measured),
    the run-ahead peak, reserved, weights and capacity."""
    ahead = m.get("peak_allocated_run_ahead_bytes")
    basis = (f" in program order ({nbytes(ahead)} with the host running ahead)"
             if m.get("peak_allocated_basis") == "in order" else "")
    return (f"allocated {nbytes(m['peak_allocated_bytes'])}{basis}, reserved {nbytes(m['peak_reserved_bytes'])}, "
            f"weights {nbytes(m.get('weights_bytes'))}, capacity {nbytes(m['capacity_bytes'])}")


def projected_instance(x: dict) -> str:
    """A projection's instance, e.g. ``trn2.48xlarge (128 cores)``, marked when assumed."""
    return f"{x['instance']} ({x['cores_per_instance']} cores" + (", assumed" if x.get("instance_assumed") else "") + ")"


def projected_cost(x: dict) -> str:
    """A projection's USD per million samples, or how to give the price it lacks."""
    if not x["usd_per_million"]:
        return f"no verified price: --instance {x['instance']} --price-per-hour USD"
    return usd(x["usd_per_million"]) + (" (your price)" if x.get("price_source") == "--price-per-hour" else "")


def narrowing(p1: dict) -> str:
    """Phase 1's 64-bit narrowing: the eager runs' ops, then the compiled runs' (calls each)."""
    eager = ", ".join(f"{k} ×{v}" for k, v in p1["narrowing"].items())
    comp = ", ".join(f"{k} ×{v}" for k, v in ((p1.get("compile") or {}).get("narrowing") or {}).items())
    return "; ".join(x for x in (eager, f"compiled: {comp}" if comp else "") if x) or "none"
