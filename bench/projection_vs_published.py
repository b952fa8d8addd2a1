"""The Trainium projection (torchneuron/check/projection/roofline.py) against figures AWS publishes.

AWS's Trn1 inference benchmarks (Neuron 2.27, "Trn1/Trn1n Inference Performance", last
update Dec 19th 2025, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/
benchmarks/trn1/trn1-inference-performance.html): trn1.2xlarge (1 chip, 2 NeuronCore-v2),
data parallel, sequence length 128, FP32 model with Matmult-BF16 autocast. Each model here
has the published architecture (transformers configs; weights do not change FLOPs), is
lowered to StableHLO and projected on NeuronCore-v2; the ratio projected/published of p50
latency and of instance throughput is printed. Run: .venv/bin/python bench/projection_vs_published.py
"""

from __future__ import annotations

import sys
import time

import torch

from torchneuron.check.projection import hardware, stablehlo
from torchneuron.check.projection import roofline as projection

#: (name, published throughput inferences/s, published p50 ms, batch) from the page above.
PUBLISHED = [
    ("bert-base-uncased", 3421.57, 9.34, 16),
    ("bert-large-uncased", 1104.44, 7.24, 4),
    ("distilbert-base-uncased", 6281.13, 5.07, 16),
]
SEQ = 128


def build(name: str):
    from transformers import BertConfig, BertModel, DistilBertConfig, DistilBertModel

    if name == "bert-base-uncased":
        return BertModel(BertConfig(), add_pooling_layer=True)
    if name == "bert-large-uncased":
        return BertModel(
            BertConfig(
                hidden_size=1024,
                num_hidden_layers=24,
                num_attention_heads=16,
                intermediate_size=4096,
            )
        )
    return DistilBertModel(DistilBertConfig())


def main() -> int:
    torch.manual_seed(0)
    rows = []
    for name, thr, p50_ms, batch in PUBLISHED:
        model = build(name).eval()
        ids = torch.randint(0, 1000, (batch, SEQ))
        t0 = time.time()
        text, how = stablehlo.lower(model, (ids,))
        r = projection.project(text, hardware.NEURONCORE_V2, batch, "bf16", None, 1, "trn1.2xlarge")
        lat_ms = r["latency_s_per_core"] * 1e3
        rows.append(
            (name, batch, lat_ms, p50_ms, r["throughput_per_instance"], thr, time.time() - t0)
        )
    print(
        "model | batch | projected p50 ms | published p50 ms | ratio | projected inf/s | published inf/s | ratio"
    )
    print("---|---|---|---|---|---|---|---")
    for name, batch, lat, pub_lat, thr, pub_thr, _ in rows:
        print(
            f"{name} | {batch} | {lat:.2f} | {pub_lat:.2f} | {lat / pub_lat:.2f} | {thr:.0f} | {pub_thr:.0f} | "
            f"{thr / pub_thr:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
