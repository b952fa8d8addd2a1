"""The HTML report's baseline comparison: accuracy, the exact gates, host latency, compile,
memory and training rows; the kernel trace diff by op; what changed since the baseline."""

from __future__ import annotations

from .. import formatting
from ..result_baseline import BaselineComparison
from .html_parts import _e, _kv, _status, _table


def _baseline(b: BaselineComparison | None) -> str:
    if not b:
        return "<p>No baseline given (<code>--baseline DIR</code>).</p>"
    if b.status == "skipped":
        return _kv(
            [
                ("baseline", _e(b.path)),
                ("result", _status("skipped")),
                ("reason", _e(b.reason)),
            ]
        )
    rows = []
    for name, a in (b.accuracy or {}).items():
        rows.append(
            [
                _e(f"accuracy {name}"),
                "reference + fp64 outputs",
                _e(f"max abs {formatting.num(a.get('max_abs'))}"),
                "identical" if a.get("identical_to_baseline_device") else "",
                _e(a.get("decided_by")),
                _status("pass" if a.get("passed") else "fail"),
            ]
        )
    comp = b.compiled or {}
    rows += exact_rows(b.exact)
    rows += _latency_rows(b.latency or {}, "")
    cc = comp.get("compile") or {}
    if "note" in cc:
        rows.append(
            [
                "compiles (torch.compile)",
                "",
                "",
                "",
                "",
                f'<span class="warn">{_e(cc["note"])}</span>',
            ]
        )
    elif cc:
        rows.append(
            [
                "compiles (torch.compile)",
                *map(_e, formatting.compile_cells(cc)),
                _e(
                    f"{cc['graph_breaks']['baseline']} → {cc['graph_breaks']['current']} graph break(s)"
                ),
                "must compile",
                _status("fail" if cc["regressed"] else "pass"),
            ]
        )
    if comp:
        rows += _latency_rows(comp.get("latency") or {}, " (compiled)")
    mem = b.memory or {}
    if mem.get("note"):  # not compared (a compiled peak against an eager one)
        rows.append(["peak memory (allocated)", "", "", _e(mem["note"]), "", "not compared"])
        mem = {}
    elif mem:
        rows.append(
            [
                _e(formatting.peak_label(mem)),
                _e(formatting.nbytes(mem["baseline_peak_allocated_bytes"])),
                _e(formatting.nbytes(mem["current_peak_allocated_bytes"])),
                _e(formatting.signed_pct(mem["change"])),
                _e(f"+{mem['threshold']:.0%} and +{formatting.nbytes(mem['min_increase_bytes'])}"),
                _status("fail" if mem["regressed"] else "pass"),
            ]
        )
    rows += [
        [_e(x) for x in cells] + ["info only" if res == "info" else _status(res)]
        for cells, res in formatting.training_baseline_rows(b.training or {})
    ]
    out = f"<p>Baseline <code>{_e(b.path)}</code>, saved {_e(b.created_utc)}.</p>"
    out += _table(["check", "baseline", "current", "change", "threshold", "result"], rows)
    out += kernel_diff((b.exact or {}).get("by_op"))
    return out + _baseline_notes(b, mem)


def _baseline_notes(b: BaselineComparison, mem: dict) -> str:
    """Under the baseline table: the memory rule, new fallback ops, the manifest changes."""
    out = ""
    if mem:
        out += (
            f'<p class="caption">Peak memory: a regression needs both +{mem["threshold"]:.0%} and at least '
            f"{_e(formatting.nbytes(mem['min_increase_bytes']))} more (<code>peak_memory_min_bytes</code>): a small "
            "model's peak is a few allocator blocks, and a baseline saved before the program-order peak holds "
            "the run-ahead one, which moves by several blocks between identical runs (frees follow the device "
            "queue).</p>"
        )
    ch = b.changes or {}
    if ch.get("new_fallback_ops"):
        out += f'<div class="note">New CPU fallback ops since the baseline: {_e(", ".join(ch["new_fallback_ops"]))}</div>'
    if ch.get("manifest"):
        out += "<h3>Changed since the baseline</h3>" + _table(
            ["manifest entry", "baseline", "current"],
            [[_e(m["key"]), _e(m["baseline"]), _e(m["current"])] for m in ch["manifest"]],
        )
    return out


