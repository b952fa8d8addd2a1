"""torchneuron check in compiled mode (issue 6): --mode eager|compile|both, and a model
whose graph cannot lower reported with the failing stage and ATen op."""
import torch

from check_support import FAST_KW, fixture, result  # noqa: F401


def test_mode_compile_measures_compiled_model_in_phases_2_and_3():
    r = result("mlp", mode="compile", **FAST_KW)
    c = r["phase1"]["compile"]
    assert c["ok"] and c["phases_2_3"] == "compiled"
    assert r["verdict"] == "pass"
    assert r["cost"]["device"]["overhead_label"].startswith("compile time")


def test_mode_eager_skips_compile():
    r = result("mlp", mode="eager", **FAST_KW)
    c = r["phase1"]["compile"]
    assert c["checked"] is False and "--mode eager" in c["note"]


def test_compile_failure_reports_stage_op_and_source():
    import os

    path = os.path.join(os.path.dirname(__file__), "fixtures", "compile_models.py")
    r = result(f"{path}:unlowerable", **FAST_KW)
    c = r["phase1"]["compile"]
    assert c["checked"] and not c["ok"]
    e = c["error"]
    assert e["compile_stage"] == "lowering" and e["op"] == "aten.erfinv.default"
    assert "compile_models.py" in e["raised_at"]
    assert r["phase1"]["status"] == "fail"     # a model that does not compile fails phase 1
