"""Helpers of the compile tests: a fresh NEFF cache folder per test, metrics reset; compiled
gradients against the CPU."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def fresh_compile_state(tmp_path, monkeypatch):
    """Each test: its own TORCH_NEURONX_NEFF_CACHE_DIR, empty in-memory cache, Dynamo reset."""
    from torchneuron.compiler import cache

    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "neff_cache"))
    cache.clear_memory_cache()
    torch._dynamo.reset()
    torch.neuron.reset_dynamo_metrics()
    yield
    torch.neuron.synchronize()
    torch._dynamo.reset()


def assert_compiled_gradients_match_cpu(f, cpu: list) -> None:
    """``f(*tensors)`` (a scalar loss) compiled with backend ``neuron`` on copies of ``cpu`` on
    the device: the loss and every input's gradient match eager ``f`` on the CPU."""
    dev = [t.to("neuron").requires_grad_() for t in cpu]
    for t in cpu:
        t.requires_grad_()
    torch._dynamo.reset()
    loss = torch.compile(f, backend="neuron")(*dev)
    loss.backward()
    ref = f(*cpu)
    ref.backward()
    torch.testing.assert_close(loss.cpu(), ref, atol=1e-3, rtol=1e-4)
    for d, c in zip(dev, cpu):
        torch.testing.assert_close(d.grad.cpu(), c.grad, atol=1e-4, rtol=1e-4)
