"""uint8 comparisons and max/min-like reductions, and ``all``/``any`` over several dims,
in compiled graphs against the CPU. torch-mlir lowered uint8 as signed (``u.max()`` of
small values gave 128, ``u > 100`` failed XLA's verifier: lowering.unsigned_compares,
decompositions_reductions._widen_unsigned) and had no lowering for ``aten.any.dims``, which
``all()`` and ``F.one_hot`` decompose into (decompositions_reductions.any_dims). bool reductions and compares went the same way (a
bool ``max(dim)`` of a False row gave True)."""

import pytest
import torch
import torch.nn.functional as F

import torchneuron  # noqa: F401

_U8 = torch.tensor([[1, 0, 3, 7], [2, 9, 4, 5]], dtype=torch.uint8)  # all < 128
_U8_HIGH = _U8 + 200  # all > 127
_B = torch.tensor([[True, False, True], [True, True, True]])

_CASES = {
    "uint8 max": (lambda a: a.max(), _U8),
    "uint8 amax dim": (lambda a: a.amax(0), _U8),
    "uint8 min": (lambda a: a.min(), _U8_HIGH),
    "uint8 amin dims": (lambda a: a.amin((0, 1)), _U8_HIGH),
    "uint8 max.dim": (lambda a: tuple(a.max(1)), _U8),
    "uint8 min.dim": (lambda a: tuple(a.min(0, keepdim=True)), _U8_HIGH),
    "uint8 argmax": (lambda a: a.argmax(), _U8),
    "uint8 argmin dim": (lambda a: a.argmin(1), _U8_HIGH),
    "uint8 gt scalar": (lambda a: a > 100, _U8_HIGH),
    "uint8 le tensor": (lambda a: a <= a.flip(1), _U8_HIGH),
    "uint8 eq 0-dim": (lambda a: a == a[0, 0], _U8),
    "uint8 where on compare": (lambda a: torch.where(a > 204, a, 0), _U8_HIGH),
    "uint8 remainder": (lambda a: a % 7, _U8_HIGH),
    "all": (lambda b: b.all(), _B),
    "all dim": (lambda b: b.all(1), _B),
    "all dim keepdim": (lambda b: b.all(0, keepdim=True), _B),
    "any dims": (lambda b: b.any(dim=(0, 1)), _B),
    "any dims keepdim": (lambda b: b.any(dim=(1, 0), keepdim=True), _B),
    "all negative dim": (lambda b: b.all(dim=(-1,)), _B),
    "any empty dims": (lambda b: b.any(dim=()), _B),
    "all of a 0-dim": (lambda b: b[0, 1].all(dim=(0,)), _B),
    "all float": (lambda b: b.float().all(1), _B),
    "all uint8": (lambda b: b.to(torch.uint8).all(dim=(0, 1)), _B),
    # ATen's uint8 any is 0 or 1; lowered, it was the bitwise OR of the values (3, 28)
    "any uint8": (lambda a: a.any(), _U8),
    "any uint8 dim": (
        lambda a: a.any(1),
        torch.tensor([[1, 2, 0], [4, 8, 16], [0, 0, 0]], dtype=torch.uint8),
    ),
    "any uint8 dims keepdim": (lambda a: a.any(dim=(0, 1), keepdim=True), _U8_HIGH),
    "one_hot": (lambda b: F.one_hot(b.long().sum(1), 4), _B),
    "bool max.dim of a False row": (lambda b: tuple((b & b.flip(0)).max(1)), _B),
    "bool min.dim": (lambda b: tuple(b.min(0)), _B),
    "bool amax": (lambda b: (b & False).amax(1), _B),
    "bool gt": (lambda b: b > b.flip(0), _B),
}


@pytest.mark.parametrize("name", list(_CASES))
def test_matches_cpu(name):
    f, x = _CASES[name]
    torch._dynamo.reset()
    got = torch.compile(f, backend="neuron")(x.to("neuron"))
    ref = f(x)
    for r, g in zip(ref, got) if isinstance(ref, tuple) else [(ref, got)]:
        assert g.dtype == r.dtype and torch.equal(g.cpu(), r)


@pytest.mark.parametrize("v", [-5, 100, 300, -(2**31)])
def test_compare_with_0dim_of_another_dtype_matches_cpu(v):
    # ATen compares in result_type: a 0-dim int32 does not widen a uint8 tensor, so
    # x < tensor(-5) compares with 251; compiled compared -5 (all False), 300 as 300
    a = torch.tensor([200, 3, 0, 255, 44], dtype=torch.uint8)
    b = torch.tensor(v, dtype=torch.int32)
    f = lambda x, y: (x < y, x >= y, x == y, y.double() > x.float())  # noqa: E731
    torch._dynamo.reset()
    got = torch.compile(f, backend="neuron")(a.to("neuron"), b.to("neuron"))
    for g, r in zip(got, f(a, b)):
        assert torch.equal(g.cpu(), r), (v, g, r)
