"""A CPU tensor beside neuron tensors raises as on CUDA ("Expected all tensors
to be on the same device"), in native kernels and in the CPU fallback alike;
a CPU 0-dim tensor is a scalar operand and computes (issue 23: vdot, through
the fallback, computed with a CPU operand)."""

import warnings

import pytest
import torch

SAME_DEVICE = r"Expected all tensors to be on the same device, but found at least two devices, neuron(:0)? and cpu"


def _pair():
    g = torch.Generator().manual_seed(0)
    return torch.randn(6, generator=g), torch.randn(6, generator=g)


MIXED = {
    "vdot": lambda a, b: torch.vdot(a, b),
    "vdot_cpu_first": lambda a, b: torch.vdot(b, a),
    "dot": lambda a, b: torch.dot(a, b),
    "linalg_cross": lambda a, b: torch.linalg.cross(a[:3], b[:3]),
    "kthvalue_out": lambda a, b: torch.kthvalue(
        a, 2, out=(b[:1].squeeze(), torch.empty((), dtype=torch.long))
    ),
    "sum_out_cpu_scalar": lambda a, b: torch.sum(a, 0, out=torch.empty(())),
    "atan2": lambda a, b: torch.atan2(a, b),
    "lerp": lambda a, b: torch.lerp(a, b, 0.5),
    "outer": lambda a, b: torch.outer(a, b),
    "histc_bins_like": lambda a, b: torch.bucketize(a, b.sort().values),
}


@pytest.mark.parametrize("name", sorted(MIXED))
def test_cpu_operand_raises_as_on_cuda(name):
    a, b = _pair()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match=SAME_DEVICE):
            MIXED[name](a.neuron(), b)


SCALAR_OK = {
    "lerp": lambda a, s: torch.lerp(a, a.flip(0), s),
    "atan2": lambda a, s: torch.atan2(a, s),
    "linalg_cross_scale": lambda a, s: torch.linalg.cross(a[:3], a[3:]) * s,
    "kthvalue_then_mul": lambda a, s: torch.kthvalue(a, 2).values * s,
}


@pytest.mark.parametrize("name", sorted(SCALAR_OK))
def test_cpu_zero_dim_operand_computes(name):
    a, _ = _pair()
    s = torch.tensor(0.25)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = SCALAR_OK[name](a.neuron(), s)
    torch.testing.assert_close(got.cpu(), SCALAR_OK[name](a, s))


def test_fallback_with_cpu_zero_dim_tensor_argument_computes():
    # polar takes the fallback; a CPU 0-dim angle is a scalar operand
    a = torch.tensor(2.0)
    x = torch.linspace(0.5, 1.5, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = torch.vdot(x.neuron(), x.neuron())
        torch.testing.assert_close(got.cpu(), torch.vdot(x, x))
        got = torch.polar(x.neuron(), a)
    torch.testing.assert_close(got.cpu(), torch.polar(x, a))
