"""Gradients that were refused naming their op, compiled against the CPU:
replication padding's and ``adaptive_max_pool2d``'s (decompositions_backward.py), and
``scatter_add`` into a 0-dim tensor (``cummax``/``cummin``'s gradient of a 0-dim input,
decompositions_indexed.py)."""

import pytest
import torch
import torch.nn.functional as F
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401


def _grads(f, *xs):
    cpu = [x.clone().requires_grad_() for x in xs]
    ref = torch.autograd.grad(f(*cpu), cpu)
    dev = [x.to("neuron").requires_grad_() for x in xs]
    torch._dynamo.reset()
    got = torch.autograd.grad(torch.compile(f, backend="neuron")(*dev), dev)
    return [g.cpu() for g in got], ref


@pytest.mark.parametrize(
    "shape,pad",
    [
        ((2, 3, 5), (2, 3)),
        ((2, 3, 5), (-1, 2)),  # negative padding crops
        ((1, 2, 4, 5), (1, 2, 3, 0)),
        ((1, 2, 4, 5), (-1, 2, -2, 1)),
        ((1, 1, 3, 4, 5), (1, 1, 2, 0, 1, 3)),
    ],
)
def test_replication_pad_gradient(shape, pad):
    x = torch.randn(*shape)
    w = torch.randn(F.pad(x, pad, mode="replicate").shape)  # weights: not a plain sum
    got, ref = _grads(lambda x: (F.pad(x, pad, mode="replicate") * w.to(x.device)).sum(), x)
    torch.testing.assert_close(got[0], ref[0])


@pytest.mark.parametrize("shape,out", [((2, 3, 8, 6), (4, 3)), ((1, 2, 6, 6), (2, 6))])
def test_adaptive_max_pool2d_gradient(shape, out):
    x = torch.randn(*shape)
    w = torch.randn(*shape[:-2], *out)

    def f(x):
        return (F.adaptive_max_pool2d(x, out) * w.to(x.device)).sum()

    got, ref = _grads(f, x)
    torch.testing.assert_close(got[0], ref[0])


@pytest.mark.parametrize("op", [torch.cummax, torch.cummin])
def test_cummax_cummin_gradient_of_a_0dim_input(op):
    got, ref = _grads(lambda x: op(x, 0)[0].sum() * 3.0, torch.tensor(1.5))
    torch.testing.assert_close(got[0], ref[0])
