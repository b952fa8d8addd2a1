"""``cumprod`` in compiled graphs (passes/legalize/decompose_cumprod.py: torch-mlir has no lowering
for it) and its gradient, zeros included (ATen's formula takes a bool max over a mask,
which needed lowering.unsigned_compares and bool max widened), against the CPU."""

import pytest
import torch

import torchneuron  # noqa: F401

torch.manual_seed(0)
_CASES = {
    "float rows": (lambda x: x.cumprod(1), torch.rand(3, 7) + 0.5),
    "int64 with a zero": (lambda x: x.cumprod(0), torch.tensor([1, 2, -3, 4, 5, 0, 7])),
    "int32 promoted to int64": (
        lambda x: x.cumprod(-1),
        torch.tensor([[3, -2, 5]], dtype=torch.int32),
    ),
    "dtype argument": (lambda x: torch.cumprod(x, 0, dtype=torch.float32), torch.tensor([1, 2, 3])),
    "0-dim": (lambda x: x.cumprod(0), torch.tensor(2.5)),
    "length 1": (lambda x: x.cumprod(1), torch.randn(2, 1)),
    "powers of two": (lambda x: x.cumprod(0), torch.tensor([2] * 20)),
    "nan and zero": (lambda x: x.cumprod(1), torch.tensor([[1.0, 0.0, 2.0, float("nan"), 3.0]])),
    "bool": (lambda x: x.cumprod(0), torch.tensor([True, True, False, True])),
}


@pytest.mark.parametrize("name", list(_CASES))
def test_cumprod_matches_cpu(name):
    f, x = _CASES[name]
    torch._dynamo.reset()
    got = torch.compile(f, backend="neuron")(x.to("neuron"))
    ref = f(x)
    assert got.dtype == ref.dtype
    torch.testing.assert_close(got.cpu(), ref, equal_nan=True)


@pytest.mark.parametrize(
    "x",
    [torch.rand(3, 6) + 0.5, torch.tensor([[1.0, 0.0, 2.0, 3.0], [0.0, 0.0, 1.0, 2.0]])],
    ids=["no zeros", "zeros"],
)
def test_cumprod_gradient_matches_cpu(x):
    def f(t):
        return (t.cumprod(1) * torch.arange(1.0, t.shape[1] + 1, device=t.device)).sum()

    a = x.clone().requires_grad_()
    an = x.to("neuron").requires_grad_()
    torch._dynamo.reset()
    torch.compile(f, backend="neuron")(an).backward()
    f(a).backward()
    torch.testing.assert_close(an.grad.cpu(), a.grad)


def _int64_products(x):
    return x.cumprod(0), x.cumprod(0, dtype=torch.float64), (x + 1).cumprod(0)


def test_int64_products_past_2_31_match_eager():
    # eager narrows int64 cumprod's input to int32 and ATen accumulates int32 in int64,
    # so [2**20, 2**20, 3] is exact; the scan decomposed before narrowing wrapped
    # every product ([2**20, 0, 0]). Inputs past int32 wrap first, in both.
    for vals in ([2**20, 2**20, 3], [-(2**16), 2**16, 2**16, 7], [2**32 + 3, 5, 2**31 - 1]):
        x = torch.tensor(vals, dtype=torch.int64)
        eager = _int64_products(x.to("neuron"))
        torch._dynamo.reset()
        comp = torch.compile(_int64_products, backend="neuron")(x.to("neuron"))
        for c, e in zip(comp, eager):
            assert c.dtype == e.dtype and torch.equal(c.cpu(), e.cpu()), (vals, c, e)
        if all(abs(v) < 2**31 - 1 for v in vals):
            assert torch.equal(comp[0].cpu(), x.cumprod(0))  # the CPU's, full width


def test_float64_cumprod_counted_once_as_eager():
    x = torch.rand(9, dtype=torch.float64).to("neuron") + 0.5
    f = lambda t: t.cumprod(0)  # noqa: E731
    stats = []
    for fn in (f, torch.compile(f, backend="neuron")):
        torch.neuron.reset_narrowing_stats()
        out = fn(x)
        torch.neuron.synchronize()
        stats.append(torch.neuron.narrowing_stats())
    assert stats[0] == stats[1] == {"aten::cumprod": 1}
    torch.testing.assert_close(out.cpu(), f(x).cpu(), rtol=1e-6, atol=0)
