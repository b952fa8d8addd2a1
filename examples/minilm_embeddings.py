"""Demo: all-MiniLM-L6-v2 (real weights) embeds real sentences on `neuron`
and on the CPU; prints the agreement and the operators that fell back.

The only change from a CPU program is the device string.
"""

import torch
import torch.nn.functional as F

from torchneuron.models import minilm

model, inputs = minilm(batch_size=24)
with torch.no_grad():
    ref = model(**inputs)
    torch.neuron.reset_fallback_stats()
    dev_model = model.to("neuron")
    out = dev_model(**{k: v.to("neuron") for k, v in inputs.items()}).cpu()
    model.to("cpu")

cos = F.cosine_similarity(out, ref, dim=1)
print(f"device: {torch.neuron.get_device_name()}  ({torch.neuron.device_count()} visible cores)")
print(f"sentences: {out.shape[0]}, embedding dim: {out.shape[1]}")
print(f"cosine similarity neuron vs cpu: min {cos.min().item():.7f}")
print(f"max abs difference: {(out - ref).abs().max().item():.3e}")
print(f"fallback ops: {torch.neuron.fallback_stats() or 'none'}")
print(f"64-bit narrowing: {torch.neuron.narrowing_stats() or 'none'}")
print(f"peak HBM allocated: {torch.neuron.max_memory_allocated() / 2**20:.1f} MiB")
