"""Ops torch-mlir has no lowering for, now decomposed (decompositions_indexed.py,
decompositions_order.py): ``scatter_reduce``/``scatter(reduce=)``/``index_reduce``,
``histc``, ``kthvalue``, ``median``/``nanmedian``, ``mode``, and the gradients of the
order statistics; each against the CPU (they were refused, naming the op)."""

import pytest
import torch

import torchneuron  # noqa: F401

_IDX = torch.tensor([[0, 2, 2, 4], [1, 1, 3, 0], [4, 4, 4, 4]])

CASES = {
    # reduce, include_self, dtype: every mode; NaN propagates in amax/amin
    **{
        f"scatter_reduce {r} include_self={inc} {dt}": (
            lambda x, r=r, inc=inc: x.scatter_reduce(
                1, _IDX.to(x.device), x[:, :4] * 3 - 1, r, include_self=inc
            ),
            dt,
        )
        for r in ("sum", "prod", "mean", "amax", "amin")
        for inc in (True, False)
        for dt in (torch.float32, torch.int64)
    },
    "scatter reduce=multiply": (
        lambda x: x.scatter(1, _IDX[:2].to(x.device), x[:2] + 1, reduce="multiply"),
        torch.float32,
    ),
    "scatter value reduce=add": (
        lambda x: x.scatter(1, _IDX.to(x.device), 2.5, reduce="add"),
        torch.float32,
    ),
    "index_reduce amax dim 0": (
        lambda x: x.index_reduce(0, torch.tensor([2, 0, 2], device=x.device), x * 2, "amax"),
        torch.float32,
    ),
    "index_reduce mean int64 exclude self": (
        lambda x: x.index_reduce(
            1, torch.tensor([0, 4, 4, 1, 0], device=x.device), x - 3, "mean", include_self=False
        ),
        torch.int64,
    ),
    "histc range": (lambda x: torch.histc(x, bins=7, min=-1.0, max=2.0), torch.float32),
    "histc own range": (lambda x: torch.histc(x, bins=5), torch.float32),
    "kthvalue dim 0 keepdim": (lambda x: torch.kthvalue(x, 2, 0, keepdim=True), torch.float32),
    "median": (lambda x: torch.median(x), torch.float32),
    "median dim 1": (lambda x: torch.median(x, 1), torch.float32),
    "nanmedian dim 0": (lambda x: torch.nanmedian(x, 0), torch.float32),
    "nanmedian": (lambda x: torch.nanmedian(x), torch.float32),
    "mode dim 1": (lambda x: torch.mode(x, 1), torch.int64),
    "mode dim 0 keepdim": (lambda x: torch.mode(x, 0, keepdim=True), torch.float32),
}


def _input(dtype):
    g = torch.Generator().manual_seed(0)
    if dtype == torch.int64:
        return torch.randint(-3, 4, (3, 5), generator=g)
    x = torch.randn(3, 5, generator=g)
    return x


@pytest.mark.parametrize("name", list(CASES))
def test_matches_cpu(name):
    f, dtype = CASES[name]
    x = _input(dtype)
    torch._dynamo.reset()
    got = torch.compile(f, backend="neuron")(x.to("neuron"))
    want = f(x)
    if "mode" in name or "kthvalue" in name:  # tied values: any of their indices
        torch.testing.assert_close(got[0].cpu(), want[0])
        dim = 1 if "dim 1" in name else 0
        idx = got[1].cpu() if "keepdim" in name else got[1].cpu().unsqueeze(dim)
        torch.testing.assert_close(x.gather(dim, idx).reshape(want[0].shape), want[0])
    else:
        got = got.cpu() if isinstance(got, torch.Tensor) else tuple(t.cpu() for t in got)
        torch.testing.assert_close(got, want, equal_nan=True)


def test_median_nan_rows_match_cpu():
    """median: NaN at the first NaN's index; nanmedian: the lower median of the rest."""
    x = torch.tensor(
        [[1.0, float("nan"), 3.0, float("nan")], [4.0, 2.0, 8.0, 6.0], [float("nan")] * 4]
    )
    for f in (lambda t: torch.median(t, 1), lambda t: torch.nanmedian(t, 1)):
        torch._dynamo.reset()
        got = torch.compile(f, backend="neuron")(x.to("neuron"))
        want = f(x)
        torch.testing.assert_close(got.values.cpu(), want.values, equal_nan=True)
        assert torch.equal(got.indices.cpu()[:2], want.indices[:2])


