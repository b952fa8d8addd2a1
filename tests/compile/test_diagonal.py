"""``diagonal`` and its gradient ``diagonal_scatter`` in compiled graphs
(decompositions.diagonal: torch-mlir lowers neither), against the CPU: values, the
gradient, and an in-place write through ``x.diagonal()``."""

import pytest
import torch

import torchneuron  # noqa: F401

_CASES = {
    "trace": (lambda x: torch.trace(x), (4, 5)),
    "diag": (lambda x: torch.diag(x), (4, 5)),
    "diag offset 2": (lambda x: torch.diag(x, 2), (4, 5)),
    "diag offset -1": (lambda x: torch.diag(x, -1), (4, 5)),
    "diagonal past the end": (lambda x: x.diagonal(offset=7), (4, 5)),
    "gram diagonal": (lambda x: (x @ x.t()).diagonal(), (4, 5)),
    "4-d dims 1, 3": (lambda x: torch.diagonal(x, 1, 1, 3), (2, 3, 4, 5)),
    "4-d dims -1, 0": (lambda x: torch.diagonal(x, -2, -1, 0), (2, 3, 4, 5)),
}


@pytest.mark.parametrize("name", list(_CASES))
def test_diagonal_and_gradient_match_cpu(name):
    f, shape = _CASES[name]
    torch.manual_seed(0)
    x = torch.randn(shape, requires_grad=True)
    xn = x.detach().to("neuron").requires_grad_()
    torch._dynamo.reset()
    got = torch.compile(f, backend="neuron")(xn)
    ref = f(x)
    torch.testing.assert_close(got.detach().cpu(), ref.detach())
    grad = torch.randn(ref.shape)
    got.backward(grad.to("neuron"))
    ref.backward(grad)
    torch.testing.assert_close(xn.grad.cpu(), x.grad)


def test_write_through_diagonal_matches_cpu():
    def f(x):
        x.diagonal().fill_(0.0)
        return x * 2

    x = torch.randn(4, 4)
    xn = x.to("neuron")
    torch._dynamo.reset()
    got = torch.compile(f, backend="neuron")(xn)
    ref = f(x)
    assert torch.equal(got.cpu(), ref) and torch.equal(xn.cpu(), x)
