"""torchneuron check, machine-readable outputs: --json (strict JSON, the whole result) and
--junit (JUnit XML for CI)."""

import json
import xml.etree.ElementTree as ET

from check_support import FAST, cli, fixture, needs_fallback_op


def _run(tmp_path, model, *extra):
    j, x = tmp_path / "r.json", tmp_path / "r.xml"
    code, out, err = cli("check", model, *FAST, "--json", j, "--junit", x, *extra)
    return code, json.loads(j.read_text()), ET.parse(x).getroot(), out + err


def _strict_json(path):
    def bad(v):
        raise ValueError(f"non-standard JSON constant {v}")

    return json.loads(path.read_text(), parse_constant=bad)


def test_json_and_junit_for_a_pass(tmp_path):
    code, r, x, log = _run(tmp_path, "mlp")
    assert code == 0, log
    _strict_json(tmp_path / "r.json")
    assert r["schema"] == "torchneuron.check.result/1"
    assert r["verdict"] == "pass" and r["exit_code"] == 0 and r["failures"] == []
    for key in ("config", "model", "manifest", "thresholds", "phase1", "phase2", "phase3", "cost"):
        assert key in r
    assert len(r["phase3"]["device"]["times_s"]) == 20
    assert x.tag == "testsuites" and x.get("failures") == "0"
    names = [c.get("name") for c in x.iter("testcase")]
    assert {
        "phase1.runs_on_device",
        "phase1.torch_compile",
        "phase2.accuracy[output]",
        "phase3.performance",
    } <= set(names)
    comp = next(c for c in x.iter("testcase") if c.get("name") == "phase1.torch_compile")
    assert comp.find("skipped") is None and comp.find("failure") is None  # compiled and ran


def test_json_and_junit_for_a_device_failure(tmp_path):
    op = needs_fallback_op()
    code, r, x, log = _run(tmp_path, fixture("falls_back"), "--fallback", "error")
    assert code == 1, log
    assert r["verdict"] == "fail" and r["exit_code"] == 1
    assert r["phase1"]["error"]["op"].startswith(f"aten::{op}")
    assert int(x.get("failures")) == 1 and int(x.get("skipped")) >= 2
    case = next(c for c in x.iter("testcase") if c.get("name") == "phase1.runs_on_device")
    f = case.find("failure")
    assert f"aten::{op}" in f.get("message") and "Traceback" in f.text
    skipped = {c.get("name") for c in x.iter("testcase") if c.find("skipped") is not None}
    assert {"phase2.accuracy", "phase3.performance"} <= skipped


def test_junit_for_an_accuracy_failure_and_budget(tmp_path):
    code, r, x, log = _run(tmp_path, fixture("perturbed"), "--max-cost-per-million", "1e-9")
    assert code == 1, log
    failed = {c.get("name") for c in x.iter("testcase") if c.find("failure") is not None}
    # --mode both: the compiled model is the same perturbed model, so it fails as well
    assert failed == {"phase2.accuracy[output]", "phase2.compiled.accuracy[output]", "cost.budget"}
    assert len(r["failures"]) == 3
