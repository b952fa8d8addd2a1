"""The HTML of ``--profile`` (``phases/profile.py``): the timeline of one steady-state
iteration as inline SVG and the top operators by self device time."""

from __future__ import annotations

from ..result_profile import ProfileResult
from .html_parts import _e, _plt, _svg, _table

_COLORS = {"cpu_op": "#8da0cb", "kernel": "#66c2a5", "memcpy": "#fc8d62", "cpu_fallback": "#d62728"}


def plot_timeline(p: ProfileResult, path: str | None = None) -> str | None:
    """The timeline as inline SVG (or saved to ``path``: PNG/SVG by suffix, returns None)."""
    if not p.timeline:
        return None
    plt = _plt()
    rows = p.rows
    fig, ax = plt.subplots(figsize=(11, 0.5 + 0.45 * len(rows)))
    for i, row in enumerate(rows):
        for kind, color in _COLORS.items():
            bars = [
                (s["start_us"] / 1e3, max(s["dur_us"], 0.5) / 1e3)
                for s in p.timeline
                if s["row"] == row and s["kind"] == kind
            ]
            if bars:
                ax.broken_barh(bars, (i - 0.4, 0.8), facecolors=color, edgecolor="none")
    ax.set_yticks(range(len(rows)), rows)
    ax.invert_yaxis()
    ax.set_xlabel("ms from the start of the iteration")
    ax.set_xlim(0, max(p.span_us, 1.0) / 1e3)
    from matplotlib.patches import Patch

    ax.legend(
        handles=[Patch(color=c, label=k.replace("_", " ")) for k, c in _COLORS.items()],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.35 if len(rows) < 4 else -0.2),
        ncol=4,
        frameon=False,
    )
    ax.set_title("One steady-state iteration: host dispatch and NeuronCore streams")
    if path:
        fig.savefig(path, bbox_inches="tight", dpi=130)
        plt.close(fig)
        return None
    return _svg(fig)


def html_section(p: ProfileResult | None) -> str:
    """The report's "Profile" section (empty when --profile was not given)."""
    if p is None:
        return ""
    if p.status == "skipped":
        return f'<h2 id="profile">Profile</h2><div class="note">not profiled: {_e(p.reason)}</div>'
    if not p.ok:
        return (
            f'<h2 id="profile">Profile</h2><div class="note">profiling failed: {_e(p.error)}</div>'
        )
    svg = plot_timeline(p)
    rows = [
        [
            (_e(o["op"]) + (" <b>(CPU fallback)</b>" if o["cpu_fallback"] else "")),
            str(o["calls"]),
            f"{o['self_device_us']:.1f}",
            f"{o['device_total_us']:.1f}",
            f"{o['self_cpu_us']:.1f}",
        ]
        for o in p.top_ops
    ]
    table = _table(
        ["operator", "calls", "self device µs", "device total µs", "self CPU µs"],
        rows,
        (1, 2, 3, 4),
    )
    return f"""<h2 id="profile">Profile — one steady-state iteration</h2>
<p class="caption">torch.profiler with ProfilerActivity.PrivateUse1: {p.device_time_us:.0f} µs of device
work, {p.fallback_time_us:.0f} µs of CPU fallbacks (red), over {p.span_us:.0f} µs.</p>
<div class="plots"><div class="plot">{svg or ""}</div></div>
<h3>Top operators by self device time</h3>
{table}
"""
