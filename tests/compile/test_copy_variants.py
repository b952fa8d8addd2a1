"""``view_copy``/``permute_copy``/``unbind_copy``/``narrow_copy``, ``put`` (and ``take``'s
gradient) and ``dist`` compiled against the CPU (decompositions_copies.py; each failed
to lower naming its op before)."""

import pytest
import torch
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401


def _check(f, *xs):
    torch._dynamo.reset()
    got = torch.compile(f, backend="neuron")(*(x.to("neuron") for x in xs))
    ref = f(*xs)
    if isinstance(ref, (list, tuple)):
        assert len(got) == len(ref)
        for g, r in zip(got, ref):
            torch.testing.assert_close(g.cpu(), r)
    else:
        torch.testing.assert_close(got.cpu(), ref)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_copy_variants(dtype):
    x = torch.arange(24).reshape(2, 3, 4).to(dtype)
    _check(lambda x: torch.view_copy(x, [4, 6]), x)
    _check(lambda x: torch.permute_copy(x, [2, 0, 1]), x)
    _check(lambda x: torch.unbind_copy(x, 1), x)
    _check(lambda x: torch.unbind_copy(x, -1), x)
    _check(lambda x: torch.narrow_copy(x, 2, 1, 2), x)
    _check(lambda x: torch.narrow_copy(x, -1, -3, 2), x)


@pytest.mark.parametrize("accumulate", [False, True])
def test_put(accumulate):
    x = torch.arange(12.0).reshape(3, 4)
    index = torch.tensor([[0, -1], [5, -12]])
    src = torch.tensor([[10.0, 20.0], [30.0, 40.0]])
    _check(lambda x, i, s: x.put(i, s, accumulate=accumulate), x, index, src)
    if accumulate:  # repeated positions add up
        _check(
            lambda x, i, s: x.put(i, s, accumulate=True),
            x,
            torch.tensor([1, 1, -11]),
            src[0].repeat(2)[:3],
        )


def test_take_gradient_is_a_put():
    x, i = torch.randn(3, 4), torch.tensor([0, 5, 5, -1])
    xd = x.to("neuron").requires_grad_()
    torch._dynamo.reset()
    out = torch.compile(lambda x, i: torch.take(x, i) * 2, backend="neuron")(xd, i.to("neuron"))
    (g,) = torch.autograd.grad(out.sum(), [xd])
    ref = torch.zeros(12).index_add_(0, torch.tensor([0, 5, 5, 11]), torch.full((4,), 2.0))
    torch.testing.assert_close(g.cpu(), ref.reshape(3, 4))


@pytest.mark.parametrize("p", [2, 1, 0, 3.5, float("inf"), float("-inf")])
def test_dist(p):
    a, b = torch.randn(3, 4), torch.randn(4)
    b[1] = a[0, 1]
    _check(lambda a, b: torch.dist(a, b, p), a, b)
