"""NaN in compiled graphs, against the CPU.

torch-mlir folded ``eq(x, x)`` to true (passes/semantics/self_equality.py) and lowered the arg
reductions with comparators that skip NaN (passes/semantics/nan_aware_arg_reductions.py); XLA:CPU's
YNNPACK reductions, pools and fused elementwise ops skipped NaN (neuron_cc._XLA_OPTIONS).
"""

import pytest
import torch

import torchneuron  # noqa: F401

_NAN, _INF = float("nan"), float("inf")
_X = torch.tensor([1.0, _NAN, _INF, -3.0, 0.0, -_INF])
_XN = torch.tensor(
    [
        [1.0, _NAN, -3.0, 0.0, 9.0, _NAN, 0.0],
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
        [_NAN, 2.0, -3.0, 4.0, 5.0, 6.0, -7.0],
    ]
)


def _same(out, ref):
    for r, o in zip(
        ref if isinstance(ref, tuple) else (ref,), out if isinstance(out, tuple) else (out,)
    ):
        torch.testing.assert_close(o.cpu(), r, rtol=0, atol=0, equal_nan=True)


_ELEMENTWISE = {
    "x == x": lambda a: a == a,
    "isfinite": lambda a: a.isfinite(),
    "isclose": lambda a: torch.isclose(a, a),
    "where x == x": lambda a: torch.where(a == a, a, 0.0),
    "float16 x == x": lambda a: a.half() == a.half(),
}


@pytest.mark.parametrize("name", list(_ELEMENTWISE))
def test_self_equality_with_nan_matches_cpu(name):
    f = _ELEMENTWISE[name]
    _same(torch.compile(f, backend="neuron")(_X.to("neuron")), f(_X))


def test_nan_to_num_gradient_matches_cpu():
    def f(a):
        return a.nan_to_num(0.5).sum()

    a = _X.clone().requires_grad_()
    an = _X.to("neuron").requires_grad_()
    torch.compile(f, backend="neuron")(an).backward()
    f(a).backward()
    assert torch.equal(an.grad.cpu(), a.grad)


_ARG = {
    "argmax": lambda a: a.argmax(1),
    "argmin keepdim": lambda a: a.argmin(1, keepdim=True),
    "argmax all": lambda a: a.argmax(),
    "argmin dim 0": lambda a: a.argmin(0),
    "max dim": lambda a: a.max(1),
    "min dim keepdim": lambda a: a.min(0, keepdim=True),
    "max dim values only": lambda a: a.max(1).values * 2,
    "max dim bfloat16": lambda a: a.bfloat16().max(1),
}


@pytest.mark.parametrize("name", list(_ARG))
def test_nan_in_arg_reductions_matches_cpu(name):
    """ATen takes NaN as the extreme: the first NaN's index, value NaN."""
    f = _ARG[name]
    _same(torch.compile(f, backend="neuron")(_XN.to("neuron")), f(_XN))


def test_max_dim_gradient_with_nan_matches_cpu():
    def f(a):
        return (a.max(1).values * torch.arange(3.0, device=a.device)).nansum()

    a = _XN.clone().requires_grad_()
    an = _XN.to("neuron").requires_grad_()
    torch.compile(f, backend="neuron")(an).backward()
    f(a).backward()
    assert torch.equal(an.grad.cpu(), a.grad)


def _big_with_nan():
    # large enough that XLA:CPU hands these ops to a library (YNNPACK) by default
    g = torch.Generator().manual_seed(0)
    x = torch.randn(32, 64, 64, generator=g)
    x[3, 5, 7] = _NAN
    x[4, 6, :] = _NAN
    return x, torch.randn(16, 16, 3, 3, generator=g)


_REDUCTIONS = {
    "amax": lambda x, w: x.amax(-1),
    "amax dim 0": lambda x, w: x.amax(0),
    "amin": lambda x, w: x.amin(-1),
    "max all": lambda x, w: x.max(),
    "max_pool2d": lambda x, w: torch.nn.functional.max_pool2d(x.view(2, 16, 64, 64), 2),
    "max_pool2d 3 stride 2": lambda x, w: torch.nn.functional.max_pool2d(
        x.view(2, 16, 64, 64), 3, 2, 1
    ),
    "relu(conv + x) mean": lambda x, w: torch.relu(
        torch.nn.functional.conv2d(x.view(8, 16, 32, 32), w, padding=1) + x.view(8, 16, 32, 32)
    ).mean((2, 3)),
}


@pytest.mark.parametrize("name", list(_REDUCTIONS))
def test_nan_in_large_max_reductions_and_pools_matches_cpu(name):
    """Each gave numbers where ATen gives NaN (XLA:CPU's default YNNPACK fusions)."""
    x, w = _big_with_nan()
    f = _REDUCTIONS[name]
    out = torch.compile(f, backend="neuron")(x.to("neuron"), w.to("neuron")).cpu()
    ref = f(x, w)
    assert torch.equal(out.isnan(), ref.isnan())
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5, equal_nan=True)