def test_amax_nan_propagates_like_cpu():
    x = torch.tensor([1.0, float("nan"), 3.0, -2.0])
    idx = torch.tensor([0, 0, 1, 1])

    def f(t):
        return torch.zeros(2, device=t.device).scatter_reduce(
            0, idx.to(t.device), t, "amax", include_self=False
        )

    torch._dynamo.reset()
    torch.testing.assert_close(
        torch.compile(f, backend="neuron")(x.to("neuron")).cpu(), f(x), equal_nan=True
    )


@pytest.mark.parametrize("which", ["kthvalue", "median", "mode", "scatter_reduce amax"])
def test_gradients_match_cpu(which):
    f = {
        "kthvalue": lambda t: torch.kthvalue(t, 3, 1).values.sum(),
        "median": lambda t: (torch.median(t, 0).values * 2).sum() + torch.median(t),
        "mode": lambda t: torch.mode(t.round(), 1).values.sum(),
        "scatter_reduce amax": lambda t: t.scatter_reduce(
            1, _IDX.to(t.device), t[:, 1:], "amax"
        ).sum(),
    }[which]
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(1))
    xn = x.to("neuron").requires_grad_()
    x.requires_grad_()
    torch._dynamo.reset()
    torch.compile(f, backend="neuron")(xn).backward()
    f(x).backward()
    torch.testing.assert_close(xn.grad.cpu(), x.grad)


def _neg(x, v):
    y = x.clone()
    y[:, torch.tensor([-1, -4, 2], device=x.device)] = v[:, :3]
    return y


@pytest.mark.parametrize(
    "name",
    ["int rows", "int pairs accumulate", "negative index", "mask rows, one value per column"],
)
def test_index_put_matches_cpu(name):
    """``index_put`` with integer index tensors (a scatter) and a bool mask whose
    value is the same for every selected row (a ``where``): both were refused."""
    i = torch.tensor([0, 3, 2])
    f = {
        "int rows": lambda x, v: x.index_put((i.to(x.device),), v[:3]),
        "int pairs accumulate": lambda x, v: x.index_put(
            (i.to(x.device), i.to(x.device) + 1), v[0, :3], accumulate=True
        ),
        "negative index": lambda x, v: _neg(x, v),
        "mask rows, one value per column": lambda x, v: x.index_put((x[:, 0] > 0,), v[0]),
    }[name]
    g = torch.Generator().manual_seed(2)
    x, v = torch.randn(5, 5, generator=g), torch.randn(5, 5, generator=g)
    torch._dynamo.reset()
    got = torch.compile(f, backend="neuron")(x.to("neuron"), v.to("neuron"))
    torch.testing.assert_close(got.cpu(), f(x, v))


@pytest.mark.parametrize(
    "f",
    [
        lambda x, s: torch.as_strided_scatter(x, s[:2, :3], (2, 3), (4, 1), 1),
        lambda x, s: torch.as_strided_scatter(x, s[0, 0], (), (), 7),
        lambda x, s: torch.as_strided_copy(x, (3, 2), (1, 5), 2) * s[:3, :2],
    ],
    ids=["2x3 view", "0-dim view", "as_strided_copy"],
)
def test_as_strided_scatter_and_copy_match_cpu(f):
    """Flat positions gathered/scattered, as TorchNeuron's table does (were refused)."""
    g = torch.Generator().manual_seed(3)
    x, s = torch.randn(4, 5, generator=g), torch.randn(4, 5, generator=g)
    torch._dynamo.reset()
    got = torch.compile(f, backend="neuron")(x.to("neuron"), s.to("neuron"))
    torch.testing.assert_close(got.cpu(), f(x, s))


def _offset_input(dev):
    return torch.arange(12.0).to(dev)[2:11]


def _transposed_input(dev):
    return torch.arange(12.0).reshape(3, 4).to(dev).t()


def _write_at(x):
    x.as_strided([2], [1], 3).mul_(2)  # as_strided_scatter: offsets address the storage
    return x + 0


@pytest.mark.parametrize("make", [_offset_input, _transposed_input], ids=["offset", "transposed"])
def test_as_strided_writes_into_an_input_view_are_refused(make):
    """The graph's buffer of a view with a storage offset (or another layout) is not its
    storage, which as_strided's offset and strides address: the write landed elsewhere
    (silently wrong). Refused, naming the op, and the input is left as it was."""
    from torchneuron.compiler.errors import NeuronCompileError

    torch._dynamo.reset()
    x = make("neuron")
    before = x.cpu().clone()
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed, match="as_strided_scatter") as e:
        torch.compile(_write_at, backend="neuron")(x)
    assert isinstance(e.value.inner_exception, NeuronCompileError)
    assert torch.equal(x.cpu(), before)
    torch._dynamo.reset()
    assert torch.equal(_write_at(make("neuron")).cpu(), _write_at(make("cpu")))  # eager
