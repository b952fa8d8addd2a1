"""``max_pool3d`` with its indices (``max_pool3d_with_indices``, any stride, padding,
dilation, ``ceil_mode``) and its gradient compiled against the CPU: values, indices
(flat in each volume), NaN (ATen's CPU takes a NaN over any number), int64
(decompositions_pooling.py; torch-mlir lowers neither op: both were refused)."""

import pytest
import torch
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401

F = torch.nn.functional
_KW = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=2, stride=1, dilation=2),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=(1, 2, 3), stride=(2, 1, 2)),
]


def _pool(kw):
    return lambda x: F.max_pool3d(x, return_indices=True, **kw)


@pytest.mark.parametrize("kw", _KW)
def test_values_and_indices(kw):
    x = torch.randn(2, 3, 5, 6, 7)
    x[0, 0, 1, 1, 1] = float("nan")
    for t in (x, torch.randint(-5, 5, (2, 3, 5, 6, 7))):
        torch._dynamo.reset()
        v, i = torch.compile(_pool(kw), backend="neuron")(t.to("neuron"))
        rv, ri = _pool(kw)(t)
        torch.testing.assert_close(v.cpu(), rv, equal_nan=True)
        if t.is_floating_point():  # (integer ties: the index among equal values is open)
            torch.testing.assert_close(i.cpu(), ri)


@pytest.mark.parametrize("kw", _KW)
def test_gradient(kw):
    x = torch.randn(1, 2, 5, 6, 7)
    w = torch.randn_like(_pool(kw)(x)[0])
    xr = x.clone().requires_grad_()
    (ref,) = torch.autograd.grad((_pool(kw)(xr)[0] * w).sum(), [xr])
    xd = x.to("neuron").requires_grad_()
    torch._dynamo.reset()
    out = torch.compile(lambda x, w: _pool(kw)(x)[0] * w, backend="neuron")(xd, w.to("neuron"))
    (got,) = torch.autograd.grad(out.sum(), [xd])
    torch.testing.assert_close(got.cpu(), ref)
