"""Compiled mode on the emulated NeuronCore: all-MiniLM-L6-v2 (real weights) through
torch.compile(backend="neuron"), compared with the CPU, with the compile records and a
warm start from the executable cache. Run: `.venv/bin/python examples/compile_demo.py`."""

import os
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TORCH_NEURONX_NEFF_CACHE_DIR", tempfile.mkdtemp(prefix="neff_demo_"))

import torch  # noqa: E402

from torchneuron import models  # noqa: E402
from torchneuron.compiler import cache  # noqa: E402


def main():
    model, inputs = models.minilm(batch_size=8)
    with torch.no_grad():
        ref = model(**inputs)
    model.to("neuron")
    dev = {k: v.to("neuron") for k, v in inputs.items()}
    for run in ("cold", "warm"):
        torch._dynamo.reset()
        cache.clear_memory_cache()
        torch.neuron.reset_dynamo_metrics()
        compiled = torch.compile(model, backend="neuron", options={"model_name": "minilm"})
        t0 = time.perf_counter()
        with torch.no_grad():
            out = compiled(**dev).cpu()
        first = time.perf_counter() - t0
        (r,) = torch.neuron.get_dynamo_metrics()
        cos = torch.nn.functional.cosine_similarity(out, ref).min().item()
        print(
            f"{run:4s}: graph {r['graph_name']} ({r['graph_node_count']} nodes), cache "
            f"{r['cache']}, lowering {r['lower_us'] / 1e3:.0f} ms, compile "
            f"{r['compile_us'] / 1e3:.0f} ms, first call {first:.2f} s; min cosine vs CPU "
            f"{cos:.7f}, max abs diff {(out - ref).abs().max().item():.2e}"
        )
    print(f"executables in {os.environ['TORCH_NEURONX_NEFF_CACHE_DIR']}")


if __name__ == "__main__":
    main()
