"""out= overloads of natively computed operators run natively (issue 7, section 2): found
from the functional list, CPU-compatible errors, resize semantics, casting, aliasing."""

from __future__ import annotations

import warnings

import pytest
import torch

import torchneuron  # noqa: F401

A = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, out: torch.exp2(x, out=out),
        lambda x, out: torch.asinh(x, out=out),
        lambda x, out: torch.ops.aten.sum.out(x, out=out),
        lambda x, out: torch.ops.aten.flip.out(x, [0], out=out),
        lambda x, out: torch.ops.aten.roll.out(x, [1], [1], out=out),
        lambda x, out: torch._C._nn.hardswish(x, out=out),
        lambda x, out: torch.var(x, 1, out=out),
        lambda x, out: torch.ops.aten.constant_pad_nd.out(x, [1, 1], 2.0, out=out),
    ],
)
def test_out_matches_cpu_without_fallback(fn):
    torch.neuron.reset_fallback_stats()
    ref = fn(A, torch.empty(0))
    out = torch.empty(0, device="neuron")
    got = fn(A.to("neuron"), out)
    assert got is out
    assert torch.neuron.fallback_stats() == {}
    torch.testing.assert_close(out.cpu(), ref)


def test_multiple_outs_and_aliasing():
    torch.neuron.reset_fallback_stats()
    v, i = torch.empty(0, device="neuron"), torch.empty(0, device="neuron")
    torch.aminmax(A.to("neuron"), dim=1, out=(v, i))
    rv, ri = torch.aminmax(A, dim=1)
    assert torch.equal(v.cpu(), rv) and torch.equal(i.cpu(), ri)
    d = A.to("neuron")
    torch.asin(d, out=d)  # out is the input
    torch.testing.assert_close(d.cpu(), torch.asin(A), equal_nan=True)
    assert torch.neuron.fallback_stats() == {}


def test_out_casts_and_resizes_as_cpu():
    out = torch.empty(3, 4, device="neuron", dtype=torch.float64)
    torch.log10(A.abs().to("neuron"), out=out)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out.cpu(), torch.log10(A.abs()).double())
    wrong = torch.empty(2, device="neuron")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        torch.atan(A.to("neuron"), out=wrong)
    assert wrong.shape == (3, 4) and any("resized" in str(x.message) for x in w)
    torch.testing.assert_close(wrong.cpu(), torch.atan(A))


def test_out_errors_leave_inputs_and_out_intact():
    d = A.to("neuron")
    bad = torch.full((3, 4), 5, device="neuron", dtype=torch.long)
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.cosh(d, out=bad)
    with pytest.raises(RuntimeError):  # as on the CPU
        torch.cosh(A, out=torch.empty(3, 4, dtype=torch.long))
    assert torch.equal(bad.cpu(), torch.full((3, 4), 5)) and torch.equal(d.cpu(), A)
    with pytest.raises(RuntimeError, match="same device"):
        torch.sinh(d, out=torch.empty(3, 4))
    assert torch.equal(torch.sinh(d).cpu(), torch.sinh(A))  # the process keeps working


def test_out_of_int64_under_narrowing_restores_width():
    x = torch.tensor([[1, -2], [3, -4]])
    out = torch.empty(0, device="neuron", dtype=torch.long)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.prod(x.to("neuron"), 1, out=out)
    assert out.dtype == torch.long and torch.equal(out.cpu(), torch.prod(x, 1))
