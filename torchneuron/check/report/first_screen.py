"""The terminal report's first screen (``summary.py`` drawn with rich): the verdict and
what the exit code means, one line per phase, the findings, where the details are. At most
``WIDTH`` columns, so it reads in an ordinary terminal and a CI log."""

from __future__ import annotations

from rich.console import Console
from rich.segment import Segment, Segments
from rich.table import Table
from rich.text import Text

from ..result import CheckResult
from . import summary
from .terminal_phases import failure_panel

WIDTH = 100
_STYLE = {
    "pass": "bold green",
    "fail": "bold red",
    "regression": "bold red",
    "inconclusive": "bold yellow",
    "skipped": "yellow",
    "saved": "cyan",
}


def render(result: CheckResult, con: Console, details: bool = False) -> None:
    """Print the first screen on ``con``, at most ``WIDTH`` columns wide, with no trailing
    spaces (a table pads its cells to the column's width: a copied or logged line would
    carry them)."""
    width = min(con.width, WIDTH)
    for part in (
        _verdict(result),
        _phases(result),
        _findings(result),
        [failure_panel(result.phase1)],
        _pointer(result, details),
    ):
        for x in part:
            if x is not None:
                con.print(trimmed(con, x, width), width=width)


def trimmed(con: Console, x, width: int) -> Segments:
    """``x`` rendered ``width`` wide, each line's trailing spaces dropped (a table pads its
    cells, a wrapped text keeps the space it broke at)."""
    out: list[Segment] = []
    for line in con.render_lines(x, con.options.update(width=width), pad=False):
        while line and not line[-1].control and not line[-1].text.rstrip():
            line.pop()
        if line and not line[-1].control:
            last = line.pop()
            line.append(Segment(last.text.rstrip(), last.style))
        out += line + [Segment.line()]
    return Segments(out)


def _verdict(result: CheckResult) -> list:
    v, m = summary.verdict(result), result.model
    head = Text()
    head.append(f"{v['label']} ", style=_STYLE.get(v["status"], "bold"))
    head.append(f"torchneuron check {m['name']}", style="bold")
    head.append(f" · exit code {result.exit_code}: {v['meaning']}")
    out: list = [head]
    for f in v["failures"]:
        out.append(Text(f"  • {f}", style="red" if v["status"] == "fail" else "yellow"))
    out.append(Text(summary.EXIT_CODES, style="dim"))
    ds = result.manifest["device_stack"]
    # the description on its own line: a long one wrapped the list after it mid-item
    out.append(Text(m["description"], style="dim"))
    out.append(
        Text(
            f"batch {m['batch_size']} · {m['dtype']} · {result.phase1.device} "
            f"({ds['device_name']}) · reference {result.config['reference']}",
            style="dim",
        )
    )
    if ds.get("emulated"):
        out.append(
            Text(
                "Emulated NeuronCore: host times are this host's, not Trainium's; the Trainium "
                "figures are projected (estimates).",
                style="yellow",
            )
        )
    return out


def _phases(result: CheckResult) -> list:
    t = Table.grid(padding=(0, 1))
    t.add_column(no_wrap=True)  # indent
    t.add_column(style="cyan", no_wrap=True, min_width=11)
    t.add_column(no_wrap=True, min_width=10)
    t.add_column(overflow="fold")
    for name, status, texts in summary.phase_lines(result):
        label = Text(status.upper(), style=_STYLE.get(status, ""))
        t.add_row("", name, label, texts[0] if texts else "")
        for more in texts[1:]:
            t.add_row("", "", "", Text(more, style="dim"))
    return [Text(""), Text("Phases", style="bold"), t]


def _findings(result: CheckResult) -> list:
    found = summary.findings(result)
    if not found:
        return [Text(""), Text("Findings", style="bold"), Text("  none", style="dim")]
    t = Table.grid(padding=(0, 1))
    t.add_column(no_wrap=True)  # the bullet: wrapped lines hang under the text
    t.add_column(overflow="fold")
    for what, text, hint in found:
        line = Text()
        line.append(f"{what}: ", style="bold")
        line.append(text)
        t.add_row(" •", line)
        if hint:
            t.add_row("", Text(f"hint: {hint}", style="dim"))
    return [Text(""), Text("Findings", style="bold"), t]


def _pointer(result: CheckResult, details: bool) -> list:
    out: list = [Text(""), Text("Details", style="bold")]
    out += [Text(f"  {line}") for line in summary.details_pointer(result, details)]
    return out
