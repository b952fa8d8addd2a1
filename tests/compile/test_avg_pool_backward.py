"""The gradients of ``avg_pool1d/2d/3d`` (``avg_pool2d_backward``/``avg_pool3d_backward``)
compiled against the CPU: padding, ``ceil_mode`` (windows clipped at the end),
``count_include_pad=False``, ``divisor_override``, overlapping and gapped windows
(decompositions_pooling.py; these failed to lower naming the op before)."""

import pytest
import torch
from compile_support import (
    assert_weighted_gradient_matches_cpu,
    fresh_compile_state,  # noqa: F401
)

import torchneuron  # noqa: F401

F = torch.nn.functional
_KW = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=2, stride=3, ceil_mode=True),
    dict(kernel_size=3, stride=1, padding=1, divisor_override=5),
]


def _check(f, shape, dtype=torch.float32):
    # bfloat16: the sweep's tolerance (the CPU rounds each window's addition; here
    # float32 sums rounded once)
    tol = dict(rtol=1.6e-2, atol=1e-2) if dtype == torch.bfloat16 else {}
    assert_weighted_gradient_matches_cpu(f, shape, dtype, **tol)


@pytest.mark.parametrize("kw", _KW)
def test_avg_pool2d_gradient(kw):
    _check(lambda x: F.avg_pool2d(x, **kw), (2, 3, 7, 6))


@pytest.mark.parametrize("kw", _KW[:4])
def test_avg_pool1d_gradient(kw):
    _check(lambda x: F.avg_pool1d(x, **kw), (2, 3, 9))


@pytest.mark.parametrize("kw", _KW)
def test_avg_pool3d_gradient(kw):
    _check(lambda x: F.avg_pool3d(x, **kw), (1, 2, 5, 7, 6))


def test_avg_pool2d_gradient_bfloat16():
    _check(lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), (2, 3, 7, 6), torch.bfloat16)
