"""baseline/exact.compare on hand-made figures: each quantity's rule and message, without a
run (the runs are in test_exact_gates.py)."""

from torchneuron.check.baseline import exact
from torchneuron.check.config import DEFAULT_THRESHOLDS
from torchneuron.check.result import CheckResult
from torchneuron.check.result_exact import ExactResult
from torchneuron.check.result_projection import ProjectionResult

TH = dict(DEFAULT_THRESHOLDS)


def _side(kernels, fallbacks=None, latency=None, new_signatures=None):
    fb = fallbacks or {}
    s = {
        "kernels_by_op": kernels,
        "kernels": sum(kernels.values()),
        "graphs": 0,
        "fallbacks_by_op": fb,
        "fallback_calls": sum(fb.values()),
        "new_signatures": new_signatures if new_signatures is not None else [],
    }
    if latency is not None:
        s["projection"] = {"trn2": {"latency_s": latency, "launch_us": 20.0}}
    return s


def _compare(base_eager, cur_eager, bproj=None, cproj=None):
    bmx = {"exact": {"eager": base_eager}, "projection": bproj}
    result = CheckResult(
        exact=ExactResult("pass", eager=cur_eager),
        projection=ProjectionResult("pass", trn2={"latency_s_per_core": cproj}) if cproj else None,
    )
    return exact.compare(bmx, result, TH)


def test_launches_at_the_threshold_pass_above_it_fail_naming_the_ops():
    base = _side({"aten::addmm": 10})
    at = _compare(base, _side({"aten::addmm": 11}))  # +10 %: the limit itself
    assert not at["regressions"] and at["rows"][0]["changed"]
    above = _compare(base, _side({"aten::addmm": 12}))
    assert above["regressions"] == [
        "eager device launches per pass: 12 vs the baseline's 10 (threshold +10%); "
        "changed: aten::addmm x10 -> x12"
    ]


def test_one_more_fallback_call_fails():
    out = _compare(_side({"aten::addmm": 2}), _side({"aten::addmm": 2}, {"aten::erfc.out": 1}))
    assert out["regressions"] == [
        "eager CPU fallback calls per pass: 1 vs the baseline's 0 (threshold +0); "
        "changed: aten::erfc.out x0 -> x1"
    ]


def test_projected_times_eager_and_compiled():
    base = _side({"aten::addmm": 2}, latency=100e-6)
    out = _compare(
        base, _side({"aten::addmm": 2}, latency=111e-6), bproj={"trn2": 50e-6}, cproj=56e-6
    )
    msgs = out["regressions"]
    assert msgs[0].startswith(
        "eager projected Trainium2 time per pass: 111.0 us vs the baseline's 100.0 us"
    )
    assert msgs[1].startswith("compiled projected Trainium2 time per pass (StableHLO): 56.0 us vs")
    same = _compare(base, _side({"aten::addmm": 2}, latency=100e-6), {"trn2": 50e-6}, 50e-6)
    assert not same["regressions"] and not any(r["changed"] for r in same["rows"])


def test_new_signatures_and_an_older_baseline():
    out = _compare(
        _side({"aten::mm": 1}), _side({"aten::mm": 1}, new_signatures=["aten::mm(float[3, 4])"])
    )
    assert out["regressions"][0].startswith(
        "eager new kernel signatures after warm-up per pass: 1 vs"
    )
    old = exact.compare({"compile": None}, CheckResult(exact=ExactResult("pass")), TH)
    assert old["rows"] == [] and "save it again" in old["notes"][0]


def test_projected_times_under_other_fixed_costs_are_not_compared():
    # a baseline saved before projection/overheads.py: its eager projection had no roofline
    # factor, its compiled one no fixed cost; comparing would read the model as a regression
    base = _side({"aten::addmm": 2}, latency=100e-6)
    cur = _side({"aten::addmm": 2}, latency=300e-6)
    cur["projection"]["trn2"]["roofline_factor"] = 2.0
    fitted = {"execution_us": 60.0, "roofline_factor": 2.0}
    bmx = {"exact": {"eager": base}, "projection": {"trn2": 50e-6}}
    result = CheckResult(
        exact=ExactResult("pass", eager=cur),
        projection=ProjectionResult(
            "pass", trn2={"latency_s_per_core": 200e-6, "overheads": fitted}
        ),
    )
    out = exact.compare(bmx, result, TH)
    assert not out["regressions"]
    assert not [r for r in out["rows"] if "projected" in r["quantity"]]
    assert any("eager projected time not compared" in n and "x1" in n for n in out["notes"])
    assert any("compiled projected time not compared" in n for n in out["notes"])
    # saved again, with the same fixed costs: compared, and a heavier pass regresses
    bmx["projection"]["overheads"] = fitted
    base["projection"]["trn2"]["roofline_factor"] = 2.0
    again = exact.compare(bmx, result, TH)
    assert len(again["regressions"]) == 2 and not again["notes"]


def test_an_eager_projection_without_the_tensor_engine_utilization_is_not_compared():
    # a baseline saved before kernels.py priced matmuls at roofline.pe_utilization
    base = _side({"aten::addmm": 2}, latency=100e-6)
    cur = _side({"aten::addmm": 2}, latency=300e-6)
    cur["projection"]["trn2"]["pe_utilization"] = True
    base["projection"]["trn2"]["roofline_factor"] = cur["projection"]["trn2"].get(
        "roofline_factor", 1.0
    )
    result = CheckResult(exact=ExactResult("pass", eager=cur))
    out = exact.compare({"exact": {"eager": base}}, result, TH)
    assert not out["regressions"]
    assert any("without the TensorEngine's utilization" in n for n in out["notes"]), out
