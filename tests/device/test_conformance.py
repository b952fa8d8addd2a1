"""CI subset of the OpInfo conformance sweep (tests/device/conformance_sweep.py; the
whole sweep is `make conformance`, its report docs/conformance.md): common
operators of real models in every configuration (float32, bfloat16, float16,
int64 with and without narrowing, bool), each check of TestCommon's kind
(functional, noncontiguous, in-place, out=, gradients), neuron vs the CPU."""

import pytest
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
