"""``Tensor.unfold`` (sliding windows) in compiled graphs (decompositions.unfold: torch-mlir
has no lowering for ``aten.unfold``), against the CPU: values and shape exactly, and the
gradient (core ATen's ``unfold_backward``) exactly, overlapping windows included."""

import pytest
import torch
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401

_CASES = {  # shape, dim, size, step
    "step < size": ((4, 9), 1, 3, 2),
    "step > size": ((4, 9), 1, 2, 3),
    "step == size": ((7,), 0, 3, 3),
    "dim negative": ((3, 10, 2), -2, 4, 1),
    "size == dim length": ((4, 9), 1, 9, 1),
    "size 0": ((4, 9), 1, 0, 2),
    "leading dim": ((5, 3, 4), 0, 2, 1),
    "many overlaps": ((3, 40), -1, 11, 2),  # each input element in up to 6 windows
    "0-dim": ((), 0, 1, 1),
}


@pytest.mark.parametrize("name", list(_CASES))
def test_unfold_and_gradient_match_cpu_exactly(name):
    shape, dim, size, step = _CASES[name]

    def f(x):
        return x.unfold(dim, size, step) * 1.5

    torch.manual_seed(0)
    x = torch.randn(shape, requires_grad=True)
    xn = x.detach().to("neuron").requires_grad_()
    got = torch.compile(f, backend="neuron")(xn)
    ref = f(x)
    assert got.shape == ref.shape
    assert torch.equal(got.detach().cpu(), ref.detach())
    grad = torch.randn(ref.shape)
    got.backward(grad.to("neuron"))
    ref.backward(grad)
    assert torch.equal(xn.grad.cpu(), x.grad)


def test_patches_of_a_transposed_image_match_cpu():
    """Two unfolds (2-d patches, as ViT-style patching) of a non-contiguous input."""

    def f(x):
        return x.transpose(-1, -2).unfold(2, 3, 2).unfold(3, 2, 2).sum(-1)

    x = torch.randn(2, 3, 8, 7)
    got = torch.compile(f, backend="neuron")(x.to("neuron"))
    assert torch.equal(got.cpu(), f(x))


@pytest.mark.parametrize("dtype", [torch.int64, torch.float64])
def test_unfold_moves_64bit_values_at_full_width(dtype):
    """Data movement: no value narrowed (int64 beyond int32, float64 digits kept)."""

    def f(x):
        return x.unfold(0, 4, 3)

    x = (
        torch.arange(11, dtype=dtype) * (2**40 + 1)
        if dtype == torch.int64
        else torch.randn(11, dtype=dtype)
    )
    got = torch.compile(f, backend="neuron")(x.to("neuron"))
    assert got.dtype == dtype and torch.equal(got.cpu(), f(x))


def test_bad_size_raises_as_eager():
    """Dynamo's fake-tensor run raises the meta function's RuntimeError before the backend."""

    def f(x):
        return x.unfold(1, 10, 1)

    x = torch.randn(4, 9)
    with pytest.raises(RuntimeError, match="(?i)maximum size for tensor at dimension 1"):
        f(x)
    with pytest.raises(RuntimeError, match="(?i)maximum size for tensor at dimension 1"):
        torch.compile(f, backend="neuron")(x.to("neuron"))
