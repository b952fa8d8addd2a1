"""torchneuron check, phase 2: are the device's results accurate (PyTorch's benchmark rule)."""

import json

import pytest
import torch
from check_support import FAST, FAST_KW, MINILM_KW, cli, fixture, result

from torchneuron.check import autocast_available
from torchneuron.check.phases.phase2 import compare, failure_text, multiplier, scaled_atol

# ------------------------------------------------------------------ the rule itself


def test_allclose_decides_first():
    r = torch.randn(100, dtype=torch.float64)
    c = compare(r.float(), r.float(), r, 1e-4, torch.float32)
    assert c["passed"] and c["allclose"] and c["decided_by"].startswith("allclose")
    assert c["max_abs"] == 0 and c["cosine"] == pytest.approx(1.0)


def test_rmse_rule_passes_when_device_error_is_like_the_reference_error():
    g = torch.randn(1000, dtype=torch.float64)
    noise = 1e-3 * torch.randn(1000, dtype=torch.float64)
    ref = (g + noise).float()
    dev = (g - noise).float()  # as far from fp64 as the reference, not allclose to it
    c = compare(dev, ref, g, 1e-4, torch.float32)
    assert not c["allclose"]
    assert c["passed"] and c["decided_by"].startswith("RMSE")
    assert c["rmse_device_fp64"] <= 2 * c["rmse_reference_fp64"] + 1e-5


def test_rmse_rule_fails_when_device_is_much_worse():
    g = torch.randn(1000, dtype=torch.float64)
    ref = (g + 1e-6 * torch.randn(1000, dtype=torch.float64)).float()
    dev = (g + 1e-2 * torch.randn(1000, dtype=torch.float64)).float()
    c = compare(dev, ref, g, 1e-4, torch.float32)
    assert not c["passed"] and c["decided_by"].startswith("RMSE")
    assert c["rmse_device_fp64"] > c["rmse_bound"]


def test_multiplier_and_relative_error():
    assert (
        multiplier(torch.float32) == 2
        and multiplier(torch.bfloat16) == 3
        and multiplier(torch.float16) == 3
    )
    r = torch.tensor([0.0, 2.0, 4.0], dtype=torch.float64)
    c = compare(torch.tensor([1e-3, 2.2, 4.0]), r.float(), r, 1e-4, torch.float32)
    assert c["max_rel"] == pytest.approx(0.1, rel=1e-5)  # zero reference element left out
    assert c["max_abs"] == pytest.approx(0.2, rel=1e-5)


def test_outputs_below_the_tolerance_are_judged_against_their_own_size():
    g = torch.softmax(0.2 * torch.randn(4, 32000, dtype=torch.float64), -1)  # elements ~3e-5
    ref = g.float()
    assert scaled_atol(g, 1e-4) == pytest.approx(1e-4 * float(g.max()))
    for wrong in (torch.zeros_like(ref), torch.full_like(ref, 1 / 32000)):
        c = compare(wrong, ref, g, 1e-4, torch.float32)
        assert not c["passed"] and not c["allclose"] and c["atol"] < 1e-8
    # float32 rounding a few ulps off the reference, and bfloat16's, still pass
    noisy = (g * (1 + 4e-7 * torch.randn_like(g))).float()
    assert compare(noisy, ref, g, 1e-4, torch.float32)["passed"]
    assert compare(g.bfloat16(), g.bfloat16(), g, 1e-2, torch.bfloat16)["passed"]
    # an output of order 1 keeps tol (the harness's rule)
    big = torch.randn(100, dtype=torch.float64)
    assert scaled_atol(big, 1e-4) == 1e-4
    assert (
        compare(big.float(), big.float(), big, 1e-4, torch.float32)["decided_by"]
        == "allclose(atol=rtol=0.0001)"
    )
    assert scaled_atol(torch.zeros(3, dtype=torch.float64), 1e-4) == 1e-4


def test_integer_outputs_compare_exactly():
    a = torch.tensor([1, 2, 3])
    assert compare(a, a, a, 1e-4, torch.float32)["passed"]
    c = compare(a, a + 1, a, 1e-4, torch.float32)
    assert not c["passed"] and "integer" in c["decided_by"]


def test_non_finite_on_both_sides_passes_with_a_warning():
    nan = torch.full((4,), float("nan"))
    c = compare(nan, nan, nan.double(), 1e-4, torch.float32)
    assert c["passed"] and c["nonfinite"] == {"device": 4, "reference": 4}
    assert "4 of 4 element(s) are NaN or infinite" in c["warning"]


