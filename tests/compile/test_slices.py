"""Slices with open or out-of-range bounds in compiled graphs (passes/legalize/clamp_slice_bounds.py)."""

import pytest
import torch

import torchneuron  # noqa: F401


def _rotate_half(x):  # HF Llama's rotary embedding
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def test_rotary_embedding_backward_matches_cpu():
    """x[..., k:] is end=2**63-1; its slice_scatter in the backward made torch-mlir fail
    with std::bad_alloc."""

    def f(q, c, s):
        return ((q * c) + _rotate_half(q) * s).square().sum()

    torch.manual_seed(0)
    q = torch.randn(2, 4, 8, 16, requires_grad=True)
    c, s = torch.randn(8, 16), torch.randn(8, 16)
    qn = q.detach().to("neuron").requires_grad_()
    out = torch.compile(f, backend="neuron")(qn, c.to("neuron"), s.to("neuron"))
    out.backward()
    ref = f(q, c, s)
    ref.backward()
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(qn.grad.cpu(), q.grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "sl",
    [
        slice(3, None),
        slice(-3, None),
        slice(None, -2),
        slice(-100, 100),
        slice(5, 2),
        slice(1, None, 3),
        slice(20, None),
    ],
)
def test_slice_bounds_and_their_gradient_match_cpu(sl):
    def f(x):
        return (x[:, sl] * 2).sum() + x[:, sl].abs().sum()

    x = torch.randn(3, 10, requires_grad=True)
    xn = x.detach().to("neuron").requires_grad_()
    out = torch.compile(f, backend="neuron")(xn)
    out.backward()
    ref = f(x)
    ref.backward()
    torch.testing.assert_close(out.cpu(), ref)
    torch.testing.assert_close(xn.grad.cpu(), x.grad)
