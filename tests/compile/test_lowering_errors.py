"""A graph with an op torch-mlir cannot lower raises NeuronCompileError naming the stage,
the ATen op of the FX node and the user's source line (lowering.py), also when
torch-mlir's error names only a leftover ``torch.constant.*`` operand of that op."""

import inspect

import pytest
import torch

import torchneuron  # noqa: F401
from torchneuron.compiler.errors import NeuronCompileError


def _kthvalue(a):
    return a.kthvalue(2, 1).values * 2  # torch-mlir reports its torch.constant.bool


def _i1e(a):  # (erfc, then i1 were here: they compile now, decompositions_special.py)
    return torch.special.i1e(a * 2) + 1


def _igamma(a):  # (cummax, then nextafter were here: they compile now)
    return torch.igamma(a.abs(), a.abs() * 2) - a


@pytest.mark.parametrize(
    "f, op",
    [
        (_kthvalue, "aten.kthvalue.default"),
        (_i1e, "aten.special_i1e.default"),
        (_igamma, "aten.igamma.default"),
    ],
)
def test_lowering_error_names_aten_op_and_source_line(f, op):
    with pytest.raises(Exception) as ei:
        torch.compile(f, backend="neuron")(torch.randn(5, 5).to("neuron"))
    err = ei.value
    while err is not None and not isinstance(err, NeuronCompileError):
        err = err.__cause__ or err.__context__
    assert err is not None, ei.value
    assert err.stage == "lowering" and err.op == op, str(err)
    line = inspect.getsourcelines(f)[1] + 1
    assert err.source.endswith(f"test_lowering_errors.py:{line} in {f.__name__}")
    assert f"at ATen op {op}, from " in str(ei.value)


def test_kthvalue_fallback_matches_cpu():
    x = torch.randn(5, 5)
    with pytest.warns(UserWarning, match="eagerly on neuron"):
        out = torch.compile(_kthvalue, backend="neuron", options={"fallback_execution": True})(
            x.to("neuron")
        )
    assert torch.equal(out.cpu(), _kthvalue(x))
