"""Index tensors and tensor constants in compiled graphs, against the CPU.

Negative index values (passes/semantics/wrap_negative_indices.py): StableHLO gather/scatter clamp
them, so ``x[torch.tensor([-1])]`` read row 0. Tensor constants (lowering.py): XLA
rejected torch-mlir's ``dense_resource`` blobs, and constants made on the device failed
in the importer under fake mode.
"""

import pytest
import torch

import torchneuron  # noqa: F401

_X = torch.arange(35.0).reshape(5, 7)
_IDX = torch.tensor([-1, 0, -2, -1])

_CASES = {
    "rows": lambda a, i: a[i],
    "cols": lambda a, i: a[:, i],
    "pairs": lambda a, i: a[i, i],
    "broadcast 2d": lambda a, i: a[i[None].t(), i],
    "take": lambda a, i: a.take(i),
    "index_put": lambda a, i: a.index_put((i,), torch.tensor(-1.0, device=a.device)),
    "index_put accumulate": lambda a, i: a.index_put(
        (i,), torch.ones(4, 7, device=a.device), accumulate=True
    ),
    "setitem": lambda a, i: (a.__setitem__((slice(None), i), 0.0), a)[1],
}


@pytest.mark.parametrize("name", list(_CASES))
def test_negative_index_values_match_cpu(name):
    f = _CASES[name]
    ref = f(_X.clone(), _IDX)
    out = torch.compile(f, backend="neuron")(_X.to("neuron"), _IDX.to("neuron"))
    assert torch.equal(out.cpu(), ref)


def test_negative_index_gradient_matches_cpu():
    def f(w, i):
        return (w[i] * torch.arange(7.0, device=w.device)).sum() + w[:, i].square().sum()

    w = _X.clone().requires_grad_()
    wn = _X.to("neuron").requires_grad_()
    torch.compile(f, backend="neuron")(wn, _IDX.to("neuron")).backward()
    f(w, _IDX).backward()
    assert torch.equal(wn.grad.cpu(), w.grad)


def test_constant_negative_index_matches_cpu():
    def f(a):
        return a[torch.tensor([[0, 4], [-1, 2]]), torch.tensor([[1], [-3]])]

    assert torch.equal(torch.compile(f, backend="neuron")(_X.to("neuron")).cpu(), f(_X))


@pytest.mark.parametrize(
    "dtype",
    [
        torch.bool,
        torch.uint8,
        torch.int8,
        torch.int32,
        torch.int64,
        torch.float16,
        torch.bfloat16,
        torch.float32,
    ],
)
def test_device_tensor_constants_match_cpu(dtype):
    vals = [1, 0, 3, 1, 5, 0, 2]

    def f(a):
        return a.to(dtype) * torch.tensor(vals, dtype=dtype, device=a.device)

    out = torch.compile(f, backend="neuron")(_X.to("neuron"))
    assert torch.equal(out.cpu(), f(_X))
