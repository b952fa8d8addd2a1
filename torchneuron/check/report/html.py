"""The HTML report (``--html FILE``): one self-contained page (inline CSS, plots as inline
SVG, no scripts, nothing fetched) in the terminal's order: the verdict, one row per phase,
the findings (``summary_html.py``); then the details: the three phases, the cost, the
projection, the per-pass trace, the baseline comparison with the kernel trace diff, the
plots (warm-up curve, latency histogram, host time per operator with CPU fallbacks
highlighted) and the manifest."""

from __future__ import annotations

import json
from dataclasses import replace

from .. import formatting
from ..result import CheckResult, Phase1Result
from ..result_compile import CompileCheckResult
from ..result_cost import CostResult
from ..result_phases import Phase2Result, Phase3Result
from ..result_projection import ProjectionResult
from ..result_training import TrainingResult
from . import exact_html, summary_html
from .html_baseline import _baseline
from .html_parts import _e, _kv, _status, _table
from .html_plots import plot_histogram, plot_ops, plot_warmup
from .profile_html import html_section

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;color:#1d2330;background:#f5f6f8}
main{max-width:1180px;margin:0 auto;padding:24px}
h1{font-size:1.6em;margin:0 0 4px} h2{margin:28px 0 8px;font-size:1.25em;border-bottom:2px solid #dde1e7;padding-bottom:4px}
.sub{color:#5a6372;margin:0 0 16px}
h2.details{font-size:1.5em;margin-top:40px;border-bottom:3px solid #1d2330}
tr.changed td{background:#fff3f0}
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

# ---------------------------------------------------------------- sections


def _compile_cell(comp: CompileCheckResult) -> str:
    """Phase 1's torch.compile cell: graphs, breaks, compile times, or where it failed."""
    if comp.ok:
        return _status("pass") + _e(
            f" {formatting.graphs_ran(comp)}, {comp.graph_breaks} graph break(s), "
            f"{comp.recompiles} recompile(s); cold compile {formatting.ms(comp.compile_s, 1)}, "
            f"warm (cache hit) {formatting.ms(comp.warm_compile_s, 1)}; max |Δ| vs eager "
            f"{comp.max_abs_diff_vs_eager}"
        )
    err = comp.error or {}
    return _status("fail") + _e(
        " at "
        + str(err.get("compile_stage") or err.get("stage"))
        + (f", op {err['op']}" if err.get("op") else "")
    )


def _failure(e: dict | None) -> str:
    """Phase 1's failure: type, stage, failing op, where raised, message, traceback."""
    if not e:
        return ""
    return (
        f'<h3 class="fail">Failure: {_e(e["type"])} during {_e(e["stage"])}</h3>'
        + _kv(
            [
                (
                    "failing op",
                    _e(e["op"] or "none identified (raised outside an ATen operator)")
                    + (f" <small>({_e(e.get('op_source'))})</small>" if e.get("op_source") else ""),
                ),
                ("raised at", _e(e.get("raised_at"))),
            ]
            + ([("reference", _e(e["reference"]))] if e.get("reference") else [])
            + [("message", f"<pre>{_e(e['message'])}</pre>")]
        )
        + f"<pre>{_e(e['traceback'])}</pre>"
    )


def _phase1(p1: Phase1Result) -> str:
    comp = p1.compile
    m = p1.memory
    det = p1.determinism
    fb = p1.fallback
    rows = [
        ("result", _status(p1.status)),
        ("device", _e(p1.device)),
        (
            "mode",
            (
                "eager and compile; phases 2 and 3 "
                + ("compiled" if comp.phases_2_3 == "compiled" else "eager")
            )
            if comp.checked
            else "eager" + f" — {_e(comp.note)}",
        ),
        *([("torch.compile", _compile_cell(comp))] if comp.checked else []),
        ("fallback mode", _e(p1.fallback_mode)),
        (
            "cold latency (" + ("eager " if comp.checked else "") + "first iteration)",
            _e(formatting.ms(p1.cold_latency_s)),
        ),
        (
            "CPU fallback ops",
            "none"
            if not fb["ops"]
            else _e(
                f"{len(fb['ops'])} op(s), {formatting.ms(fb['total_seconds'])} = {formatting.pct(fb['share'])} of device run time"
            ),
        ),
        ("64-bit narrowing", _e(formatting.narrowing(p1))),
        ("peak device memory", _e(formatting.peak_memory(m))),
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
            _e(", ".join(f"{o['name']} {o['shape']} {o['dtype']}" for o in p1.outputs)),
        ),
    ]
    out = _kv(rows)
    if fb["ops"]:
        out += "<h3>CPU fallback ops</h3>" + _table(
            ["op", "calls", "seconds", "share of device run time"],
            [
                [
                    _e(k),
                    _e(v["calls"]),
                    _e(formatting.ms(v["seconds"])),
                    _e(formatting.pct(v["share"])),
                ]
                for k, v in fb["ops"].items()
            ],
            num_cols=(1, 2, 3),
        )
    if p1.warnings:
        out += (
            "<h3>Warnings raised during the device runs</h3><ul>"
            + "".join(f"<li><code>{_e(w)}</code></li>" for w in p1.warnings)
            + "</ul>"
        )
    return out + _failure(p1.error)


def _compiled_perf(p3: Phase3Result, cost: CostResult | None) -> str:
    """--mode both: the compiled model's phase-3 statistics and amortized cost (empty otherwise)."""
    c, k = p3.compiled, (cost.compiled if cost else None)
    if not c or not c.get("p50_s"):
        return ""
    d = p3.device
    rows = [
        (label, _e(formatting.ms(c[key])) + " (eager " + _e(formatting.ms(d[key])) + ")")
        for key, label in (
            ("p50_s", "p50 latency"),
            ("p90_s", "p90 latency"),
            ("p99_s", "p99 latency"),
        )
    ]
    rows.append(
        (
            "throughput (samples/s)",
            _e(formatting.num(c["throughput_samples_per_s"]))
            + " (eager "
            + _e(formatting.num(d["throughput_samples_per_s"]))
            + ")",
        )
    )
    if k:
        rows += [
            ("cold compile time (amortized)", _e(formatting.ms(k["overhead_s"]))),
            ("USD per 1M samples, amortized", _e(formatting.usd(k["usd_per_million"]))),
        ]
    return '<h2 id="phase3-compiled">Phase 3 (compiled, backend neuron)</h2>' + _kv(rows)


def _phase2_compiled(p2: Phase2Result) -> str:
    """--mode both: the compiled model's accuracy table (empty otherwise)."""
    c = p2.compiled
    if not c:
        return ""
    return (
        f'<h2 id="phase2-compiled">Phase 2 (compiled, backend neuron) — is it accurate {_status(c["status"])}'
        f"</h2>\n{_phase2(replace(p2, status=c['status'], outputs=c['outputs']))}"
    )


def _phase2(p2: Phase2Result) -> str:
    if p2.status == "skipped":
        return _kv([("result", _status("skipped")), ("reason", _e(p2.reason))])
    rows = []
    for name, o in p2.outputs.items():
        rows.append(
            [
                _e(name),
                _e(o.get("shape")),
                _e(formatting.num(o.get("max_abs"))),
                _e(formatting.num(o.get("max_rel"))),
                "–" if o.get("cosine") is None else _e(f"{o['cosine']:.7f}"),
                _e(formatting.num(o.get("rmse_device_fp64"))),
                _e(formatting.num(o.get("rmse_reference_fp64"))),
                _e(formatting.num(o.get("rmse_bound"))),
                _e(o.get("decided_by")),
                _status("pass" if o.get("passed") else "fail"),
            ]
        )
    return _kv(
        [
            ("result", _status(p2.status)),
            ("reference", _e(p2.reference_device)),
            ("dtype", _e(p2.dtype)),
            ("rule", _e(p2.rule)),
            ("tol", _e(f"{p2.tol:g} ({p2.tol_source}), m = {p2.multiplier:g}")),
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


def _phase3(p3: Phase3Result, reference: str) -> str:
    if not p3.device:
        return _kv([("result", _status(p3.status)), ("reason", _e(p3.reason))])
    d, r = p3.device, p3.reference
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
            else _e(
                f"{formatting.ms(x['median_ci95_s'][0])} – {formatting.ms(x['median_ci95_s'][1])}"
            )
        )

    rows = [
        [
            _e(formatting.cold_label(p3)),
            _e(formatting.ms(d.get("cold_s"))),
            _e(formatting.ms(g("cold_s"))),
            "",
        ],
        ["warm-up", wu(d), wu(r), ""],
        ["measured iterations", _e(d["iterations"]), _e(g("iterations") or "–"), ""],
    ]
    for k, label in (("p50_s", "p50 latency"), ("p90_s", "p90 latency"), ("p99_s", "p99 latency")):
        rows.append(
            [
                label,
                _e(formatting.ms(d[k])),
                _e(formatting.ms(g(k))),
                _e(formatting.ratio(d[k] / r[k])) if r and r.get(k) else "",
            ]
        )
    rows.append(["95% CI of the median", ci(d), ci(r), ""])
    rows.append(
        [
            "throughput (samples/s)",
            _e(formatting.num(d["throughput_samples_per_s"])),
            _e(formatting.num(g("throughput_samples_per_s"))),
            _e(formatting.ratio((p3.ratio or {}).get("throughput_device_over_reference"))),
        ]
    )
    if d.get("fallback_share") is not None:
        rows.append(
            ["CPU fallback share (steady state)", _e(formatting.pct(d["fallback_share"])), "", ""]
        )
    out = _table(
        ["", f"device ({d['device']})", f"reference ({reference})", "device / reference"],
        rows,
        num_cols=(1, 2, 3),
    )
    out += (
        f'<p class="caption">{_e(p3.timing)}; {p3.samples_per_iteration} samples per iteration. '
        f"CI: {_e(p3.ci_method)}.</p>"
    )
    for w in p3.warnings:
        out += f'<div class="note">{_e(w)}</div>'
    return out


def _cost(c: CostResult) -> str:
    rows = []
    for label, x in (("device", c.device), ("reference", c.reference)):
        rows.append(
            [
                label,
                _e(x["instance"]),
                _e(formatting.usd(x["usd_per_hour"])),
                _e(x.get("source"))
                + (f" <small>(as of {_e(x['as_of'])})</small>" if x.get("as_of") else ""),
                _e(formatting.num(x.get("throughput_samples_per_s"))),
                _e(formatting.ms(x.get("overhead_s")))
                + (
                    f"<br><small>{_e(x.get('overhead_label'))}</small>"
                    if x.get("overhead_label")
                    else ""
                ),
                _e(formatting.usd(x.get("usd_per_million_steady"))),
                _e(formatting.usd(x.get("usd_per_million"))),
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
    out += f'<p class="caption">{_e(c.formula)}, amortized over {c.amortize_samples:,} samples.</p>'
    if c.budget_usd_per_million is not None:
        out += (
            f"<p>Budget {_e(formatting.usd(c.budget_usd_per_million))} per million samples: "
            + (_status("fail") + " exceeded" if c.over_budget else _status("pass") + " within")
            + "</p>"
        )
    for n in c.notes:
        out += f'<div class="note">{_e(n)}</div>'
    return out


def _training(tr: TrainingResult | None, label: str = "", anchor: str = "training") -> str:
    """The training check section (empty for an inference model); the compiled mode's
    steps (``tr.compiled``) in a section of their own."""
    if not tr or tr.status == "skipped":
        return ""
    compiled = ""
    if tr.compiled:
        compiled = _training(
            replace(tr.compiled, steps=tr.steps, optimizer=tr.optimizer),
            " (compiled, backend neuron)",
            "training-compiled",
        )
    head = f'<h2 id="{anchor}">Training{_e(label)} — {tr.steps} steps {_status(tr.status)}</h2>'
    if tr.per_step is None:
        return head + f'<div class="note">{_e(tr.reason or tr.note)}</div>' + compiled
    groups = list(tr.per_step[0]["grad_norm_device"])
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
        + [_e(formatting.ms(st["step_time_device_s"]))]
        for st in tr.per_step
    ]
    fp = tr.final_params
    return (
        head
        + f'<p class="caption">{_e(tr.optimizer)}; device, reference and float64 from the same '
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
                ("device step p50", _e(formatting.ms(tr.step_time["device_p50_s"]))),
                ("reference step p50", _e(formatting.ms(tr.step_time["reference_p50_s"]))),
                (
                    "peak device memory with optimizer state",
                    _e(formatting.nbytes(tr.peak_allocated_bytes)),
                ),
            ]
        )
        + compiled
    )


def _projection(p: ProjectionResult | None) -> str:
    """The Trainium projection section (empty unless --projection was given)."""
    if not p or p.status == "skipped":
        return ""
    head = '<h2 id="projection">Trainium projection — an estimate, not a measurement</h2>'
    if p.status != "pass":
        return head + f'<div class="note">{_e(p.reason)}</div>'
    a, b = p.trn2, p.trn3
    rows = [
        [_e(label), _e(fn(a)), _e(fn(b))]
        for label, fn in (
            ("latency per pass, one core (µs)", lambda x: f"{x['latency_s_per_core'] * 1e6:.4g}"),
            ("of which HBM weights/inputs/outputs (serial)", formatting.projected_serial),
            ("throughput per core (samples/s)", lambda x: formatting.num(x["throughput_per_core"])),
            ("priced as", formatting.projected_instance),
            (
                "throughput per instance (samples/s)",
                lambda x: formatting.num(x["throughput_per_instance"]),
            ),
            ("USD per 1M samples", formatting.projected_cost),
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
    label, rest = formatting.projected_rest(a, a["top_ops"])
    if not label.startswith("0 "):
        top.append([_e(label), "", "", "", _e(rest.replace(" µs", "")), ""])
    return (
        head
        + f'<div class="note">{_e(p.note)}. Lowered with {_e(p.how)}.</div>'
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


def render(result: CheckResult) -> str:
    """The page as a string."""
    m = result.model
    ds = result.manifest["device_stack"]
    p1, p2, p3 = result.phase1, result.phase2, result.phase3
    verdict = result.verdict
    notes = ""
    if ds.get("emulated"):
        notes += (
            '<div class="note">The device is the <b>NeuronCore emulator</b>: timings, throughput and '
            "cost below are the emulator's on this host, <b>not Trainium's</b>.</div>"
        )
    comp = p1.compile
    if not comp.checked:
        note = comp.note or ""
        text = (
            (note[0].upper() + note[1:])
            if note.startswith("only eager")
            else f"Only eager mode was checked: {note}"
        )
        notes += f'<div class="note">{_e(text)}.</div>'
    for w in result.warnings:
        if w not in p3.warnings:  # those show in the phase 3 section
            notes += f'<div class="note">{_e(w)}</div>'
    plots = {
        "warmup": plot_warmup(p3) if p3.device else None,
        "hist": plot_histogram(p3) if p3.device else None,
        "ops": plot_ops(p1) if p1.status == "pass" else None,
    }
    plot_html = {k: (f'<div class="plot">{v}</div>' if v else "") for k, v in plots.items()}
    saved = (
        f"<p>Baseline saved to <code>{_e(result.baseline_saved)}</code>.</p>"
        if result.baseline_saved
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
{m["parameters"]:,} parameters · device {_e(p1.device)} ({_e(ds["device_name"])}, runtime {_e(ds["runtime"])}
{_e(ds["runtime_version"])}) · reference {_e(result.config["reference"])} · {_e(result.manifest["created_utc"])}</p>
{summary_html.section(result)}
{notes}{saved}
<h2 id="details" class="details">Details</h2>
<h2 id="phase1">Phase 1 — does it run on the device {_status(p1.status)}</h2>
{_phase1(p1)}
<h3>Host dispatch time per op</h3>
<p class="caption">{_e(p1.op_profile_note or "no profile: phase 1 failed")}. CPU-fallback ops in red,
annotated with their calls and seconds (CPU kernel and copies) from <code>torch.neuron.fallback_stats()</code>.</p>
<div class="plots">{plot_html["ops"]}</div>
<h2 id="phase2">Phase 2 — is it accurate {_status(p2.status)}</h2>
{_phase2(p2)}
{_phase2_compiled(p2)}
{_compiled_perf(p3, result.cost)}
<h2 id="phase3">Phase 3 — stable performance after warm-up {_status(p3.status)}</h2>
{_phase3(p3, result.config["reference"])}
<div class="plots">{plot_html["warmup"]}{plot_html["hist"]}</div>
{html_section(result.profile)}
<h2 id="cost">Cost</h2>
{_cost(result.cost)}
{_training(result.training)}
{_projection(result.projection)}
{exact_html.section(result)}
<h2 id="baseline">Baseline comparison</h2>
{_baseline(result.baseline)}
<h2 id="manifest">Manifest</h2>
{_manifest(result.manifest)}
</main></body></html>
"""


def write(result: CheckResult, path: str) -> None:
    """Write the page of ``result`` to ``path`` (UTF-8)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(render(result))
