"""sort/argsort/msort/topk in compiled graphs order NaN, infinities, -0.0 and ties as
ATen's CPU kernels (passes/semantics/nan_aware_sort.py): values and indices equal to the CPU's."""

import pytest
import torch

import torchneuron  # noqa: F401

_NAN, _INF = float("nan"), float("inf")
_ROW = torch.tensor([1.0, _NAN, -3.0, 0.0, 9.0, -_INF, _INF, -0.0, 2.0, _NAN, 1.0, -1.0])
_X = torch.stack([_ROW, _ROW.flip(0), _ROW.roll(5)])
_UNIQUE = torch.tensor(
    [[4.0, _NAN, -2.0, _INF, 0.5, -_INF, 7.0], [_NAN, 3.0, -1.0, 8.0, -5.0, 2.0, 6.0]]
)

_X64 = _X.nan_to_num(5.0, 7.0, -7.0).long() * 2**33 + 1  # ties; past int32

# stable sorts: ties (1., 1.; 0., -0.; the NaNs) have one right order
_CASES = {
    "sort": (lambda a: torch.sort(a, dim=1, stable=True), _X),
    "sort descending": (lambda a: torch.sort(a, dim=1, descending=True, stable=True), _X),
    "sort dim 0": (lambda a: torch.sort(a.t(), dim=0, stable=True), _X),
    "argsort": (lambda a: a.argsort(dim=-1, stable=True), _X),
    "argsort descending": (lambda a: torch.argsort(a, dim=1, descending=True, stable=True), _X),
    "msort": (lambda a: a.t().msort(), _UNIQUE),
    "sort unstable, unique values": (lambda a: a.sort(1), _UNIQUE),
    "sort descending, unique values": (lambda a: a.sort(1, descending=True), _UNIQUE),
    "topk largest": (lambda a: a.topk(3, 1), _UNIQUE),
    "topk smallest": (lambda a: a.topk(4, 1, largest=False), _UNIQUE),
    "topk dim 0": (lambda a: a.topk(1, 0), _UNIQUE),
    "bfloat16 sort": (lambda a: torch.sort(a.bfloat16(), dim=1, stable=True), _X),
    "float16 topk": (lambda a: a.half().topk(2, 1, largest=False), _UNIQUE),
    "int32 sort": (
        lambda a: torch.sort(
            a.nan_to_num(5.0, 7.0, -7.0).int(), dim=1, descending=True, stable=True
        ),
        _X,
    ),
    # 64-bit inputs (eager sorts them at full width on the CPU fallback): a float64 sort
    # with NaN came back unsorted, the comparator being a plain LT
    "float64 sort": (lambda a: torch.sort(a, dim=1, stable=True), _X.double()),
    "float64 sort descending": (
        lambda a: torch.sort(a, dim=1, descending=True, stable=True),
        _X.double(),
    ),
    "float64 topk": (lambda a: a.topk(3, 1), _UNIQUE.double()),
    "float64 argsort dim 0": (lambda a: torch.argsort(a.t(), dim=0, stable=True), _X.double()),
    "int64 sort past int32": (lambda a: torch.sort(a, dim=1, stable=True), _X64),
    "int64 sort descending": (lambda a: torch.sort(a, dim=0, descending=True, stable=True), _X64),
    "int64 topk smallest": (
        lambda a: a.topk(4, 1, largest=False),
        _UNIQUE.nan_to_num(5.0, 9.0, -9.0).long() * 2**33 - 2**40,
    ),
}


def _same(out, ref):
    assert out.dtype == ref.dtype and out.shape == ref.shape
    out = out.cpu()
    if ref.dtype.is_floating_point:
        assert torch.equal(out.isnan(), ref.isnan()), (out, ref)
        num = ~ref.isnan()
        assert torch.equal(out[num], ref[num]), (out, ref)
        assert torch.equal(out[num].signbit(), ref[num].signbit()), (out, ref)  # -0.0
    else:
        assert torch.equal(out, ref), (out, ref)


@pytest.mark.parametrize("name", list(_CASES))
def test_sort_matches_cpu(name):
    f, x = _CASES[name]
    out = torch.compile(f, backend="neuron")(x.to("neuron"))
    ref = f(x)
    out, ref = (out, ref) if isinstance(ref, tuple) else ((out,), (ref,))
    for o, r in zip(out, ref):
        _same(o, r)


def test_sort_gradient_matches_cpu():
    def f(a):
        return (
            torch.sort(a, dim=1, stable=True).values * torch.arange(12.0, device=a.device)
        ).sum()

    x = _X.nan_to_num(4.0)
    a = x.clone().requires_grad_()
    an = x.to("neuron").requires_grad_()
    torch.compile(f, backend="neuron")(an).backward()
    f(a).backward()
    assert torch.equal(an.grad.cpu(), a.grad)


def test_64bit_sort_matches_eager():
    # the same program eager on neuron (sort runs on the CPU fallback, at full width)
    for name in ("float64 sort descending", "int64 sort past int32"):
        f, x = _CASES[name]
        x = x.to("neuron")
        for o, e in zip(torch.compile(f, backend="neuron")(x), f(x)):
            _same(o, e.cpu())


@pytest.mark.parametrize("dtype,tiny", [(torch.float32, 1e-40), (torch.float64, 1e-310)])
def test_sort_of_subnormals_matches_eager_and_cpu(dtype, tiny):
    # the key mapped -0.0 to 0.0 with a float compare, true for subnormals under XLA's
    # flush: they became ties and the output kept the input order (unsorted)
    torch._dynamo.reset()
    x = torch.tensor([tiny, 0.0, -tiny, tiny / 100, -0.0, 3.0, float("nan")], dtype=dtype)
    f = lambda t: torch.sort(t)
    got = torch.compile(f, backend="neuron")(x.to("neuron"))
    want, eager = f(x), f(x.to("neuron"))
    assert torch.equal(got[1].cpu(), want[1]) and torch.equal(got[1].cpu(), eager[1].cpu())
    assert torch.allclose(got[0].cpu(), want[0], rtol=0, atol=0, equal_nan=True)