def test_nan_on_the_device_where_the_reference_is_finite_fails():
    r = torch.randn(8, dtype=torch.float64)
    d = r.float().clone()
    d[3] = float("nan")
    c = compare(d, r.float(), r, 1e-4, torch.float32)
    assert (
        not c["passed"]
        and c["decided_by"] == "non-finite on the device where the reference is finite"
    )
    assert "1 of 8" in c["detail"]
    d[3] = float("inf")
    assert not compare(d, r.float(), r, 1e-4, torch.float32)["passed"]


@pytest.mark.parametrize(
    "ref", [torch.tensor([1, 2, 3]), torch.tensor([True, False, True])], ids=["int64", "bool"]
)
def test_a_dtype_mismatch_fails_whatever_the_values(ref):
    # equal values: casting the device output to the reference's dtype first passed these
    c = compare(ref.float(), ref, ref.double(), 1e-4, torch.float32)
    assert not c["passed"]
    assert c["decided_by"] == f"dtype mismatch: device float32, reference {str(ref.dtype)[6:]}"
    assert c["max_abs"] == 0 and c["rmse_bound"] is None and c["allclose"] is None
    # a float device output 0.9 away from int64 values (the reviewer's repro)
    x = torch.arange(8.0) * 10.7
    c = compare(x, x.long(), x.long(), 1e-4, torch.float32)
    assert not c["passed"] and c["max_abs"] == pytest.approx(0.9, rel=1e-4)
    r = torch.randn(8, dtype=torch.float64)
    assert not compare(r.half(), r.float(), r, 1e-2, torch.float32)["passed"]  # no autocast
    assert compare(r.float(), r.float(), r, 1e-4, torch.float32)["passed"]


def test_under_autocast_float32_against_the_autocast_dtype_is_compared():
    # the CPU's autocast lists keep a softmax/layer norm in bfloat16, the neuron device's
    # (PyTorch's shared lists) give float32: both are right
    g = torch.randn(64, dtype=torch.float64)
    c = compare(g.float(), g.bfloat16(), g, 1e-2, torch.bfloat16)
    assert c["passed"] and c["dtype"] == "float32" and c["reference_dtype"] == "bfloat16"
    assert compare(g.bfloat16(), g.float(), g, 1e-2, torch.bfloat16)["passed"]
    assert not compare((g + 0.5).float(), g.bfloat16(), g, 1e-2, torch.bfloat16)[
        "passed"
    ]  # values still judged
    for d, r, dt in (
        (g.half(), g.bfloat16(), torch.bfloat16),
        (g.float(), g.bfloat16(), torch.float32),
        (g.float(), g.half(), torch.bfloat16),
        (g, g.float(), torch.bfloat16),
    ):
        assert compare(d, r, g, 1e-2, dt)["decided_by"].startswith("dtype mismatch"), (
            d.dtype,
            r.dtype,
            dt,
        )


def test_a_shape_mismatch_fails_even_where_it_broadcasts():
    r = torch.randn(8, dtype=torch.float64)
    c = compare(r.float().reshape(1, 8), r.float(), r, 1e-4, torch.float32)
    assert not c["passed"] and c["decided_by"] == "shape mismatch" and c["max_abs"] is None
    assert "device [1, 8], reference [8]" in c["detail"]


def test_failure_text_of_early_endings():
    a = torch.tensor([1, 2, 3])
    assert (
        failure_text(compare(a, a + 1, a, 1e-4, torch.float32))
        == "exact equality (integer output); max abs 1"
    )
    assert (
        failure_text(compare(a.float(), a, a, 1e-4, torch.float32))
        == "dtype mismatch: device float32, reference int64; max abs 0"
    )
    c = compare(a.reshape(3, 1).float(), a.float(), a.double(), 1e-4, torch.float32)
    assert failure_text(c) == "shape mismatch (device [3, 1], reference [3], fp64 [3])"


# ------------------------------------------------------------------ on models


def _assert_accurate(p2, names):
    assert p2.status == "pass", p2
    assert p2.reference_device == "cpu" and p2.dtype == "float32" and p2.tol == 1e-4
    assert set(p2.outputs) == set(names)
    for o in p2.outputs.values():
        assert o["passed"] and o["decided_by"]
        assert o["cosine"] > 0.99999
        assert o["rmse_device_fp64"] >= 0 and o["rmse_reference_fp64"] >= 0


