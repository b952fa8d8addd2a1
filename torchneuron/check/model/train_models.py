"""Built-in training workloads of ``torchneuron check``: factories returning
``(model, example_inputs, loss_fn)``, ``loss_fn(output) -> scalar loss``."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ... import models


def minilm_train(batch_size: int = 8, seed: int = 0):
    """all-MiniLM-L6-v2 (real weights, real sentences) fine-tuned to pull each sentence's
    embedding towards a fixed random target (cosine loss)."""
    model, inputs = models.minilm(batch_size=batch_size, seed=seed)
    g = torch.Generator().manual_seed(seed)
    target = torch.nn.functional.normalize(torch.randn(batch_size, 384, generator=g), dim=1)

    def loss_fn(out):
        return (1 - (out * target.to(out.device)).sum(-1)).mean()

    return model, inputs, loss_fn


def llama_tiny_train(batch_size: int = 4, seed: int = 0):
    """A tiny Llama (transformers' LlamaConfig: 2 layers, hidden 64, 4 heads, vocab 512),
    seeded random weights, next-token cross-entropy on seeded random tokens."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    model = LlamaForCausalLM(cfg)
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, cfg.vocab_size, (batch_size, 16), generator=g)

    def loss_fn(out):
        logits = out.logits[:, :-1]
        labels = ids[:, 1:].to(logits.device)
        return torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)
        )

    return model, {"input_ids": ids}, loss_fn


BUILTIN: dict[str, tuple[Callable, str]] = {
    "minilm-train": (
        minilm_train,
        "all-MiniLM-L6-v2 fine-tuning steps (real weights, cosine loss)",
    ),
    "llama-tiny-train": (
        llama_tiny_train,
        "tiny Llama (2 layers), next-token cross-entropy training steps",
    ),
}
