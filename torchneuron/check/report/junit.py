"""The result as JUnit XML (``--junit FILE``) for CI systems: one test suite, one test case
per phase part, the baseline comparisons and the cost budget; skipped parts as skipped."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import replace

from ..phases.phase2 import failure_text
from ..result import CheckResult


def _case(
    suite: ET.Element,
    classname: str,
    name: str,
    time_s: float = 0.0,
    failure: str | None = None,
    detail: str = "",
    skipped: str | None = None,
    out: str = "",
) -> None:
    c = ET.SubElement(suite, "testcase", classname=classname, name=name, time=f"{time_s:.6f}")
    if failure is not None:
        f = ET.SubElement(c, "failure", message=failure[:1000], type="failure")
        f.text = detail or failure
    elif skipped is not None:
        ET.SubElement(c, "skipped", message=skipped[:1000])
    if out:
        ET.SubElement(c, "system-out").text = out


def build(result: CheckResult) -> ET.Element:
    """The ``<testsuites>`` element of a result."""
    model = result.model["name"]
    cls = f"torchneuron.check.{model}"
    root = ET.Element("testsuites", name="torchneuron check")
    suite = ET.SubElement(root, "testsuite", name=f"torchneuron check {model}")

    _phase1_cases(suite, cls, result)
    _phase2_cases(suite, cls, result)
    _phase3_cases(suite, cls, result)
    _baseline_cases(suite, cls, result)
    _compiled_performance_case(suite, cls, result)
    _training_cases(suite, cls, result)
    _cost_case(suite, cls, result)
    _totals(root, suite, result)
    return root


def _phase1_cases(suite: ET.Element, cls: str, result: CheckResult) -> None:
    """Phase 1: runs on the device, torch.compile."""
    p1 = result.phase1
    e = p1.error
    _case(
        suite,
        cls,
        "phase1.runs_on_device",
        p1.cold_latency_s or 0.0,
        failure=(
            f"{e['type']}{' in ' + e['op'] if e['op'] else ''} during {e['stage']}: "
            f"{e['message'].splitlines()[0] if e['message'] else ''}"
        )
        if e
        else None,
        detail=(e["traceback"] if e else ""),
        out=f"fallback ops: {', '.join(p1.fallback['ops']) or 'none'}; narrowing: "
        f"{p1.narrowing or 'none'}; peak allocated bytes: {p1.memory['peak_allocated_bytes']}",
    )
    comp = p1.compile
    if comp.checked:
        _case(
            suite,
            cls,
            "phase1.torch_compile",
            comp.compile_s or 0.0,
            failure=None if comp.ok else "torch.compile(backend='neuron') failed",
        )
    else:
        _case(suite, cls, "phase1.torch_compile", skipped=comp.note or "not checked")


def _phase2_cases(suite: ET.Element, cls: str, result: CheckResult) -> None:
    """Phase 2: one case per output (eager, and compiled under ``--mode both``)."""
    p2 = result.phase2
    if p2.status == "skipped":
        _case(suite, cls, "phase2.accuracy", skipped=p2.reason or "skipped")
    else:
        parts = [("phase2.accuracy", p2.outputs)] + (
            [("phase2.compiled.accuracy", p2.compiled["outputs"])] if p2.compiled else []
        )
        for case, outs in parts:
            for name, o in outs.items():
                msg = None if o.get("passed") else f"{name}: {failure_text(o)}"
                _case(
                    suite,
                    cls,
                    f"{case}[{name}]",
                    failure=msg,
                    out=f"decided by {o.get('decided_by')}; cosine {o.get('cosine')}",
                )


def _phase3_cases(suite: ET.Element, cls: str, result: CheckResult) -> None:
    """Phase 3: the device's performance."""
    p3 = result.phase3
    if p3.status == "skipped":
        _case(suite, cls, "phase3.performance", skipped=p3.reason or "skipped")
    else:
        d = p3.device or {}
        _case(
            suite,
            cls,
            "phase3.performance",
            d.get("total_s") or 0.0,
            failure=p3.reason if p3.status == "fail" else None,
            out=f"p50 {d.get('p50_s')} s, p90 {d.get('p90_s')} s, p99 {d.get('p99_s')} s, "
            f"throughput {d.get('throughput_samples_per_s')} samples/s",
        )


