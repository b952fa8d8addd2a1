"""The HTML report (``--html FILE``): one self-contained page (inline CSS, plots as inline
SVG, no scripts, nothing fetched) with the verdict, the three phases, the cost, the
baseline comparison, the plots (warm-up curve, latency histogram, host time per operator
with CPU fallbacks highlighted) and the manifest."""

from __future__ import annotations

import json

from .. import formatting as F
from . import exact_html
from .html_parts import _e, _kv, _plt, _status, _svg, _table
from .profile_html import html_section

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;color:#1d2330;background:#f5f6f8}
main{max-width:1180px;margin:0 auto;padding:24px}
h1{font-size:1.6em;margin:0 0 4px} h2{margin:28px 0 8px;font-size:1.25em;border-bottom:2px solid #dde1e7;padding-bottom:4px}
.sub{color:#5a6372;margin:0 0 16px}
.verdict{border-radius:8px;padding:14px 18px;margin:16px 0;color:#fff}
.verdict.v-pass{background:#1f8a4c}.verdict.v-inconclusive{background:#b7791f}.verdict.v-fail{background:#c0392b}
.verdict b{font-size:1.4em}.verdict ul{margin:6px 0 0 18px;padding:0}
.note{background:#fff8e1;border-left:4px solid #f0b400;padding:8px 12px;margin:8px 0}
table{border-collapse:collapse;background:#fff;margin:8px 0;font-size:.92em}
th,td{border:1px solid #dde1e7;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eef1f5} td.num{text-align:right;font-variant-numeric:tabular-nums}
.pass{color:#1f8a4c;font-weight:600}.fail{color:#c0392b;font-weight:600}.skipped{color:#a06b00;font-weight:600}
pre{background:#1d2330;color:#e8ebf0;padding:10px;overflow:auto;font-size:.82em;max-height:420px}
.plots{display:flex;flex-wrap:wrap;gap:12px}.plot{background:#fff;border:1px solid #dde1e7;padding:6px}
.plot svg{max-width:100%;height:auto}
.caption{color:#5a6372;font-size:.85em;max-width:1100px}
"""


# ---------------------------------------------------------------- plots (inline SVG)


def _side_axes(p3: dict):
    """(figure, [(axis, label, phase-3 side)]) with one panel per measured device, or None."""
    sides = [(k, p3.get(k)) for k in ("device", "reference") if p3.get(k)]
    if not sides:
        return None
    fig, axes = _plt().subplots(1, len(sides), figsize=(5.6 * len(sides), 3.2), squeeze=False)
    return fig, [(ax, label, x) for ax, (label, x) in zip(axes[0], sides)]


def plot_warmup(p3: dict) -> str | None:
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


def plot_histogram(p3: dict) -> str | None:
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


def plot_ops(p1: dict, top: int = 20) -> str | None:
    """Horizontal bars: host time per ATen op (torch.profiler self time) over one forward
    pass; CPU-fallback ops in red with their fallback seconds from fallback_stats."""
    rows = p1.get("op_profile") or []
    fb = p1.get("fallback", {}).get("ops", {})
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


# ---------------------------------------------------------------- sections


def _phase1(p1: dict) -> str:
    comp = p1.get("compile", {})
    m = p1["memory"]
    det = p1.get("determinism")
    fb = p1["fallback"]
    rows = [
        ("result", _status(p1["status"])),
        ("device", _e(p1["device"])),
        (
            "mode",
            (
                "eager and compile; phases 2 and 3 "
                + ("compiled" if comp.get("phases_2_3") == "compiled" else "eager")
            )
            if comp.get("checked")
            else "eager" + f" — {_e(comp.get('note'))}",
        ),
        *(
            [
                (
                    "torch.compile",
                    (
                        _status("pass")
                        + _e(
                            f" {F.graphs_ran(comp)}, {comp.get('graph_breaks')} graph break(s), "
                            f"{comp.get('recompiles')} recompile(s); cold compile {F.ms(comp.get('compile_s'), 1)}, "
                            f"warm (cache hit) {F.ms(comp.get('warm_compile_s'), 1)}; max |Δ| vs eager "
                            f"{comp.get('max_abs_diff_vs_eager')}"
                        )
                    )
                    if comp.get("ok")
                    else _status("fail")
                    + _e(
                        " at "
                        + str(
                            (comp.get("error") or {}).get("compile_stage")
                            or (comp.get("error") or {}).get("stage")
                        )
                        + (
                            f", op {comp['error']['op']}"
                            if (comp.get("error") or {}).get("op")
                            else ""
                        )
                    ),
                )
            ]
            if comp.get("checked")
            else []
        ),
        ("fallback mode", _e(p1.get("fallback_mode"))),
        (
            "cold latency (" + ("eager " if comp.get("checked") else "") + "first iteration)",
            _e(F.ms(p1.get("cold_latency_s"))),
        ),
        (
            "CPU fallback ops",
            "none"
            if not fb["ops"]
            else _e(
                f"{len(fb['ops'])} op(s), {F.ms(fb['total_seconds'])} = {F.pct(fb['share'])} of device run time"
            ),
        ),
        ("64-bit narrowing", _e(F.narrowing(p1))),
        ("peak device memory", _e(F.peak_memory(m))),
        (
            "determinism (2 runs)",
            "–"
            if not det
            else (
                "bitwise identical"
                if det["identical"]
                else '<span class="fail">outputs differ</span>'
            ),
        ),
        (
            "outputs",
            _e(", ".join(f"{o['name']} {o['shape']} {o['dtype']}" for o in p1.get("outputs", []))),
        ),
    ]
    out = _kv(rows)
    if fb["ops"]:
        out += "<h3>CPU fallback ops</h3>" + _table(
            ["op", "calls", "seconds", "share of device run time"],
            [
                [_e(k), _e(v["calls"]), _e(F.ms(v["seconds"])), _e(F.pct(v["share"]))]
                for k, v in fb["ops"].items()
            ],
            num_cols=(1, 2, 3),
        )
    if p1.get("warnings"):
        out += (
            "<h3>Warnings raised during the device runs</h3><ul>"
            + "".join(f"<li><code>{_e(w)}</code></li>" for w in p1["warnings"])
            + "</ul>"
        )
    e = p1.get("error")
    if e:
        out += (
            f'<h3 class="fail">Failure: {_e(e["type"])} during {_e(e["stage"])}</h3>'
            + _kv(
                [
                    (
                        "failing op",
                        _e(e["op"] or "none identified (raised outside an ATen operator)")
                        + (
                            f" <small>({_e(e.get('op_source'))})</small>"
                            if e.get("op_source")
                            else ""
                        ),
                    ),
                    ("raised at", _e(e.get("raised_at"))),
                ]
                + ([("reference", _e(e["reference"]))] if e.get("reference") else [])
                + [("message", f"<pre>{_e(e['message'])}</pre>")]
            )
            + f"<pre>{_e(e['traceback'])}</pre>"
        )
    return out


def _compiled_perf(p3: dict, cost: dict) -> str:
    """--mode both: the compiled model's phase-3 statistics and amortized cost (empty otherwise)."""
    c, k = p3.get("compiled"), cost.get("compiled")
    if not c or not c.get("p50_s"):
        return ""
    d = p3["device"]
    rows = [
        (label, _e(F.ms(c[key])) + " (eager " + _e(F.ms(d[key])) + ")")
        for key, label in (
            ("p50_s", "p50 latency"),
            ("p90_s", "p90 latency"),
            ("p99_s", "p99 latency"),
        )
    ]
    rows.append(
        (
            "throughput (samples/s)",
            _e(F.num(c["throughput_samples_per_s"]))
            + " (eager "
            + _e(F.num(d["throughput_samples_per_s"]))
            + ")",
        )
    )
    if k:
        rows += [
            ("cold compile time (amortized)", _e(F.ms(k["overhead_s"]))),
            ("USD per 1M samples, amortized", _e(F.usd(k["usd_per_million"]))),
        ]
    return '<h2 id="phase3-compiled">Phase 3 (compiled, backend neuron)</h2>' + _kv(rows)


def _phase2_compiled(p2: dict) -> str:
    """--mode both: the compiled model's accuracy table (empty otherwise)."""
    c = p2.get("compiled")
    if not c:
        return ""
    return (
        f'<h2 id="phase2-compiled">Phase 2 (compiled, backend neuron) — is it accurate {_status(c["status"])}'
        f"</h2>\n{_phase2(p2 | {'status': c['status'], 'outputs': c['outputs']})}"
    )


def _phase2(p2: dict) -> str:
    if p2["status"] == "skipped":
        return _kv([("result", _status("skipped")), ("reason", _e(p2.get("reason")))])
    rows = []
    for name, o in p2["outputs"].items():
        rows.append(
            [
                _e(name),
                _e(o.get("shape")),
                _e(F.num(o.get("max_abs"))),
                _e(F.num(o.get("max_rel"))),
                "–" if o.get("cosine") is None else _e(f"{o['cosine']:.7f}"),
                _e(F.num(o.get("rmse_device_fp64"))),
                _e(F.num(o.get("rmse_reference_fp64"))),
                _e(F.num(o.get("rmse_bound"))),
                _e(o.get("decided_by")),
                _status("pass" if o.get("passed") else "fail"),
            ]
        )
    return _kv(
        [
            ("result", _status(p2["status"])),
            ("reference", _e(p2["reference_device"])),
            ("dtype", _e(p2["dtype"])),
            ("rule", _e(p2["rule"])),
            ("tol", _e(f"{p2['tol']:g} ({p2['tol_source']}), m = {p2['multiplier']:g}")),
        ]
    ) + _table(
        [
            "output",
            "shape",
            "max abs",
            "max rel",
            "cosine",
            "RMSE dev/fp64",
            "RMSE ref/fp64",
            "RMSE bound",
            "decided by",
            "result",
        ],
        rows,
        num_cols=(2, 3, 4, 5, 6, 7),
    )


def _phase3(p3: dict, reference: str) -> str:
    if not p3.get("device"):
        return _kv([("result", _status(p3["status"])), ("reason", _e(p3.get("reason")))])
    d, r = p3["device"], p3.get("reference")
    g = lambda k: r.get(k) if r else None

    def wu(x):
        if not x:
            return "–"
        w = x["warmup"]
        return _e(
            f"{w['iterations']} it, "
            + ("stable" if w["stable"] else "NOT stable")
            + (
                f" (CV {w['final_cv']:.3f} vs {w['threshold']:g}, window {w['window']})"
                if w["final_cv"] is not None
                else ""
            )
        )

    def ci(x):
        return (
            "–"
            if not x or not x.get("median_ci95_s")
            else _e(f"{F.ms(x['median_ci95_s'][0])} – {F.ms(x['median_ci95_s'][1])}")
        )

    rows = [
        [_e(F.cold_label(p3)), _e(F.ms(d.get("cold_s"))), _e(F.ms(g("cold_s"))), ""],
        ["warm-up", wu(d), wu(r), ""],
        ["measured iterations", _e(d["iterations"]), _e(g("iterations") or "–"), ""],
    ]
    for k, label in (("p50_s", "p50 latency"), ("p90_s", "p90 latency"), ("p99_s", "p99 latency")):
        rows.append(
            [
                label,
                _e(F.ms(d[k])),
                _e(F.ms(g(k))),
                _e(F.ratio(d[k] / r[k])) if r and r.get(k) else "",
            ]
        )
    rows.append(["95% CI of the median", ci(d), ci(r), ""])
    rows.append(
        [
            "throughput (samples/s)",
            _e(F.num(d["throughput_samples_per_s"])),
            _e(F.num(g("throughput_samples_per_s"))),
            _e(F.ratio((p3.get("ratio") or {}).get("throughput_device_over_reference"))),
        ]
    )
    if d.get("fallback_share") is not None:
        rows.append(["CPU fallback share (steady state)", _e(F.pct(d["fallback_share"])), "", ""])
    out = _table(
        ["", f"device ({d['device']})", f"reference ({reference})", "device / reference"],
        rows,
        num_cols=(1, 2, 3),
    )
    out += (
        f'<p class="caption">{_e(p3["timing"])}; {p3["samples_per_iteration"]} samples per iteration. '
        f"CI: {_e(p3['ci_method'])}.</p>"
    )
    for w in p3.get("warnings", []):
        out += f'<div class="note">{_e(w)}</div>'
    return out


def _cost(c: dict) -> str:
    rows = []
    for label, x in (("device", c["device"]), ("reference", c["reference"])):
        rows.append(
            [
                label,
                _e(x["instance"]),
                _e(F.usd(x["usd_per_hour"])),
                _e(x.get("source"))
                + (f" <small>(as of {_e(x['as_of'])})</small>" if x.get("as_of") else ""),
                _e(F.num(x.get("throughput_samples_per_s"))),
                _e(F.ms(x.get("overhead_s")))
                + (
                    f"<br><small>{_e(x.get('overhead_label'))}</small>"
                    if x.get("overhead_label")
                    else ""
                ),
                _e(F.usd(x.get("usd_per_million_steady"))),
                _e(F.usd(x.get("usd_per_million"))),
            ]
        )
    out = _table(
        [
            "",
            "instance",
            "USD/h",
            "price source",
            "throughput/s",
            "one-time overhead",
            "USD / 1M (steady)",
            "USD / 1M (amortized)",
        ],
        rows,
        num_cols=(2, 4, 6, 7),
    )
    out += f'<p class="caption">{_e(c["formula"])}, amortized over {c["amortize_samples"]:,} samples.</p>'
    if c.get("budget_usd_per_million") is not None:
        out += (
            f"<p>Budget {_e(F.usd(c['budget_usd_per_million']))} per million samples: "
            + (
                _status("fail") + " exceeded"
                if c.get("over_budget")
                else _status("pass") + " within"
            )
            + "</p>"
        )
    for n in c.get("notes", []):
        out += f'<div class="note">{_e(n)}</div>'
    return out


def _baseline(b: dict | None) -> str:
    if not b:
        return "<p>No baseline given (<code>--baseline DIR</code>).</p>"
    if b.get("status") == "skipped":
        return _kv(
            [
                ("baseline", _e(b["path"])),
                ("result", _status("skipped")),
                ("reason", _e(b.get("reason"))),
            ]
        )
    rows = []
    for name, a in b.get("accuracy", {}).items():
        rows.append(
            [
                _e(f"accuracy {name}"),
                "reference + fp64 outputs",
                _e(f"max abs {F.num(a.get('max_abs'))}"),
                "identical" if a.get("identical_to_baseline_device") else "",
                _e(a.get("decided_by")),
                _status("pass" if a.get("passed") else "fail"),
            ]
        )
    comp = b.get("compiled") or {}
    rows += exact_rows(b.get("exact"))
    rows += _latency_rows(b.get("latency") or {}, "")
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
                *map(_e, F.compile_cells(cc)),
                _e(
                    f"{cc['graph_breaks']['baseline']} → {cc['graph_breaks']['current']} graph break(s)"
                ),
                "must compile",
                _status("fail" if cc["regressed"] else "pass"),
            ]
        )
    if comp:
        rows += _latency_rows(comp.get("latency") or {}, " (compiled)")
    mem = b.get("memory") or {}
    if mem.get("note"):  # not compared (a compiled peak against an eager one)
        rows.append(["peak memory (allocated)", "", "", _e(mem["note"]), "", "not compared"])
        mem = {}
    elif mem:
        rows.append(
            [
                _e(F.peak_label(mem)),
                _e(F.nbytes(mem["baseline_peak_allocated_bytes"])),
                _e(F.nbytes(mem["current_peak_allocated_bytes"])),
                _e(F.signed_pct(mem["change"])),
                _e(f"+{mem['threshold']:.0%} and +{F.nbytes(mem['min_increase_bytes'])}"),
                _status("fail" if mem["regressed"] else "pass"),
            ]
        )
    rows += [
        [_e(x) for x in cells] + ["info only" if res == "info" else _status(res)]
        for cells, res in F.training_baseline_rows(b.get("training") or {})
    ]
    out = f"<p>Baseline <code>{_e(b['path'])}</code>, saved {_e(b.get('created_utc'))}.</p>"
    out += _table(["check", "baseline", "current", "change", "threshold", "result"], rows)
    if mem:
        out += (
            f'<p class="caption">Peak memory: a regression needs both +{mem["threshold"]:.0%} and at least '
            f"{_e(F.nbytes(mem['min_increase_bytes']))} more (<code>peak_memory_min_bytes</code>): a small "
            "model's peak is a few allocator blocks, and a baseline saved before the program-order peak holds "
            "the run-ahead one, which moves by several blocks between identical runs (frees follow the device "
            "queue).</p>"
        )
    ch = b.get("changes", {})
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
            _e(F.ms(lat["baseline_p50_s"])),
            _e(F.ms(lat["current_p50_s"])),
            _e(F.signed_pct(lat["change"])),
            "" if st_all else _e(f"+{lat['threshold']:.0%}"),
            "" if st_all else _status("fail" if lat["regressed"] else "pass"),
        ]
    ]
    if lat.get("baseline_throughput_samples_per_s") and lat.get("current_throughput_samples_per_s"):
        bt, ct = lat["baseline_throughput_samples_per_s"], lat["current_throughput_samples_per_s"]
        rows.append(
            [
                _e(f"throughput{label} (samples/s, raw)"),
                _e(F.num(bt)),
                _e(F.num(ct)),
                _e(F.signed_pct(ct / bt - 1)),
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
                _e(F.num(st["baseline_value"])),
                _e(F.num(st["current_value"])),
                _e(change),
                _e(f"+{st['threshold']:.0%}"),
                res,
            ]
        )
        conf = F.confirmation_row(name, st)
        if conf:
            rows.append([_e(x) for x in conf] + [""])
    return rows


def _training(tr: dict | None, label: str = "", anchor: str = "training") -> str:
    """The training check section (empty for an inference model); the compiled mode's
    steps (``tr["compiled"]``) in a section of their own."""
    if not tr or tr.get("status") == "skipped":
        return ""
    compiled = ""
    if tr.get("compiled"):
        compiled = _training(
            tr["compiled"] | {"steps": tr["steps"], "optimizer": tr["optimizer"]},
            " (compiled, backend neuron)",
            "training-compiled",
        )
    head = f'<h2 id="{anchor}">Training{_e(label)} — {tr.get("steps")} steps {_status(tr["status"])}</h2>'
    if "per_step" not in tr:
        return head + f'<div class="note">{_e(tr.get("reason") or tr.get("note"))}</div>' + compiled
    groups = list(tr["per_step"][0]["grad_norm_device"])
    rows = [
        [
            _e(st["step"]),
            _e(f"{st['loss_device']:.6g}"),
            _e(f"{st['loss_reference']:.6g}"),
            _e(f"{st['loss_fp64']:.6g}"),
            _status("pass" if st["loss_passed"] else "fail"),
        ]
        + [
            _e(f"{st['grad_norm_device'][g]:.4g} / {st['grad_norm_reference'][g]:.4g}")
            + " "
            + _status("pass" if st["grad_norm_passed"][g] else "fail")
            for g in groups
        ]
        + [_e(F.ms(st["step_time_device_s"]))]
        for st in tr["per_step"]
    ]
    fp = tr["final_params"]
    return (
        head
        + f'<p class="caption">{_e(tr["optimizer"])}; device, reference and float64 from the same '
        "initial state, compared with phase 2's rule</p>"
        + _table(
            ["step", "loss device", "loss reference", "loss fp64", "loss"]
            + [f"|grad| {g} (device / reference)" for g in groups]
            + ["step time device"],
            rows,
        )
        + _kv(
            [
                (
                    "parameter updates (final − initial)",
                    _e(
                        f"{fp['compared'] - len(fp['failed'])}/{fp['compared']} pass"
                        + (f" (failing: {', '.join(fp['failed'][:5])})" if fp["failed"] else "")
                    ),
                ),
                ("device step p50", _e(F.ms(tr["step_time"]["device_p50_s"]))),
                ("reference step p50", _e(F.ms(tr["step_time"]["reference_p50_s"]))),
                (
                    "peak device memory with optimizer state",
                    _e(F.nbytes(tr.get("peak_allocated_bytes"))),
                ),
            ]
        )
        + compiled
    )


def _projection(p: dict | None) -> str:
    """The Trainium projection section (empty unless --projection was given)."""
    if not p or p.get("status") == "skipped":
        return ""
    head = '<h2 id="projection">Trainium projection — an estimate, not a measurement</h2>'
    if p["status"] != "pass":
        return head + f'<div class="note">{_e(p.get("reason"))}</div>'
    a, b = p["trn2"], p["trn3"]
    rows = [
        [_e(label), _e(fn(a)), _e(fn(b))]
        for label, fn in (
            ("latency per pass, one core (µs)", lambda x: f"{x['latency_s_per_core'] * 1e6:.4g}"),
            ("of which HBM weights/inputs/outputs (serial)", F.projected_serial),
            ("throughput per core (samples/s)", lambda x: F.num(x["throughput_per_core"])),
            ("priced as", F.projected_instance),
            ("throughput per instance (samples/s)", lambda x: F.num(x["throughput_per_instance"])),
            ("USD per 1M samples", F.projected_cost),
            ("GFLOP per pass", lambda x: f"{x['total_flops'] / 1e9:.3g}"),
        )
    ]
    top = [
        [
            _e(r["op"]),
            _e(r["shape"]),
            _e(r["engine"]),
            _e(f"{r['flops'] / 1e9:.3g}"),
            _e(f"{r['time_s'] * 1e6:.3g}"),
            _e(r["bound"]),
        ]
        for r in a["top_ops"]
    ]
    label, rest = F.projected_rest(a, a["top_ops"])
    if not label.startswith("0 "):
        top.append([_e(label), "", "", "", _e(rest.replace(" µs", "")), ""])
    return (
        head
        + f'<div class="note">{_e(p["note"])}. Lowered with {_e(p["how"])}.</div>'
        + _table(["", f"{a['chip']} ({a['core']})", f"{b['chip']} ({b['core']})"], rows)
        + "<h3>Top operations by projected time (Trainium2)</h3>"
        + _table(["op", "shape", "engine", "GFLOP", "time (µs)", "bound"], top)
    )


def _manifest(m: dict) -> str:
    def flat(d: dict, prefix: str = "") -> list[tuple[str, str]]:
        out = []
        for k, v in d.items():
            if isinstance(v, dict) and v:
                out += flat(v, f"{prefix}{k}.")
            else:
                out.append(
                    (f"{prefix}{k}", _e(json.dumps(v) if isinstance(v, (list, dict)) else v))
                )
        return out

    rows = flat({k: v for k, v in m.items() if k != "env" or v})
    if not m.get("env"):
        rows.append(("env", "no NEURON_* or TORCHNEURON_* variable set"))
    return _kv(rows)


def _profile_section(p: dict | None) -> str:
    return html_section(p)


def render(result: dict) -> str:
    """The page as a string."""
    m = result["model"]
    ds = result["manifest"]["device_stack"]
    p1, p2, p3 = result["phase1"], result["phase2"], result["phase3"]
    verdict = result["verdict"]
    fails = "".join(f"<li>{_e(f)}</li>" for f in result["failures"])
    if result.get("inconclusive"):
        fails += f"<li>{_e(result['inconclusive'])}</li>"
    notes = ""
    if ds.get("emulated"):
        notes += (
            '<div class="note">The device is the <b>NeuronCore emulator</b>: timings, throughput and '
            "cost below are the emulator's on this host, <b>not Trainium's</b>.</div>"
        )
    comp = p1.get("compile", {})
    if not comp.get("checked"):
        note = comp.get("note") or ""
        text = (
            (note[0].upper() + note[1:])
            if note.startswith("only eager")
            else f"Only eager mode was checked: {note}"
        )
        notes += f'<div class="note">{_e(text)}.</div>'
    for w in result.get("warnings", []):
        if w not in p3.get("warnings", []):  # those show in the phase 3 section
            notes += f'<div class="note">{_e(w)}</div>'
    plots = {
        "warmup": plot_warmup(p3) if p3.get("device") else None,
        "hist": plot_histogram(p3) if p3.get("device") else None,
        "ops": plot_ops(p1) if p1["status"] == "pass" else None,
    }
    plot_html = {k: (f'<div class="plot">{v}</div>' if v else "") for k, v in plots.items()}
    saved = (
        f"<p>Baseline saved to <code>{_e(result['baseline_saved'])}</code>.</p>"
        if result.get("baseline_saved")
        else ""
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>torchneuron check {_e(m["name"])}: {_e(verdict.upper())}</title>
<style>{CSS}</style></head>
<body><main>
<h1>torchneuron check — {_e(m["name"])}</h1>
<p class="sub">{_e(m["description"])}<br>batch {_e(m["batch_size"])} · {_e(m["dtype"])} · seed {_e(m["seed"])} ·
{m["parameters"]:,} parameters · device {_e(p1["device"])} ({_e(ds["device_name"])}, runtime {_e(ds["runtime"])}
{_e(ds["runtime_version"])}) · reference {_e(result["config"]["reference"])} · {_e(result["manifest"]["created_utc"])}</p>
<div class="verdict v-{verdict}" id="verdict"><b>{_e(verdict.upper())}</b> — exit code {result["exit_code"]}
{"<ul>" + fails + "</ul>" if fails else "<div>all phases passed" + (", no regression against the baseline" if result.get("baseline") else "") + "</div>"}</div>
{notes}{saved}
<h2 id="phase1">Phase 1 — does it run on the device {_status(p1["status"])}</h2>
{_phase1(p1)}
<h3>Host dispatch time per op</h3>
<p class="caption">{_e(p1.get("op_profile_note") or "no profile: phase 1 failed")}. CPU-fallback ops in red,
annotated with their calls and seconds (CPU kernel and copies) from <code>torch.neuron.fallback_stats()</code>.</p>
<div class="plots">{plot_html["ops"]}</div>
<h2 id="phase2">Phase 2 — is it accurate {_status(p2["status"])}</h2>
{_phase2(p2)}
{_phase2_compiled(p2)}
{_compiled_perf(p3, result.get("cost") or {})}
<h2 id="phase3">Phase 3 — stable performance after warm-up {_status(p3["status"])}</h2>
{_phase3(p3, result["config"]["reference"])}
<div class="plots">{plot_html["warmup"]}{plot_html["hist"]}</div>
{_profile_section(result.get("profile"))}
<h2 id="cost">Cost</h2>
{_cost(result["cost"])}
{_training(result.get("training"))}
{_projection(result.get("projection"))}
{exact_html.section(result)}
<h2 id="baseline">Baseline comparison</h2>
{_baseline(result.get("baseline"))}
<h2 id="manifest">Manifest</h2>
{_manifest(result["manifest"])}
</main></body></html>
"""


def write(result: dict, path: str) -> None:
    """Write the page of ``result`` to ``path`` (UTF-8)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(render(result))
