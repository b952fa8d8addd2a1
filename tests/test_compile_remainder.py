"""Compiled ``%`` / ``torch.remainder`` follow Python's sign rule (the divisor's sign),
as eager does: torch-mlir lowers remainder to StableHLO's truncated remainder (fmod),
which gave ``-7 % 5 == -2``. Reference: the same op on CPU."""
import pytest
import torch

import torchneuron  # noqa: F401

from compile_support import fresh_compile_state  # noqa: F401


@pytest.mark.parametrize("a, b", [
    (torch.tensor([-7, -3, 0, 5, 9, -10]), 5),
    (torch.tensor([-7, -3, 0, 5, 9, -10]), -4),
    (torch.tensor([-7.5, -3.0, 0.0, 5.25, 9.0, -8.0]), 4.0),
    (torch.tensor([-7, 3, 5, -9, 8, -6]), torch.tensor([5, -4, -3, 2, 3, -3])),
    (torch.tensor([-7.5, 3.0, 5.5, -9.0]), torch.tensor([2.0, -4.0, -3.0, 2.5])),
])
def test_remainder_matches_cpu(a, b):
    f = torch.compile(lambda x, y: (x % y, torch.remainder(x, y) * 1), backend="neuron")
    bn = b.to("neuron") if isinstance(b, torch.Tensor) else b
    got = f(a.to("neuron"), bn)
    want = (a % b, torch.remainder(a, b))
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        assert torch.equal(g.cpu(), w), (g.cpu(), w)
