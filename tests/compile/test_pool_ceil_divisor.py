"""Average pools (1-d/2-d/3-d: padding, ``ceil_mode``, ``count_include_pad``,
``divisor_override``) and ``max_pool3d(ceil_mode=True)`` in compiled graphs, values and
gradients against the CPU (decompositions_pooling.py: avg_pool3d ignored
divisor_override and max_pool3d's ceil mode padded both ends, silently; the others failed
to compile). Their gradients do not compile yet (avg_pool2d/3d_backward, and
max_pool3d_with_indices_backward, fail to lower, naming the op)."""

import pytest
import torch
import torch.nn.functional as F
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401

CASES = {
    "avg3d divisor_override": (lambda x: F.avg_pool3d(x, 2, divisor_override=3), (1, 2, 4, 4, 4)),
    "avg2d divisor_override": (lambda x: F.avg_pool2d(x, 2, divisor_override=3), (1, 2, 4, 5)),
    "avg2d padding": (lambda x: F.avg_pool2d(x, 3, stride=2, padding=1), (2, 2, 7, 6)),
    "avg2d ceil": (lambda x: F.avg_pool2d(x, 3, stride=2, ceil_mode=True), (1, 2, 6, 6)),
    "avg2d ceil no pad count": (
        lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
        (1, 2, 6, 7),
    ),
    "avg1d ceil": (lambda x: F.avg_pool1d(x, 3, stride=2, ceil_mode=True), (1, 2, 6)),
    "avg3d ceil": (
        lambda x: F.avg_pool3d(x, 3, stride=2, padding=1, ceil_mode=True),
        (1, 2, 6, 5, 6),
    ),
    "max3d ceil": (lambda x: F.max_pool3d(x, 2, stride=2, ceil_mode=True), (1, 2, 5, 5, 5)),
    "max3d ceil padding": (
        lambda x: F.max_pool3d(x, 3, stride=2, padding=1, ceil_mode=True),
        (1, 2, 6, 5, 6),
    ),
}


# the CPU has no bfloat16 avg_pool3d
PARAMS = [(n, torch.float32) for n in CASES] + [
    (n, torch.bfloat16) for n in CASES if not n.startswith("avg3d")
]


@pytest.mark.parametrize("name, dtype", PARAMS)
def test_pool_matches_cpu(name, dtype):
    f, shape = CASES[name]
    torch.manual_seed(0)
    x = torch.randn(shape).to(dtype)
    got = torch.compile(f, backend="neuron")(x.to("neuron")).cpu()
    want = f(x)
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got, want)


INT_POOLS = [
    lambda t: F.avg_pool2d(t, 2),
    lambda t: F.avg_pool2d(t, 3, stride=2, padding=1, count_include_pad=False),
    lambda t: F.avg_pool2d(t, 3, 2, 1, ceil_mode=True),
    lambda t: F.avg_pool2d(t, 3, 1, 1, divisor_override=2),
    lambda t: F.avg_pool1d(t.flatten(2), 4),
    lambda t: F.avg_pool3d(t.unsqueeze(2).expand(2, 3, 4, 6, 7).contiguous(), 2),
    lambda t: F.avg_pool3d(t.unsqueeze(2).expand(2, 3, 4, 6, 7).contiguous(), 3, 2, 1, True, False),
]


@pytest.mark.parametrize("i", range(len(INT_POOLS)))
def test_int64_average_pools_match_cpu(i):
    # compiled, an int64 average pool returned float32 means; ATen's CPU kernel (and
    # eager) divide the window sum toward zero in int64 (negative sums: -3.5 -> -3)
    f = INT_POOLS[i]
    x = torch.arange(2 * 3 * 6 * 7).reshape(2, 3, 6, 7) - 60
    ref = f(x)
    got = torch.compile(f, backend="neuron")(x.to("neuron")).cpu()
    assert got.dtype == torch.int64 and torch.equal(got, ref), (got, ref)
    assert torch.equal(f(x.to("neuron")).cpu(), ref)
