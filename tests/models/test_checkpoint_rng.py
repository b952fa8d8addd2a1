"""Activation checkpointing with dropout recomputes the same dropout masks on
neuron (torch.utils.checkpoint restores the device's RNG state, which it
does only for a device module that reads as initialized), and every
device-module attribute torch's own code reads from torch.cuda exists on
torch.neuron (docs/device_module_audit.md)."""

import pytest
import torch
import torch.utils.checkpoint as cp

DEV = "neuron"


def _grads(checkpointed: bool, use_reentrant: bool) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    lin = torch.nn.Linear(16, 16).to(DEV)
    x = torch.randn(8, 16, device=DEV, requires_grad=True)

    def block(t):
        return torch.nn.functional.dropout(torch.tanh(lin(t)), 0.3, training=True)

    torch.neuron.manual_seed(123)
    y = cp.checkpoint(block, x, use_reentrant=use_reentrant) if checkpointed else block(x)
    (y * y).sum().backward()
    return x.grad.cpu(), lin.weight.grad.cpu()


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_with_dropout_matches_plain_backward(use_reentrant):
    gx, gw = _grads(False, use_reentrant)
    cx, cw = _grads(True, use_reentrant)
    assert torch.equal(gx, cx)
    assert torch.equal(gw, cw)


def test_hf_bert_gradient_checkpointing_with_dropout():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
    )  # default dropout 0.1
    torch.manual_seed(0)
    model = transformers.BertModel(cfg).to(DEV).train()
    ids = torch.randint(0, 64, (2, 12), device=DEV)

    def grads():
        model.zero_grad()
        torch.neuron.manual_seed(7)
        model(input_ids=ids).last_hidden_state.square().sum().backward()
        return [p.grad.cpu().clone() for p in model.parameters() if p.grad is not None]

    plain = grads()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    ckpt = grads()
    assert len(plain) == len(ckpt)
    for a, b in zip(plain, ckpt):
        assert torch.equal(a, b)


def test_rng_state_helpers_torch_reads():
    # torch.utils.checkpoint, torch._prims (graph-safe RNG), torch._functorch
    assert torch.neuron._initialized
    gens = torch.neuron.default_generators
    assert len(gens) == torch.neuron.device_count()
    assert gens[1].device == torch.device(DEV, 1)
    g = torch.neuron._get_generator(torch.device(DEV, 2))
    assert g.device == torch.device(DEV, 2)
    from torch._functorch._aot_autograd.utils import get_device_rng_state

    torch.neuron.manual_seed(5)
    state = get_device_rng_state(torch.device(DEV, 0))
    a = torch.rand(4, device=DEV).cpu()
    torch.neuron.set_rng_state(state)
    assert torch.equal(a, torch.rand(4, device=DEV).cpu())


def test_exchange_device():
    assert torch.neuron.exchange_device(2) == 0
    assert torch.neuron.current_device() == 2
    assert torch.neuron.maybe_exchange_device(0) == 2
    assert torch.neuron.current_device() == 0
    assert torch.neuron.exchange_device(-1) == -1


# docs/device_module_audit.md: what torch's device-generic code reads.
AUDITED = [
    "_initialized",
    "device",
    "get_rng_state",
    "set_rng_state",
    "default_generators",
    "_get_generator",
    "device_count",
    "current_device",
    "set_device",
    "is_available",
    "is_initialized",
    "get_device_name",
    "Stream",
    "Event",
    "stream",
    "current_stream",
    "synchronize",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "empty_cache",
    "get_amp_supported_dtype",
    "_utils",
    "exchange_device",
    "maybe_exchange_device",
]


@pytest.mark.parametrize("name", AUDITED)
def test_device_module_has_what_torch_reads(name):
    assert hasattr(torch.neuron, name)
    assert torch.get_device_module("neuron") is torch.neuron
