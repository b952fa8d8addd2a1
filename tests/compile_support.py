"""Helpers of the compile tests: a fresh NEFF cache folder per test, metrics reset."""

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
