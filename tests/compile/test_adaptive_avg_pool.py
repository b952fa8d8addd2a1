"""``adaptive_avg_pool3d`` and the gradients of ``adaptive_avg_pool1d/2d/3d`` and
``interpolate(mode="area")`` compiled against the CPU, with output sizes that do not
divide the input (overlapping bins) and larger than it (decompositions_adaptive.py;
each failed to lower naming its op before)."""

import pytest
import torch
from compile_support import (
    assert_weighted_gradient_matches_cpu,
    fresh_compile_state,  # noqa: F401
)

import torchneuron  # noqa: F401

F = torch.nn.functional


@pytest.mark.parametrize("out", [(2, 3, 4), (3, 1, 7), (5, 5, 5)])
def test_adaptive_avg_pool3d(out):
    x = torch.randn(2, 3, 5, 6, 4)
    torch._dynamo.reset()
    got = torch.compile(lambda x: F.adaptive_avg_pool3d(x, out), backend="neuron")(x.to("neuron"))
    torch.testing.assert_close(got.cpu(), F.adaptive_avg_pool3d(x, out))
    xb = x.bfloat16()
    torch._dynamo.reset()
    got = torch.compile(lambda x: F.adaptive_avg_pool3d(x, out), backend="neuron")(xb.to("neuron"))
    # float32's mean rounded once (the CPU rounds its own sum: 3e-3 apart near 0.01)
    ref32 = F.adaptive_avg_pool3d(xb.float(), out)
    torch.testing.assert_close(got.cpu().float(), ref32, rtol=4e-3, atol=1e-5)
    torch.testing.assert_close(got.cpu(), F.adaptive_avg_pool3d(xb, out), rtol=1.6e-2, atol=1e-2)


@pytest.mark.parametrize(
    "f, shape",
    [
        (lambda x: F.adaptive_avg_pool1d(x, 3), (2, 3, 7)),
        (lambda x: F.adaptive_avg_pool2d(x, (3, 5)), (2, 3, 7, 4)),
        (lambda x: F.adaptive_avg_pool3d(x, (2, 3, 4)), (1, 2, 5, 6, 3)),
        (lambda x: F.interpolate(x, size=(3, 2), mode="area"), (2, 1, 7, 5)),
    ],
    ids=["1d", "2d", "3d", "area"],
)
def test_gradient(f, shape):
    assert_weighted_gradient_matches_cpu(f, shape)
