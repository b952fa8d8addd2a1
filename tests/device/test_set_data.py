"""``tensor.data = other`` between CPU and neuron tensors (FSDP2's ``fully_shard`` and
many libraries move parameters so): ATen's shallow-copy check knows only its own dense
backends, so it raised "incompatible tensor type" for neuron. Reference: the CPU values."""

import pytest
import torch

import torchneuron  # noqa: F401


def test_parameter_data_to_neuron_and_back_keeps_values_and_autograd():
    p = torch.nn.Parameter(torch.randn(3, 4))
    ref = p.detach().clone()
    p.data = p.to("neuron")
    assert p.device.type == "neuron" and isinstance(p, torch.nn.Parameter)
    assert torch.equal(p.detach().cpu(), ref)
    (p * torch.arange(12.0, device="neuron").view(3, 4)).sum().backward()
    assert torch.equal(p.grad.cpu(), torch.arange(12.0).view(3, 4))
    p.data = p.detach().cpu() * 2
    assert p.device.type == "cpu" and torch.equal(p.detach(), ref * 2)


def test_sparse_data_still_rejected():
    t = torch.randn(3, device="neuron")
    with pytest.raises(RuntimeError, match="incompatible tensor type"):
        t.data = torch.randn(3).to_sparse()
    assert t.device.type == "neuron" and t.layout == torch.strided
