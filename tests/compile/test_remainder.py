"""Compiled ``%`` / ``torch.remainder`` follow Python's sign rule (the divisor's sign),
as eager does: torch-mlir lowers remainder to StableHLO's truncated remainder (fmod),
which gave ``-7 % 5 == -2``. Compiled ``torch.fmod`` is exact, as C's: torch-mlir's
``a - b*trunc(a/b)`` was off by ``b`` where ``a/b`` rounds across an integer and lost
the sign of exact zeros. Reference: the same op on CPU, bit for bit (signed zeros too)."""

import pytest
import torch
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401


@pytest.mark.parametrize(
    "a, b",
    [
        (torch.tensor([-7, -3, 0, 5, 9, -10]), 5),
        (torch.tensor([-7, -3, 0, 5, 9, -10]), -4),
        (torch.tensor([-7.5, -3.0, 0.0, 5.25, 9.0, -8.0]), 4.0),
        (torch.tensor([-7, 3, 5, -9, 8, -6]), torch.tensor([5, -4, -3, 2, 3, -3])),
        (torch.tensor([-7.5, 3.0, 5.5, -9.0]), torch.tensor([2.0, -4.0, -3.0, 2.5])),
    ],
)
def test_remainder_matches_cpu(a, b):
    f = torch.compile(lambda x, y: (x % y, torch.remainder(x, y) * 1), backend="neuron")
    bn = b.to("neuron") if isinstance(b, torch.Tensor) else b
    got = f(a.to("neuron"), bn)
    want = (a % b, torch.remainder(a, b))
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        assert torch.equal(g.cpu(), w), (g.cpu(), w)


def _same_bits(g, w):
    """Equal values, dtypes and signs of zeros (``torch.equal`` takes -0.0 == 0.0)."""
    return (
        g.dtype == w.dtype and torch.equal(g, w) and torch.equal(torch.signbit(g), torch.signbit(w))
    )


# 5/0.1 and (1e6+0.3)/0.01 round up across an integer in float32; -8 % 4 and -3 % -3
# are exact zeros whose sign is the dividend's in fmod and in CPU remainder.
_X = torch.tensor([5.0, 1e6 + 0.3, -8.0, -3.0, -0.0, 0.0, 16777215.0, -7.5])
_D = torch.tensor([0.1, 0.01, 4.0, -3.0, 2.0, -2.0, 0.7, 0.3])


@pytest.mark.parametrize("op", [torch.fmod, torch.remainder])
def test_fmod_remainder_tensor_exact(op):
    f = torch.compile(lambda x, y: op(x, y), backend="neuron")
    got = f(_X.to("neuron"), _D.to("neuron")).cpu()
    assert _same_bits(got, op(_X, _D)), (got, op(_X, _D))


@pytest.mark.parametrize("b", [4.0, -3.0, 0.1, -0.7])
def test_fmod_remainder_python_scalar_exact(b):
    # A Python scalar inside the graph (not an input): fmod.Scalar did not lower at all.
    f = torch.compile(lambda x: (torch.fmod(x, b), x % b, torch.remainder(x, b)), backend="neuron")
    got = f(_X.to("neuron"))
    want = (torch.fmod(_X, b), _X % b, torch.remainder(_X, b))
    for g, w in zip(got, want):
        assert _same_bits(g.cpu(), w), (b, g.cpu(), w)


def test_fmod_int_matches_cpu():
    a = torch.tensor([-7, 7, -9, 9, 0, -1], dtype=torch.int32)
    d = torch.tensor([3, -3, 4, -4, 5, 2], dtype=torch.int32)
    f = torch.compile(lambda x, y: (torch.fmod(x, y), torch.fmod(x, -3)), backend="neuron")
    got = f(a.to("neuron"), d.to("neuron"))
    for g, w in zip(got, (torch.fmod(a, d), torch.fmod(a, -3))):
        assert _same_bits(g.cpu(), w), (g.cpu(), w)


_FA = torch.tensor(
    [
        float("inf"),
        -float("inf"),
        7.0,
        -7.0,
        0.0,
        -0.0,
        1e-3,
        -1e-3,
        5.0,
        -5.0,
        float("nan"),
        3e38,
        7.5,
        -7.5,
        1e6 + 0.3,
    ]
)
_FB = torch.tensor(
    [
        3.0,
        3.0,
        0.0,
        0.0,
        3.0,
        -3.0,
        float("inf"),
        float("inf"),
        -float("inf"),
        float("inf"),
        2.0,
        0.1,
        -2.0,
        2.0,
        0.01,
    ]
)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("op", ["//", "div floor", "div floor scalar"])
def test_float_floor_division_matches_eager_and_cpu(op, dtype):
    # torch-mlir lowered it as floor(a / b): inf // 3 gave inf (ATen nan), -1e-3 // inf
    # and 5 // -inf gave -0.0 (ATen -1)
    f = {
        "//": lambda a, b: a // b,
        "div floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
        "div floor scalar": lambda a, b: torch.div(a, -2.5, rounding_mode="floor"),
    }[op]
    a, b = _FA.to(dtype), _FB.to(dtype)
    got = torch.compile(f, backend="neuron")(a.to("neuron"), b.to("neuron")).cpu()
    eager = f(a.to("neuron"), b.to("neuron")).cpu()
    assert (
        _same_bits(got, eager)
        or (got.isnan() == eager.isnan()).all()
        and _same_bits(got[~got.isnan()], eager[~eager.isnan()])
    ), (got, eager)
    if dtype == torch.float32:  # (float64 // and div narrow in eager: float32's values)
        ref = f(a, b)
        assert torch.equal(got.isnan(), ref.isnan())
        assert _same_bits(got[~got.isnan()], ref[~ref.isnan()]), (got, ref)
