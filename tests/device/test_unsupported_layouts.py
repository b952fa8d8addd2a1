"""Sparse and quantized tensors are not supported on neuron (TorchNeuron
registers no kernels for them): every way in raises one NotImplementedError
that names the layout and says what to do, instead of the dispatcher's
"'Sparseneuron' backend" or a broken tensor (x.to_sparse() on neuron returned
a strided tensor over no memory, and printing it crashed); issue 23. A
refused call leaves the process working."""

import warnings

import pytest
import torch

SPARSE = (
    r"^neuron: sparse COO tensors \(layout torch\.sparse_coo\) are not supported on neuron "
    r"\(aten::.*\)\. Densify with \.to_dense\(\).*keep the module that needs it on the CPU.*"
    r"sparse=False"
)
QUANTIZED = (
    r"^neuron: quantized tensors \(dtype torch\.quint8\) are not supported on neuron "
    r"\(aten::.*\)\. Dequantize with \.dequantize\(\).*on the CPU"
)


def _coo():
    return torch.sparse_coo_tensor(torch.tensor([[0, 2]]), torch.tensor([1.0, 3.0]), (4,))


def _embedding_step(sparse):
    torch.manual_seed(0)
    emb = torch.nn.Embedding(10, 4, sparse=sparse).to("neuron")
    emb(torch.tensor([1, 2, 2], device="neuron")).sum().backward()
    return emb.weight.grad


SPARSE_CASES = {
    "to_sparse": lambda: torch.tensor([1.0, 0.0, 3.0], device="neuron").to_sparse(),
    "sparse_coo_tensor_device": lambda: torch.sparse_coo_tensor(
        torch.tensor([[0, 2]]), torch.tensor([1.0, 3.0]), (4,), device="neuron"
    ),
    "sparse_coo_tensor_of_neuron_parts": lambda: torch.sparse_coo_tensor(
        torch.tensor([[0, 2]], device="neuron"), torch.tensor([1.0, 3.0], device="neuron"), (4,)
    ),
    "cpu_sparse_to_neuron": lambda: _coo().to("neuron"),
    "zeros_sparse_layout": lambda: torch.zeros(4, layout=torch.sparse_coo, device="neuron"),
    "embedding_sparse_backward": lambda: _embedding_step(sparse=True),
    "embedding_bag_sparse_backward": lambda: (
        torch.nn.EmbeddingBag(10, 4, sparse=True)
        .to("neuron")(torch.tensor([[1, 2]], device="neuron"))
        .sum()
        .backward()
    ),
}
QUANTIZED_CASES = {
    "quantize_per_tensor_on_neuron": lambda: torch.quantize_per_tensor(
        torch.tensor([0.5, 1.0], device="neuron"), 0.1, 0, torch.quint8
    ),
    "quantized_to_neuron": lambda: torch.quantize_per_tensor(
        torch.tensor([0.5, 1.0]), 0.1, 0, torch.quint8
    ).to("neuron"),
    "empty_quantized_dtype": lambda: torch.empty(3, dtype=torch.quint8, device="neuron"),
}


def _still_works():
    x = torch.arange(6.0, device="neuron").reshape(2, 3)
    torch.testing.assert_close((x * 2).sum(0).cpu(), (torch.arange(6.0).reshape(2, 3) * 2).sum(0))


@pytest.mark.parametrize("name", sorted(SPARSE_CASES))
def test_sparse_raises_one_clear_error(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fallback's once-per-process warning
        with pytest.raises(NotImplementedError, match=SPARSE):
            SPARSE_CASES[name]()
    _still_works()


@pytest.mark.parametrize("name", sorted(QUANTIZED_CASES))
def test_quantized_raises_one_clear_error(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(NotImplementedError, match=QUANTIZED):
            QUANTIZED_CASES[name]()
    _still_works()


def test_other_layouts_named_too():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(
            NotImplementedError, match=r"sparse CSR tensors \(layout torch\.sparse_csr\)"
        ):
            torch.ones(3, 3, device="neuron").to_sparse_csr()
    _still_works()


def test_the_advice_works():
    # What the message says to do gives the CPU's results on neuron.
    dense = _coo().to_dense().to("neuron")
    torch.testing.assert_close(dense.cpu(), _coo().to_dense())
    q = torch.quantize_per_tensor(torch.tensor([0.5, 1.0]), 0.1, 0, torch.quint8)
    torch.testing.assert_close(q.dequantize().to("neuron").cpu(), q.dequantize())
    grad = _embedding_step(sparse=False)
    torch.manual_seed(0)
    emb = torch.nn.Embedding(10, 4)
    emb(torch.tensor([1, 2, 2])).sum().backward()
    torch.testing.assert_close(grad.cpu(), emb.weight.grad)
