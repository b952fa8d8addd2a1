"""The HTML report's first part, in the terminal's order (``summary.py``): the verdict and
what the exit code means, one row per phase, the findings, where the details are."""

from __future__ import annotations

from ..result import CheckResult
from . import summary
from .html_parts import _e, _table

_CLASS = {"regression": "fail", "saved": "skipped", "inconclusive": "skipped"}


def section(result: CheckResult) -> str:
    """The verdict box, the phases table, the findings list and the pointer to the details."""
    return _verdict(result) + _phases(result) + _findings(result) + _pointer(result)


def _verdict(result: CheckResult) -> str:
    v = summary.verdict(result)
    css = {"pass": "pass", "inconclusive": "inconclusive"}.get(v["status"], "fail")
    fails = "".join(f"<li>{_e(f)}</li>" for f in v["failures"])
    return (
        f'<div class="verdict v-{css}" id="verdict"><b>{_e(v["label"])}</b> — exit code '
        f"{result.exit_code}: {_e(v['meaning'])}"
        + (f"<ul>{fails}</ul>" if fails else "")
        + f'</div><p class="caption">{_e(summary.EXIT_CODES)}</p>'
    )


def _phases(result: CheckResult) -> str:
    rows = []
    for name, status, texts in summary.phase_lines(result):
        css = _CLASS.get(status, status)
        rows.append(
            [
                _e(name),
                f'<span class="{_e(css)}">{_e(status.upper())}</span>',
                "<br>".join(_e(t) for t in texts),
            ]
        )
    return '<h2 id="phases">Phases</h2>' + _table(["phase", "result", "what it found"], rows)


def _findings(result: CheckResult) -> str:
    items = []
    for what, text, hint in summary.findings(result):
        items.append(
            f"<li><b>{_e(what)}</b>: {_e(text)}"
            + (f'<br><span class="caption">hint: {_e(hint)}</span>' if hint else "")
            + "</li>"
        )
    body = f"<ul>{''.join(items)}</ul>" if items else "<p>none</p>"
    return '<h2 id="findings">Findings</h2>' + body


def _pointer(result: CheckResult) -> str:
    js = (result.config or {}).get("json_path")
    return (
        '<p class="caption">The details follow: each phase, the cost, the projection, the '
        "per-pass kernel trace, the baseline comparison and the manifest. "
        + (
            f"The whole result: <code>{_e(js)}</code>."
            if js
            else "The whole result as JSON: <code>--json FILE</code>."
        )
        + "</p>"
    )
