"""nn.TransformerEncoder with a padding mask in eval mode (issue 7, section 2): its default
nested-tensor fast path raises an error naming the cause and enable_nested_tensor=False;
with that setting it runs natively and matches the CPU."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn

import torchneuron  # noqa: F401


def _encoder(enable_nested_tensor=True):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=enable_nested_tensor).eval()


X = torch.randn(3, 5, 16, generator=torch.Generator().manual_seed(1))
MASK = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] * 2 + [True] * 3])


def test_default_nested_fast_path_names_cause_and_fix():
    enc = _encoder().to("neuron")
    with torch.no_grad(), pytest.raises(NotImplementedError,
                                        match=r"nested tensors.*enable_nested_tensor=False"):
        enc(X.to("neuron"), src_key_padding_mask=MASK.to("neuron"))
    # The process keeps working, the inputs are intact.
    assert torch.equal(X.to("neuron").cpu(), X)


def test_without_nested_tensor_matches_cpu():
    cpu = _encoder(enable_nested_tensor=False)
    dev = copy.deepcopy(cpu).to("neuron")
    torch.neuron.reset_fallback_stats()
    with torch.no_grad():
        got = dev(X.to("neuron"), src_key_padding_mask=MASK.to("neuron")).cpu()
        ref = cpu(X, src_key_padding_mask=MASK)
        nested_ref = _encoder()(X, src_key_padding_mask=MASK)  # the CPU's default path
    assert torch.neuron.fallback_stats() == {}
    torch.testing.assert_close(got, ref)
    keep = ~MASK.unsqueeze(-1)
    torch.testing.assert_close(got * keep, nested_ref)  # zeros at padded positions there


def test_mask_left_aligned_check_is_native():
    torch.neuron.reset_fallback_stats()
    t = X.to("neuron")
    for m in (MASK, torch.tensor([[True] + [False] * 4] * 3)):
        assert torch._nested_tensor_from_mask_left_aligned(t, (~m).to("neuron")) == \
            torch._nested_tensor_from_mask_left_aligned(X, ~m)
    assert torch.neuron.fallback_stats() == {}


def test_multihead_attention_fast_path_native():
    torch.manual_seed(0)
    cpu = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    dev = copy.deepcopy(cpu).to("neuron")
    torch.neuron.reset_fallback_stats()
    with torch.no_grad():
        ref = cpu(X, X, X, key_padding_mask=MASK)
        xd = X.to("neuron")
        got = dev(xd, xd, xd, key_padding_mask=MASK.to("neuron"))
    assert torch.neuron.fallback_stats() == {}
    for a, b in zip(ref, got):
        torch.testing.assert_close(b.cpu(), a)