def exact_rows(ex: dict | None) -> list:
    """The exact gates' rows (``baseline/exact.py``), the ops whose counts changed beside."""
    rows = []
    for r in (ex or {}).get("rows", []):
        fmt = (lambda v: f"{v * 1e6:.4g} µs") if r["unit"] == "seconds" else str
        th = (
            f"+{r['threshold']:.0%}"
            if r["unit"] in ("fraction", "seconds")
            else f"+{r['threshold']:g}"
        )
        rows.append(
            [
                _e(r["quantity"]),
                _e(fmt(r["baseline"])),
                _e(fmt(r["current"])),
                _e(", ".join(r["ops"])),
                _e(th),
                _status("fail" if r["regressed"] else "pass"),
            ]
        )
    return rows


def _latency_rows(lat: dict, label: str) -> list:
    """The rows of one latency comparison (eager: ``label`` "", compiled: " (compiled)")."""
    if "baseline_p50_s" not in lat:
        return [
            [
                _e(f"p50 latency{label}"),
                "",
                "",
                "",
                "",
                f'<span class="warn">{_e(lat.get("note", "not compared"))}</span>',
            ]
        ]
    st_all = lat.get("statistics") or {}
    rows = [
        [
            _e(
                f"p50 latency{label} (emulator host time"
                + (", shown only)" if lat.get("gated") is False else ", raw)")
            ),
            _e(formatting.ms(lat["baseline_p50_s"])),
            _e(formatting.ms(lat["current_p50_s"])),
            _e(formatting.signed_pct(lat["change"])),
            "" if st_all else _e(f"+{lat['threshold']:.0%}"),
            "" if st_all else _status("fail" if lat["regressed"] else "pass"),
        ]
    ]
    if lat.get("baseline_throughput_samples_per_s") and lat.get("current_throughput_samples_per_s"):
        bt, ct = lat["baseline_throughput_samples_per_s"], lat["current_throughput_samples_per_s"]
        rows.append(
            [
                _e(f"throughput{label} (samples/s, raw)"),
                _e(formatting.num(bt)),
                _e(formatting.num(ct)),
                _e(formatting.signed_pct(ct / bt - 1)),
                "",
                "",
            ]
        )
    for name, st in st_all.items():
        ci = st["ci"]
        change = "" if ci is None else f"x{ci['ratio']:.3f} [{ci['low']:.3f}, {ci['high']:.3f}]"
        res = (
            "info only"
            if not st.get("decides")
            else _status("fail")
            if st["decision"] == "regressed"
            else _status("pass")
            if st["decision"] == "pass"
            else '<span class="warn">undecided</span>'
        )
        rows.append(
            [
                _e(f"latency{label} {name.replace('_', ' ')} ({st['statistic']})"),
                _e(formatting.num(st["baseline_value"])),
                _e(formatting.num(st["current_value"])),
                _e(change),
                _e(f"+{st['threshold']:.0%}"),
                res,
            ]
        )
        conf = formatting.confirmation_row(name, st)
        if conf:
            rows.append([_e(x) for x in conf] + [""])
    return rows


def kernel_diff(by_op: dict | None) -> str:
    """The kernel trace diff against the baseline: launches per pass by op, eager and
    compiled side by side; changed rows first and marked."""
    if not by_op:
        return ""
    sides = list(by_op)
    counts = {s: {r["op"]: (r["baseline"], r["current"]) for r in by_op[s]} for s in sides}
    ops = list(dict.fromkeys(r["op"] for s in sides for r in by_op[s]))

    def changed(op: str) -> bool:
        return any(len(set(counts[s].get(op, (0, 0)))) > 1 for s in sides)

    ops.sort(key=lambda op: not changed(op))  # stable: each side's order kept within
    head = ["op"] + [f"{s} {c}" for s in sides for c in ("baseline", "current", "change")]
    body = ""
    for op in ops:
        tds = f"<td>{_e(op)}</td>"
        for s in sides:
            b, c = counts[s].get(op, (0, 0))
            for x in (b, c, f"{c - b:+d}" if b != c else ""):
                tds += f'<td class="num">{x}</td>'
        mark = ' class="changed"' if changed(op) else ""
        body += f"<tr{mark}>{tds}</tr>"
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    n = sum(map(changed, ops))
    return (
        '<h3 id="kernel-diff">Kernel trace against the baseline: device launches per pass by op</h3>'
        f'<p class="caption">{n} op(s) changed; a compiled graph execution counts as one launch.'
        f"</p><table><tr>{th}</tr>{body}</table>"
    )
