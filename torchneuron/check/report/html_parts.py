"""Shared pieces of the HTML pages: escaping, tables, and matplotlib figures as inline SVG."""

from __future__ import annotations

import html
import io


def _e(x) -> str:
    return html.escape("" if x is None else str(x))


def _status(s: str | None) -> str:
    s = s or "–"
    return f'<span class="{_e(s)}">{_e(s.upper())}</span>'


def _kv(rows: list[tuple[str, str]]) -> str:
    return (
        "<table>" + "".join(f"<tr><th>{_e(k)}</th><td>{v}</td></tr>" for k, v in rows) + "</table>"
    )


def _table(head: list[str], rows: list[list[str]], num_cols: tuple = ()) -> str:
    h = "".join(f"<th>{_e(c)}</th>" for c in head)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{c}</td>' if i in num_cols else f"<td>{c}</td>"
            for i, c in enumerate(r)
        )
        + "</tr>"
        for r in rows
    )
    return f"<table><tr>{h}</tr>{body}</table>"


def _svg(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    s = buf.getvalue()
    return s[s.index("<svg") :]  # drop the XML prolog and doctype: inline SVG


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.fonttype": "path", "font.size": 9})
    return plt