def _baseline_cases(suite: ET.Element, cls: str, result: CheckResult) -> None:
    """The baseline comparison: accuracy per output, the exact gates, latency, compile, memory, training."""
    b = result.baseline
    if not b:
        return
    if b.status == "skipped":
        _case(suite, cls, "baseline", skipped=b.reason or "skipped")
    else:
        for name, a in (b.accuracy or {}).items():
            _case(
                suite,
                cls,
                f"baseline.accuracy[{name}]",
                failure=None
                if a.get("passed")
                else f"{name} does not match the baseline ({failure_text(a)})",
            )
        comp = b.compiled or {}
        parts = (
            ("latency", b.latency, ("latency:", "latency,")),
            ("compiled.compile", comp.get("compile"), ("compile:",)),
            ("compiled.latency", comp.get("latency"), ("latency (compiled)",)),
            ("memory", b.memory, ("memory",)),
            ("training", b.training, ("training memory",)),
        )
        for r in (b.exact or {}).get("rows", []):  # the exact gates, one case each
            _case(
                suite,
                cls,
                f"baseline.exact[{r['quantity']}]",
                failure=next(
                    (m for m in b.exact["regressions"] if m.startswith(r["quantity"] + ":")),
                    None,
                ),
            )
        for key, x, prefixes in parts:
            x = x or {}
            msg = next((r for r in b.regressions if r.startswith(prefixes)), None)
            if x.get("gated") is False:  # the emulator's host time, shown only
                _case(suite, cls, f"baseline.{key}", skipped=x["host_time_note"])
            elif x.get("regressed") is None or "note" in x:
                _case(suite, cls, f"baseline.{key}", skipped=x.get("note", "not compared"))
            elif x.get("decision") == "undecided":
                _case(
                    suite,
                    cls,
                    f"baseline.{key}",
                    skipped=result.inconclusive or "inconclusive",
                )
            else:
                _case(suite, cls, f"baseline.{key}", failure=msg if x.get("regressed") else None)


def _compiled_performance_case(suite: ET.Element, cls: str, result: CheckResult) -> None:
    """Phase 3's compiled model (``--mode both``)."""
    pc = result.phase3.compiled if result.phase3 else None
    if pc:
        _case(
            suite,
            cls,
            "phase3.compiled.performance",
            pc.get("total_s") or 0.0,
            failure=pc.get("reason") if pc.get("status") == "fail" else None,
        )


def _training_cases(suite: ET.Element, cls: str, result: CheckResult) -> None:
    """The training check, eager and compiled."""
    tr = result.training
    if tr is not None and tr.status != "skipped":
        eager = replace(tr, **(tr.eager_verdict or {}))  # without compiled's failure text
        parts = [
            ("training.eager", eager if "eager" in (tr.modes or ["eager"]) else None),
            ("training.compiled", tr.compiled),
        ]
        for name, part in parts:
            if part is None:
                continue
            t = sum(s["step_time_device_s"] for s in part.per_step or [])
            _case(
                suite,
                cls,
                name,
                t,
                failure=(part.reason if part.status == "fail" else None),
            )


def _cost_case(suite: ET.Element, cls: str, result: CheckResult) -> None:
    """The cost budget (``--max-cost-per-million``)."""
    c = result.cost
    if c is not None and c.budget_usd_per_million is not None:
        _case(
            suite,
            cls,
            "cost.budget",
            failure=(
                f"{c.device.get('usd_per_million')} USD per million > {c.budget_usd_per_million}"
            )
            if c.over_budget
            else None,
        )


def _totals(root: ET.Element, suite: ET.Element, result: CheckResult) -> None:
    """The suite's and the root's counts of tests, failures, skipped, and the time."""
    cases = suite.findall("testcase")
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(1 for x in cases if x.find("failure") is not None)))
    suite.set("errors", "0")
    suite.set("skipped", str(sum(1 for x in cases if x.find("skipped") is not None)))
    suite.set("time", f"{result.elapsed_s or 0.0:.3f}")
    for k in ("tests", "failures", "errors", "skipped", "time"):
        root.set(k, suite.get(k))


def write(result: CheckResult, path: str) -> None:
    """Write the JUnit XML of ``result`` to ``path`` (UTF-8)."""
    tree = ET.ElementTree(build(result))
    ET.indent(tree)
    tree.write(path, encoding="utf-8", xml_declaration=True)
