"""CI subset of the OpInfo conformance sweep (tests/device/conformance_sweep.py; the
whole sweep is `make conformance`, its report docs/conformance.md): common
operators of real models in every configuration (float32, bfloat16, float16,
int64 with and without narrowing, bool), each check of TestCommon's kind
(functional, noncontiguous, in-place, out=, gradients), neuron vs the CPU; and
conformance_extra's checks (issue 23): gradients of strided samples, out=
aliasing an input, a CPU operand beside neuron ones, channels_last_3d."""

import conformance_extra as extra
import pytest
from conformance_extra import EXTRA_CHECKS
from conformance_sweep import CONFIGS, OPS, Outcome, _op_id, check, render, sweep_op

CI_OPS = [
    "add",
    "mul",
    "div.no_rounding_mode",
    "sub",
    "abs",
    "neg",
    "exp",
    "where",
    "sum",
    "mean",
    "amax",
    "argmax",
    "softmax",
    "nn.functional.gelu",
    "nn.functional.layer_norm",
    "matmul",
    "nn.functional.linear",
    "cat",
    "index_select",
    "gather",
    "masked_fill",
    "nonzero",
    "cumsum",
    "clamp",
    "eq",
    "nn.functional.embedding",
    "transpose",
    "tril",
    "addr",
    "log_softmax.with_dtype",
    "native_batch_norm",
    "nn.functional.conv2d",
    "nn.functional.avg_pool2d",
    "index_put",
    "index_fill",
    "take",
    # issue 23's: strided gradients of a LAPACK fallback, out= aliasing, a CPU
    # operand, channels_last_3d through native and fallback kernels
    "linalg.det",
    "masked_select",
    "vdot",
    "nn.functional.avg_pool3d",
    "nn.functional.conv3d",
]
BY_NAME = {_op_id(o): o for o in OPS}


@pytest.mark.parametrize("name", CI_OPS)
def test_conformance(name):
    assert name in BY_NAME, f"no OpInfo {name} in this PyTorch"
    record = {}
    sweep_op(BY_NAME[name], tuple(CONFIGS), 2, record)
    counted = sum(
        c["pass"] + c["fail"] + c["designed"] for k, c in record.items() if isinstance(k, tuple)
    )
    assert counted > 0, "no check ran"
    assert not record.get("failures"), "\n".join(record["failures"])


def test_the_extra_checks_run_in_the_subset():
    record = {}
    for name in ("linalg.det", "masked_select", "nn.functional.avg_pool3d", "vdot"):
        sweep_op(BY_NAME[name], ("float32",), 2, record)
    for kind in EXTRA_CHECKS:
        c = record.get(("float32", kind), {})
        assert c.get("pass", 0) > 0, (kind, record.get("failures"))


def test_extra_checks_catch_what_issue_23_found():
    import torch
    from torch.testing._internal.opinfo.core import SampleInput

    class AcceptsCpu:  # computes with a CPU operand (vdot did)
        name, variant_test_name, supports_out = "accepts_cpu", "", True

        def __call__(self, x, y, out=None):
            r = (x * y.to(x.device)).sum(0)
            if out is not None:
                if out.data_ptr() == x.data_ptr() and x.device.type == "cpu":
                    raise RuntimeError("unsupported operation: some elements overlap")
                return out.copy_(r)
            return r

    op, s = AcceptsCpu(), SampleInput(torch.randn(3, 4), args=(torch.randn(3, 4),))
    assert extra.check_mixed_device(op, s).status == "fail"
    assert extra.check_out_alias(op, s).status == "fail"  # computed where the CPU raised

    class LosesLayout:  # a contiguous result where the CPU keeps channels_last_3d
        name, variant_test_name = "loses_layout", ""

        def __call__(self, x):
            return x.clone().contiguous() if x.device.type == "neuron" else x.clone()

    s5 = SampleInput(torch.randn(1, 2, 3, 3, 3))
    o = extra.check_channels_last_3d(LosesLayout(), s5)
    assert o.status == "fail" and "memory format" in o.why


def test_sweep_catches_a_wrong_result_and_renders_it():
    class WrongOnNeuron:
        name, variant_test_name, inplace_variant, supports_out = "wrong", "", None, False

        def __call__(self, x):
            return x + 1 if x.device.type == "neuron" else x.clone()

    import torch
    from torch.testing._internal.opinfo.core import SampleInput

    o = check(WrongOnNeuron(), SampleInput(torch.randn(4)), "functional", False)
    assert isinstance(o, Outcome) and o.status == "fail"
    record = {("float32", "functional"): {"fail": 1}, "failures": ["float32 functional: x"]}
    text = render({"wrong": record}, ("float32",), 0.0, 1)
    assert "0.00%" in text and "`wrong` float32 functional: x" in text