def test_mlp_accurate():
    _assert_accurate(result("mlp", **FAST_KW).phase2, ["output"])


def test_minilm_accurate():
    p2 = result("minilm", **MINILM_KW).phase2
    _assert_accurate(p2, ["output"])
    # float32 embeddings agree with the CPU to float32 rounding
    assert p2.outputs["output"]["max_abs"] < 1e-5


def test_nested_outputs_and_positional_inputs():
    r = result(fixture("positional"), **FAST_KW)
    assert r.phase1.status == "pass", r.phase1.error
    p2 = r.phase2
    assert set(p2.outputs) == {"output[0]", "output[1].hidden", "output[1].count"}
    assert p2.outputs["output[1].count"]["decided_by"] == "exact equality (integer output)"
    assert p2.status == "pass"


def test_an_output_dtype_that_differs_on_the_device_fails_phase_2():
    r = result(fixture("dtype_differs"), mode="eager", **FAST_KW)
    outs = r.phase2.outputs
    assert outs["ids"]["decided_by"] == "dtype mismatch: device float32, reference int64"
    assert outs["mask"]["decided_by"] == "dtype mismatch: device float32, reference bool"
    assert not any(o["passed"] for o in outs.values()) and outs["ids"]["max_abs"] == 0
    assert r.exit_code == 1


def test_a_device_returning_zeros_for_tiny_probabilities_fails_phase_2():
    ok = result(fixture("tiny_softmax"), mode="eager", **FAST_KW).phase2
    assert ok.status == "pass", ok.outputs
    bad = result(fixture("tiny_softmax_zeros"), mode="eager", **FAST_KW)
    o = bad.phase2.outputs["output"]
    assert not o["passed"] and o["decided_by"].startswith("RMSE") and o["max_abs"] < 1e-4
    assert bad.exit_code == 1


def test_planted_accuracy_regression_is_caught():
    r = result(fixture("perturbed"), **FAST_KW)
    p2 = r.phase2
    assert p2.status == "fail"
    o = p2.outputs["output"]
    assert not o["passed"] and not o["allclose"] and o["decided_by"].startswith("RMSE")
    assert o["max_abs"] == pytest.approx(0.05, rel=1e-3)
    assert r.exit_code == 1
    assert any(f.startswith("phase 2") for f in r.failures)


def test_planted_accuracy_regression_exit_code():
    code, out, err = cli("check", fixture("perturbed"), *FAST, "--details")
    assert code == 1, err
    assert "Phase 2" in out and "FAIL" in out


def test_tol_override_is_used():
    r = result(fixture("perturbed"), tol=0.1, **FAST_KW)
    p2 = r.phase2
    assert p2.tol == 0.1 and p2.tol_source == "--tol"
    o = p2.outputs["output"]
    # the outputs are below 1: atol is tol scaled to their size
    assert p2.status == "pass" and 0.05 < o["atol"] < 0.1
    assert o["decided_by"] == f"allclose(atol={o['atol']:.3g}, rtol=0.1)"


# ------------------------------------------------------------------ lower precision (autocast)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_lower_precision_under_autocast(dtype):
    if not autocast_available(getattr(torch, dtype)):
        pytest.skip(f"torch.autocast('neuron', {dtype}) does not change a matmul's dtype yet")
    r = result("mlp", dtype=dtype, **FAST_KW)
    p2 = r.phase2
    assert p2.dtype == dtype and p2.multiplier == 3
    assert p2.tol == {"bfloat16": 1e-2, "float16": 1e-3}[dtype]
    assert p2.status == "pass", p2.outputs
    assert r.phase3.status == "pass"


def test_autocast_probe_is_a_bool():
    assert autocast_available(torch.bfloat16) in (True, False)


def test_all_nan_outputs_are_flagged(tmp_path):
    out_json = tmp_path / "r.json"
    code, out, err = cli("check", fixture("all_nan"), *FAST, "--json", out_json)
    assert code == 0, out + err
    assert "warning: phase 2: output 'output': 32 of 32 element(s) are NaN or infinite" in out
    r = json.loads(out_json.read_text())
    assert any("NaN or infinite" in w for w in r["warnings"])
    assert r["phase2"]["outputs"]["output"]["nonfinite"] == {"device": 32, "reference": 32}


def test_nan_on_the_device_only_fails_phase_2():
    r = result(fixture("nan_on_device"), **FAST_KW)
    o = r.phase2.outputs["output"]
    assert not o["passed"] and o["decided_by"].startswith("non-finite on the device")
    assert r.exit_code == 1
