"""AOTAutograd's joint graph is split by the min-cut partitioner with views recomputed
(issue 24): the forward executable computes fewer bytes of saved activations than with the
default partitioner (which TORCHNEURON_PARTITIONER=default restores) and saves no view of
an input (a copy in our executable), and gradients match the CPU either way."""

import pytest
import torch
import torch.nn.functional as F
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401
from torchneuron.compiler import config, graph_compiler

_VIEWS = (torch.ops.aten.permute.default, torch.ops.aten.t.default, torch.ops.aten.view.default)


def _mlp(x, w1, w2):
    h = x @ w1
    return (F.gelu(h, approximate="tanh") * torch.sigmoid(h) @ w2).pow(2).mean()


def _forward_outputs(monkeypatch) -> tuple[int, int]:
    """Compiles _mlp's training graphs and checks the gradients against the CPU; the bytes
    of the forward graph's computed outputs, and how many of them are views of inputs."""
    seen = []
    real = graph_compiler.compile_graph

    def spy(gm, example_inputs, graph_name, *a, **k):
        if "_forward_" in graph_name:
            out = next(n for n in gm.graph.nodes if n.op == "output")
            computed = [n for n in out.args[0] if n.op != "placeholder"]
            nbytes = sum(n.meta["val"].numel() * n.meta["val"].element_size() for n in computed)
            views = [n for n in computed if n.target in _VIEWS and n.args[0].op == "placeholder"]
            seen.append((nbytes, len(views)))
        return real(gm, example_inputs, graph_name, *a, **k)

    monkeypatch.setattr(graph_compiler, "compile_graph", spy)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 32, generator=g)
    w1 = torch.randn(32, 64, generator=g, requires_grad=True)
    w2 = torch.randn(64, 8, generator=g, requires_grad=True)
    _mlp(x, w1, w2).backward()
    xn, w1n, w2n = (t.detach().to("neuron").requires_grad_(t.requires_grad) for t in (x, w1, w2))
    torch._dynamo.reset()
    torch.compile(_mlp, backend="neuron")(xn, w1n, w2n).backward()
    torch.testing.assert_close(w1n.grad.cpu(), w1.grad, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(w2n.grad.cpu(), w2.grad, atol=1e-5, rtol=1e-4)
    assert len(seen) == 1
    return seen[0]


def test_min_cut_saves_fewer_activations_than_default(monkeypatch):
    monkeypatch.delenv("TORCHNEURON_PARTITIONER", raising=False)
    min_cut, views = _forward_outputs(monkeypatch)
    monkeypatch.setenv("TORCHNEURON_PARTITIONER", "default")
    default, _ = _forward_outputs(monkeypatch)
    assert min_cut < default, (min_cut, default)
    assert views == 0


def test_unknown_partitioner_is_a_value_error(monkeypatch):
    monkeypatch.setenv("TORCHNEURON_PARTITIONER", "greedy")
    with pytest.raises(ValueError, match="TORCHNEURON_PARTITIONER"):
        config.partitioner()
