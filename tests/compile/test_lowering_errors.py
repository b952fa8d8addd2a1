"""A graph with an op torch-mlir cannot lower raises NeuronCompileError naming the stage,
the ATen op of the FX node and the user's source line (lowering.py), also when
torch-mlir's error names only a leftover ``torch.constant.*`` operand of that op."""

import inspect

import pytest
import torch

import torchneuron  # noqa: F401
from torchneuron.compiler.errors import NeuronCompileError


def _igammac(a):  # (kthvalue, erfcx, then bessel_j1 were here: they compile now)
    return torch.igammac(a.abs(), a.abs() * 2) * 2


def _cdist(a):  # (erfc, i1, i1e, then bessel_j0 were here: they compile now)
    return torch.cdist(a * 2, a) + 1


def _igamma(a):  # (cummax, then nextafter were here: they compile now)
    return torch.igamma(a.abs(), a.abs() * 2) - a


@pytest.mark.parametrize(
    "f, op",
    [
        (_igammac, "aten.igammac.default"),
        (_cdist, "aten._cdist_forward.default"),
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


def test_igammac_fallback_matches_cpu():
    x = torch.randn(5, 5)
    with pytest.warns(UserWarning, match="eagerly on neuron"):
        out = torch.compile(_igammac, backend="neuron", options={"fallback_execution": True})(
            x.to("neuron")
        )
    torch.testing.assert_close(out.cpu(), _igammac(x))
