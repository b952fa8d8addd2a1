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


def assert_weighted_gradient_matches_cpu(f, shape, dtype=torch.float32, **tol) -> None:
    """The gradient of ``(f(x) * w).sum()`` with respect to a random ``x`` of ``shape``, with
    ``f`` compiled by backend ``neuron`` on the device, matches eager on the CPU (``tol``:
    assert_close's rtol/atol, the dtype's defaults when empty)."""
    x = torch.randn(shape).to(dtype)
    w = torch.randn_like(f(x))
    xr = x.clone().requires_grad_()
    (ref,) = torch.autograd.grad((f(xr) * w).sum(), [xr])
    xd = x.to("neuron").requires_grad_()
    torch._dynamo.reset()
    out = torch.compile(lambda x, w: f(x) * w, backend="neuron")(xd, w.to("neuron"))
    (got,) = torch.autograd.grad(out.sum(), [xd])
    torch.testing.assert_close(got.cpu(), ref, **tol)
