"""The terminal report (rich): the first screen (``first_screen.py``), the full tables with
``--details`` (``terminal_phases.py``, ``terminal_details.py``), the warnings; and the UI shown
while a check runs (steps and progress bars)."""

from __future__ import annotations

import re

from rich import box
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from ..model.loading import builtin_models
from ..result import CheckResult
from . import first_screen, summary, terminal_details
from .terminal_phases import status_text

__all__ = ["TerminalUI", "list_models", "render", "status_text"]


class TerminalUI:
    """Steps as dim lines and rich progress bars, on ``console`` (stderr by default)."""

    def __init__(self, console: Console | None = None, progress: bool = True):
        self.console = console or Console(stderr=True)
        self.show_progress = progress and self.console.is_terminal

    def step(self, msg: str) -> None:
        """Announce a step of the run."""
        self.console.print(f"[dim]• {msg}[/dim]")

    def progress(self, description: str, total: int | None):
        """A progress bar (a context manager with ``advance(info)``); total None: unknown."""
        return _Bar(self.console, description, total, enabled=self.show_progress)


class _Bar:
    def __init__(self, console: Console, description: str, total: int | None, enabled: bool):
        self.description = description
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=not enabled,
        )
        self.task = self.progress.add_task(description, total=total, info="")

    def __enter__(self):
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)

    def advance(self, info: str = "") -> None:
        """One more iteration; ``info`` is shown beside the bar."""
        self.progress.update(self.task, advance=1, info=info)


def render(result: CheckResult, console: Console | None = None, details: bool = False) -> None:
    """Print the report: the first screen (verdict, phases, findings, where the details
    are); with ``details`` the full tables after it; then the warnings in their own section."""
    con = console or Console()
    first_screen.render(result, con, details)
    if details:
        con.print()
        con.rule(f"[bold]details[/bold] {result.model['name']}")
        for part in terminal_details.tables(result, con.width):
            for x in part:
                con.print(x)
    _warnings(result, con, details)
    if details:  # the tables pushed the verdict off the screen: once more at the end
        v = summary.verdict(result)
        con.print(
            Text(f"verdict: {v['label']} (exit code {result.exit_code})", style="bold"),
            width=min(con.width, first_screen.WIDTH),
        )


def _warnings(result: CheckResult, con: Console, details: bool) -> None:
    """Device warnings and the check's own, in one section after the rest. Without
    ``details`` each device warning is cut to its first sentence (whole in the JSON)."""
    dev_w = result.phase1.warnings
    if not (dev_w or result.warnings):
        return
    width = con.width if details else min(con.width, first_screen.WIDTH)
    con.print()
    con.print(Rule("Warnings", style="yellow"), width=width)
    for w in dev_w[:10]:
        text = w[:300] if details else _first_sentence(w)
        con.print(first_screen.trimmed(con, Text(f"device warning: {text}", style="dim"), width))
    if len(dev_w) > 10:
        con.print(Text(f"... {len(dev_w) - 10} more device warnings in the JSON", style="dim"))
    for w in result.warnings:
        con.print(first_screen.trimmed(con, Text(f"warning: {w}", style="yellow"), width))


# a sentence's end: . ! or ? (a closing quote or bracket may follow), then space and a
# capital; not "e.g." or "i.e."
_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)[.!?][`'\")\]]?(?=\s+[A-Z])")


def _first_sentence(w: str, limit: int = 200) -> str:
    m = _SENTENCE_END.search(w)
    if m and m.end() <= limit:
        return w[: m.end()]
    return w[:limit] + ("..." if len(w) > limit else "")


def list_models(console: Console | None = None) -> None:
    """Print the built-in models, one line each (``--list``)."""
    con = console or Console()
    t = Table(
        title="Built-in models (torchneuron check MODEL)", title_justify="left", box=box.SIMPLE
    )
    t.add_column("name", style="cyan")
    t.add_column("description")
    for name, (_, desc) in builtin_models().items():
        t.add_row(name, desc)
    con.print(t)
    con.print(
        "Your own model: torchneuron check path/to/file.py:factory  "
        "(factory() returns (model, example_inputs))"
    )
