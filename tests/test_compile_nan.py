"""NaN in compiled graphs, against the CPU.

torch-mlir folded ``eq(x, x)`` to true (passes/self_equality.py) and lowered the arg
reductions with comparators that skip NaN (passes/nan_aware_arg_reductions.py).
"""
import pytest
import torch

import torchneuron  # noqa: F401

_NAN, _INF = float("nan"), float("inf")
_X = torch.tensor([1., _NAN, _INF, -3., 0., -_INF])
_XN = torch.tensor([[1., _NAN, -3., 0., 9., _NAN, 0.],
                    [1., 2., 3., 4., 5., 6., 7.],
                    [_NAN, 2., -3., 4., 5., 6., -7.]])


def _same(out, ref):
    for r, o in zip(ref if isinstance(ref, tuple) else (ref,),
                    out if isinstance(out, tuple) else (out,)):
        torch.testing.assert_close(o.cpu(), r, rtol=0, atol=0, equal_nan=True)


_ELEMENTWISE = {
    "x == x": lambda a: a == a,
    "isfinite": lambda a: a.isfinite(),
    "isclose": lambda a: torch.isclose(a, a),
    "where x == x": lambda a: torch.where(a == a, a, 0.),
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
        return (a.max(1).values * torch.arange(3., device=a.device)).nansum()

    a = _XN.clone().requires_grad_()
    an = _XN.to("neuron").requires_grad_()
    torch.compile(f, backend="neuron")(an).backward()
    f(a).backward()
    assert torch.equal(an.grad.cpu(), a.grad)
