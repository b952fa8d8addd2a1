"""The HTML report's plots, as inline SVG: warm-up curve, latency histogram, host time per
operator with CPU fallbacks highlighted."""

from __future__ import annotations

from ..result import Phase1Result
from ..result_phases import Phase3Result
from .html_parts import _plt, _svg


def _side_axes(p3: Phase3Result):
    """(figure, [(axis, label, phase-3 side)]) with one panel per measured device, or None."""
    sides = [(k, x) for k, x in (("device", p3.device), ("reference", p3.reference)) if x]
    if not sides:
        return None
    fig, axes = _plt().subplots(1, len(sides), figsize=(5.6 * len(sides), 3.2), squeeze=False)
    return fig, [(ax, label, x) for ax, (label, x) in zip(axes[0], sides)]


def plot_warmup(p3: Phase3Result) -> str | None:
    """Iteration time (ms) over iterations: warm-up then measurement, per device."""
    panels = _side_axes(p3)
    if panels is None:
        return None
    fig, panels = panels
    for ax, label, x in panels:
        w = [t * 1e3 for t in x["warmup"]["times_s"]]
        m = [t * 1e3 for t in x["times_s"]]
        ax.plot(range(1, len(w) + 1), w, ".-", color="#e67e22", lw=1, ms=3, label="warm-up")
        ax.plot(
            range(len(w) + 1, len(w) + len(m) + 1),
            m,
            ".-",
            color="#2c7fb8",
            lw=1,
            ms=3,
            label="measured",
        )
        if w:
            ax.axvline(len(w) + 0.5, color="#555", ls="--", lw=0.8)
        ax.axhline(
            x["p50_s"] * 1e3,
            color="#2c7fb8",
            ls=":",
            lw=0.8,
            label=f"p50 {x['p50_s'] * 1e3:.3g} ms",
        )
        stable = "stable" if x["warmup"]["stable"] else "NOT stable"
        ax.set_title(f"{label} ({x['device']}): warm-up {len(w)} it, {stable}")
        ax.set_xlabel("iteration")
        ax.set_ylabel("iteration time (ms)")
        ax.legend(loc="upper right", fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return _svg(fig)


def plot_histogram(p3: Phase3Result) -> str | None:
    """Histogram of steady-state iteration times (ms), p50/p90/p99 marked."""
    panels = _side_axes(p3)
    if panels is None:
        return None
    fig, panels = panels
    for ax, label, x in panels:
        m = [t * 1e3 for t in x["times_s"]]
        ax.hist(
            m,
            bins=min(40, max(5, len(m) // 3)),
            color="#2c7fb8" if label == "device" else "#7f8c8d",
            edgecolor="white",
        )
        for q, ls in (("p50_s", "-"), ("p90_s", "--"), ("p99_s", ":")):
            ax.axvline(
                x[q] * 1e3, color="#c0392b", ls=ls, lw=1, label=f"{q[:3]} {x[q] * 1e3:.3g} ms"
            )
        ax.set_title(f"{label} ({x['device']}): {len(m)} measured iterations")
        ax.set_xlabel("latency (ms)")
        ax.set_ylabel("iterations")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return _svg(fig)


def _base_op(name: str) -> str:
    # aten::sort.values_stable -> aten::sort (the profiler reports the overload-free name)
    return name.split(".")[0]


def plot_ops(p1: Phase1Result, top: int = 20) -> str | None:
    """Horizontal bars: host time per ATen op (torch.profiler self time) over one forward
    pass; CPU-fallback ops in red with their fallback seconds from fallback_stats."""
    rows = p1.op_profile or []
    fb = p1.fallback.get("ops", {})
    if not rows and not fb:
        return None
    fb_base = {_base_op(k): v for k, v in fb.items()}
    items = [
        (r["op"], r["self_host_s"] * 1e3, r["op"] in fb_base or r["op"] in fb) for r in rows[:top]
    ]
    listed = {i[0] for i in items}
    for k, v in fb.items():  # fallback ops the profile did not list still show
        if _base_op(k) not in listed and k not in listed:
            calls = max(v["calls"], 1)
            items.append((k, v["seconds"] * 1e3 / calls, True))
    items.sort(key=lambda i: i[1])
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 0.28 * len(items) + 1.2))
    ax.barh(
        [i[0] for i in items],
        [i[1] for i in items],
        color=["#c0392b" if i[2] else "#2c7fb8" for i in items],
    )
    for y, i in enumerate(items):
        if i[2]:
            v = fb_base.get(i[0]) or fb.get(i[0])
            ax.text(
                i[1],
                y,
                f"  CPU fallback: {v['calls']} calls, {v['seconds'] * 1e3:.2f} ms in phase 1",
                va="center",
                fontsize=7,
                color="#c0392b",
            )
    ax.set_xlabel("host time per forward pass (ms), self time")
    ax.set_title("Host dispatch time per op (torch.profiler CPU activity) — red: CPU fallback")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return _svg(fig)
