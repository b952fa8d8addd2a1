"""``x[mask] = v`` with a one-element ``v`` in compiled graphs
(decompositions.index_put_mask: torch-mlir has no lowering for a bool index), against
the CPU: the result, the mutated input and a gradient through it."""

import pytest
import torch

import torchneuron  # noqa: F401


def _zero_positive(x):
    x[x > 0] = 0.0
    return x


def _rows(x):
    x[x[:, 0] > 0] = -1.0
    return x


def _nan_on_copy(x):
    y = x.clone()
    y[y.abs() < 0.5] = float("nan")
    return y


def _int64_value(x):
    x[x > 0] = torch.tensor(3, dtype=torch.int64, device=x.device)
    return x


def _int_tensor(x):
    i = x.long()
    i[i < 0] = 7
    return i


def _built_mask(x):
    m = torch.zeros(4, 5, dtype=torch.bool, device=x.device)
    m[0, 1] = True
    x[m] = 9.0
    return x


_CASES = [_zero_positive, _rows, _nan_on_copy, _int64_value, _int_tensor, _built_mask]


@pytest.mark.parametrize("f", _CASES, ids=[f.__name__ for f in _CASES])
def test_mask_assignment_matches_cpu(f):
    torch.manual_seed(0)
    x = torch.randn(4, 5)
    xn = x.to("neuron")
    torch._dynamo.reset()
    out = torch.compile(f, backend="neuron")(xn)
    ref = f(x)
    torch.testing.assert_close(out.cpu(), ref, equal_nan=True, rtol=0, atol=0)
    torch.testing.assert_close(xn.cpu(), x, equal_nan=True, rtol=0, atol=0)


def test_mask_assignment_gradient_matches_cpu():
    def f(a):
        y = a * 2
        y[a > 0] = 0.0
        return (y * y).sum()

    torch.manual_seed(0)
    a = torch.randn(4, 5, requires_grad=True)
    an = a.detach().to("neuron").requires_grad_()
    torch._dynamo.reset()
    torch.compile(f, backend="neuron")(an).backward()
    f(a).backward()
    torch.testing.assert_close(an.grad.cpu(), a.grad)
