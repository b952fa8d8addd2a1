"""nn.TransformerEncoder with a padding mask in eval mode (issue 7, section 2): its default
nested-tensor fast path runs natively on neuron (nested tensors over a neuron buffer, as far
as that path needs them) and matches the CPU; so does enable_nested_tensor=False."""

from __future__ import annotations

import copy
import warnings

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


def _encoder_with_norm():
    torch.manual_seed(2)
    layer = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True, activation="gelu")
    return nn.TransformerEncoder(layer, 3, norm=nn.LayerNorm(16)).eval()


@pytest.mark.parametrize("make", [_encoder, _encoder_with_norm])
@pytest.mark.parametrize(
    "mask", [MASK, torch.tensor([[False] * 5, [True] * 5, [False] * 4 + [True]])]
)
def test_default_nested_fast_path_matches_cpu(make, mask):
    cpu = make()
    dev = copy.deepcopy(cpu).to("neuron")
    torch.neuron.reset_fallback_stats()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch's "nested tensors are a prototype"
        ref = cpu(X, src_key_padding_mask=mask)
        got = dev(X.to("neuron"), src_key_padding_mask=mask.to("neuron"))
    assert torch.neuron.fallback_stats() == {}
    assert got.device.type == "neuron" and got.shape == ref.shape
    torch.testing.assert_close(got.cpu(), ref)  # zeros at padded positions, as the CPU's


def test_nested_from_mask_and_padding_round_trip():
    t = X.to("neuron")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nt = torch._nested_tensor_from_mask(t, (~MASK).to("neuron"))
        ref = torch._nested_tensor_from_mask(X, ~MASK)
    assert nt.is_nested and nt.device.type == "neuron"
    torch.testing.assert_close(nt.to_padded_tensor(-1.0).cpu(), ref.to_padded_tensor(-1.0))
    torch.testing.assert_close(
        nt.to_padded_tensor(0.0, (3, 7, 16)).cpu(), ref.to_padded_tensor(0.0, (3, 7, 16))
    )
    with pytest.raises(RuntimeError, match="left aligned"):
        torch._nested_tensor_from_mask(
            t, torch.tensor([[False, True] * 2 + [True]] * 3).to("neuron"), mask_check=True
        )


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
        assert torch._nested_tensor_from_mask_left_aligned(
            t, (~m).to("neuron")
        ) == torch._nested_tensor_from_mask_left_aligned(X, ~m)
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
