"""``segment_reduce`` and its gradient compiled against the CPU (decompositions_segment.py):
empty segments, ``initial``, NaN, tied maxima, ``lengths`` and ``offsets``, another axis.
Both were refused naming the op before; ``prod`` still is."""

import pytest
import torch
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401

_X = torch.tensor([1.0, 5.0, -2.0, 5.0, 5.0, float("nan"), 3.0, 0.5, 0.5])
_LENGTHS = torch.tensor([0, 1, 2, 2, 2, 2])
_OFFSETS = torch.cat([torch.zeros(1, dtype=torch.int64), _LENGTHS.cumsum(0)])


@pytest.mark.parametrize("reduce", ["max", "min", "sum", "mean"])
@pytest.mark.parametrize("initial", [None, 2.0])
@pytest.mark.parametrize("by", ["lengths", "offsets"])
def test_segment_reduce_and_gradient(reduce, initial, by):
    seg = _LENGTHS if by == "lengths" else _OFFSETS
    w = torch.tensor([1.0, -2.0, 3.0, 0.5, 4.0, -1.0])  # mixed signs: ATen's tie rule

    def f(x, seg):
        out = torch.segment_reduce(x, reduce, initial=initial, **{by: seg})
        return out, (out.nan_to_num(0.0, 0.0, 0.0) * w.to(x.device)).sum()

    cx = _X.clone().requires_grad_()
    ref, ref_loss = f(cx, seg)
    ref_grad = torch.autograd.grad(ref_loss, cx)[0]
    dx = _X.to("neuron").requires_grad_()
    torch._dynamo.reset()
    got, loss = torch.compile(f, backend="neuron")(dx, seg.to("neuron"))
    grad = torch.autograd.grad(loss, dx)[0]
    torch.testing.assert_close(got.cpu(), ref.detach(), equal_nan=True)
    torch.testing.assert_close(grad.cpu(), ref_grad, equal_nan=True)


def test_batched_lengths_are_refused_2d_data_lowered():
    x, lengths = torch.randn(3, 7), torch.tensor([[3, 0, 4]] * 3)

    def f(x, lengths):
        return torch.segment_reduce(x, "mean", lengths=lengths, axis=1)

    torch._dynamo.reset()
    with pytest.raises(Exception, match="segment_reduce"):  # batched lengths: refused
        torch.compile(f, backend="neuron")(x.to("neuron"), lengths.to("neuron"))
    x2 = torch.randn(7, 3)
    lengths1 = torch.tensor([3, 0, 4])
    got = torch.compile(lambda x, n: torch.segment_reduce(x, "max", lengths=n), backend="neuron")(
        x2.to("neuron"), lengths1.to("neuron")
    )
    torch.testing.assert_close(got.cpu(), torch.segment_reduce(x2, "max", lengths=lengths1))
