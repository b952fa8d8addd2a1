"""Real models on `neuron` against the CPU (issue section 5): all-MiniLM-L6-v2
with its published weights on real sentences, greedy generation of a 2-layer
GPT-2, and a small ResNet. Every run also asserts which operators took the
CPU fallback."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import torchneuron  # noqa: E402,F401
from torchneuron import models  # noqa: E402


def _to(inputs, device):
    return {k: v.to(device) for k, v in inputs.items()}


def _run_on_neuron(model, fn):
    """Run ``fn(model_on_neuron)`` with fresh fallback counters; returns
    (result, fallback op names). The model is moved back to the CPU after."""
    torch.neuron.synchronize()
    torch.neuron.reset_fallback_stats()
    model.to("neuron")
    try:
        with torch.no_grad():
            out = fn(model)
        torch.neuron.synchronize()
        return out, sorted(torch.neuron.fallback_stats())
    finally:
        model.to("cpu")


@pytest.mark.slow
def test_minilm_real_weights_match_cpu():
    texts = models.sentences()
    assert len(texts) >= 20
    model, inputs = models.minilm(batch_size=len(texts), texts=texts)
    with torch.no_grad():
        ref = model(**inputs)
    out, fallbacks = _run_on_neuron(model, lambda m: m(**_to(inputs, "neuron")).cpu())

    assert out.shape == ref.shape == (len(texts), 384)
    assert out.dtype == torch.float32
    cos = F.cosine_similarity(out, ref, dim=1)
    assert cos.min().item() >= 0.99999, f"per-sentence cosine similarity: {cos.tolist()}"
    assert (out - ref).abs().max().item() <= 1e-4
    assert fallbacks == [], f"operators that fell back to the CPU: {fallbacks}"


def test_minilm_embeddings_are_meaningful():
    """Sanity of the real weights (not of the device): paraphrases are closer
    than unrelated sentences, on neuron."""
    texts = [
        "A man is playing a guitar.",
        "Someone plays an acoustic guitar.",
        "The stock market fell sharply today.",
    ]
    model, inputs = models.minilm(batch_size=3, texts=texts)
    emb, _ = _run_on_neuron(model, lambda m: m(**_to(inputs, "neuron")).cpu())
    sim = emb @ emb.T
    assert sim[0, 1] > sim[0, 2] + 0.2


def test_gpt2_greedy_generate_matches_cpu():
    model, inputs = models.gpt2_tiny(batch_size=2, initializer_range=0.1)
    kwargs = dict(do_sample=False, max_new_tokens=20, pad_token_id=model.config.eos_token_id)
    with torch.no_grad():
        ref = model.generate(**inputs, **kwargs)
    out, fallbacks = _run_on_neuron(
        model, lambda m: m.generate(**_to(inputs, "neuron"), **kwargs).cpu()
    )

    new = ref[:, inputs["input_ids"].shape[1] :]
    assert new.shape == (2, 20)
    assert len(set(new.flatten().tolist())) > 5, "degenerate reference: pick other weights"
    assert torch.equal(out, ref), f"neuron {out.tolist()} != cpu {ref.tolist()}"
    assert fallbacks == [], f"operators that fell back to the CPU: {fallbacks}"


def test_gpt2_logits_match_cpu():
    model, inputs = models.gpt2_tiny(batch_size=2)
    with torch.no_grad():
        ref = model(**inputs).logits
    out, fallbacks = _run_on_neuron(model, lambda m: m(**_to(inputs, "neuron")).logits.cpu())
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-4)
    assert fallbacks == []


def test_resnet_logits_match_cpu():
    model, inputs = models.resnet_tiny(batch_size=2)
    with torch.no_grad():
        ref = model(**inputs).logits
    out, fallbacks = _run_on_neuron(model, lambda m: m(**_to(inputs, "neuron")).logits.cpu())
    assert out.shape == ref.shape == (2, 10)
    assert (out - ref).abs().max().item() <= 1e-4
    assert fallbacks == [], f"operators that fell back to the CPU: {fallbacks}"


def test_mlp_matches_cpu():
    model, inputs = models.mlp(batch_size=8)
    with torch.no_grad():
        ref = model(**inputs)
    out, fallbacks = _run_on_neuron(model, lambda m: m(**_to(inputs, "neuron")).cpu())
    torch.testing.assert_close(out, ref, rtol=1.3e-6, atol=1e-5)
    assert fallbacks == []


def test_builtin_registry_lists_the_models():
    assert {"minilm", "gpt2-tiny", "resnet-tiny", "mlp"} <= set(models.BUILTIN)
