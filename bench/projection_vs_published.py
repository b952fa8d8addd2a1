"""The Trainium projection (torchneuron/check/projection/) against latencies AWS publishes.

AWS's inference benchmarks for NeuronCore-v2 (Trn1 and Inf2: the same core, 190 BF16 TFLOPS
and 820 GiB/s of HBM per two-core chip), each row a model, instance, batch and p50 latency
of one pass on one core (encoder rows: p50 = batch / (throughput / 2 cores) within 2 %, one
request in flight per core; vision rows, batch 1: p50 = 1 / throughput within 1 %, one request
on the instance). The rows are quoted in ``PUBLISHED`` with their page (``SOURCES``). Each
model is built with the published architecture from its transformers config (random weights:
the time projection reads shapes, not values), lowered to StableHLO and projected on
NeuronCore-v2, on the row's instance, twice: the bare roofline (``overheads.NONE``: no fitted
cost, no instance factor) and the projection ``torchneuron check --projection`` uses
(``overheads.FITTED``; on Inf2 x ``overheads.INSTANCE_FACTORS["inf2"]``). Printed per row:
projected / published p50, and whether the row was used to fit the overheads (``FIT``), the
Inf2 factor (``FIT (Inf2 factor)``), or held out.

    .venv/bin/python bench/projection_vs_published.py            # the table
    .venv/bin/python bench/projection_vs_published.py --fit      # + the least-squares fit
    .venv/bin/python bench/projection_vs_published.py --cache /tmp/shlo  # reuse lowerings

Lowering takes about a minute per model and batch on a 2-core host.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch

from torchneuron.check.projection import hardware, overheads, stablehlo
from torchneuron.check.projection import roofline as projection

_DOCS = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/benchmarks/"
_CSV = "github.com/aws-neuron/aws-neuron-sdk/blob/{commit}/about-neuron/benchmarks/{path}"
#: Where each row comes from: the page, its tab, and the CSV the page is generated from.
SOURCES = {
    "trn1-batch": (
        _DOCS + "trn1/trn1-inference-performance.html",
        "Encoder Models, Throughput optimized (last update Dec 19th 2025)",
        _CSV.format(commit="0fae2f1c", path="trn1/throughput_data_encoder.csv"),
    ),
    "trn1-rt": (
        _DOCS + "trn1/trn1-inference-performance.html",
        "Encoder Models, Latency optimized (last update Dec 19th 2025)",
        _CSV.format(commit="337e6041", path="trn1/latency_data_encoder.csv"),
    ),
    "inf2-batch": (
        _DOCS + "inf2/inf2-performance.html",
        "Encoder Models, Throughput optimized",
        _CSV.format(commit="4373facf", path="inf2/throughput_data_encoder.csv"),
    ),
    "inf2-vision": (
        _DOCS + "inf2/inf2-performance.html",
        "Vision Transformers / CNN Models, Latency optimized",
        _CSV.format(commit="7c165a3e", path="inf2/latency_data_vision.csv"),
    ),
}


@dataclass(frozen=True)
class Published:
    """One published row: p50 latency (ms) and throughput (inferences/s) of ``model`` at
    ``batch`` on ``instance`` (one chip, two NeuronCore-v2), Neuron SDK ``neuron``."""

    model: str
    instance: str
    batch: int
    p50_ms: float
    throughput: float
    neuron: str
    source: str


#: Sequence length 128, FP32 model compiled with Matmult-BF16 autocast, data parallel, on every
#: encoder row; 224x224 images on the vision rows. Not used: xlm-roberta-base (a masked-LM head
#: over 250k tokens whose 1 GB of logits per pass go to the host; trn1.32xlarge), ViT at batch
#: 2 and CLIP (p50 twice batch / per-core throughput: two requests in flight per core).
PUBLISHED = [
    Published("bert-base-uncased", "trn1.2xlarge", 16, 9.34, 3421.57, "2.27", "trn1-batch"),
    Published("bert-base-uncased", "trn1.2xlarge", 1, 0.94, 2085.45, "2.26", "trn1-rt"),
    Published("bert-large-uncased", "trn1.2xlarge", 4, 7.24, 1104.44, "2.27", "trn1-batch"),
    Published("bert-large-uncased", "trn1.2xlarge", 1, 2.67, 747.48, "2.27", "trn1-rt"),
    Published("distilbert-base-uncased", "trn1.2xlarge", 16, 5.07, 6281.13, "2.26", "trn1-batch"),
    Published("distilbert-base-uncased", "trn1.2xlarge", 1, 0.54, 3672.38, "2.27", "trn1-rt"),
    Published("albert-base-v2", "trn1.2xlarge", 16, 9.29, 3442.53, "2.27", "trn1-batch"),
    Published("albert-base-v2", "trn1.2xlarge", 1, 0.86, 2321.98, "2.27", "trn1-rt"),
    Published(
        "electra-base-discriminator", "trn1.2xlarge", 16, 9.33, 3425.28, "2.27", "trn1-batch"
    ),
    Published("electra-base-discriminator", "trn1.2xlarge", 1, 0.93, 2127.07, "2.27", "trn1-rt"),
    Published("roberta-base", "trn1.2xlarge", 16, 9.47, 3377.82, "2.27", "trn1-batch"),
    Published("roberta-base", "trn1.2xlarge", 1, 0.96, 2094.37, "2.27", "trn1-rt"),
    Published("roberta-large", "trn1.2xlarge", 8, 14.23, 1123.90, "2.27", "trn1-batch"),
    Published("roberta-large", "trn1.2xlarge", 1, 2.67, 747.58, "2.27", "trn1-rt"),
    Published("albert-base-v2", "inf2.xlarge", 8, 5.07, 3147.10, "2.25", "inf2-batch"),
    Published("bert-base-uncased", "inf2.xlarge", 8, 5.97, 2674.19, "2.27", "inf2-batch"),
    Published("bert-large-uncased", "inf2.xlarge", 4, 8.41, 950.05, "2.21", "inf2-batch"),
    Published("distilbert-base-uncased", "inf2.xlarge", 16, 6.01, 5307.88, "2.27", "inf2-batch"),
    Published(
        "electra-base-discriminator", "inf2.xlarge", 16, 11.02, 2889.75, "2.25", "inf2-batch"
    ),
    Published("roberta-base", "inf2.xlarge", 8, 5.42, 2920.38, "2.25", "inf2-batch"),
    Published("roberta-large", "inf2.xlarge", 4, 8.31, 962.70, "2.25", "inf2-batch"),
    Published("vit-base-patch16-224", "inf2.xlarge", 1, 1.406, 709.47, "2.14", "inf2-vision"),
    Published("resnet50", "inf2.xlarge", 1, 0.95, 1044.93, "2.14", "inf2-vision"),
    Published("resnet18", "inf2.xlarge", 1, 0.72, 1385.04, "2.14", "inf2-vision"),
    Published("resnet34", "inf2.xlarge", 1, 0.83, 1187.64, "2.14", "inf2-vision"),
    Published("resnet101", "inf2.xlarge", 1, 1.13, 882.61, "2.14", "inf2-vision"),
    Published("resnet152", "inf2.xlarge", 1, 1.35, 736.91, "2.14", "inf2-vision"),
]
#: The rows the overheads were fitted to (``overheads.py``): three models on Trn1, each at
#: batch 1 and at its throughput batch. Every other row is held out.
FIT_MODELS = {"bert-base-uncased", "bert-large-uncased", "distilbert-base-uncased"}
SEQ = 128


def is_fit(row: Published) -> bool:
    return row.model in FIT_MODELS and row.instance.startswith("trn1")


def inf2_pairs(rows: list[Published] = PUBLISHED) -> list[tuple[Published, Published]]:
    """``[(inf2 row, trn1 row)]``: a FIT model AWS publishes at the same batch on both: the
    rows ``overheads.INSTANCE_FACTORS["inf2"]`` is fitted to (published / published)."""
    trn1 = {(r.model, r.batch): r for r in rows if r.instance.startswith("trn1")}
    return [
        (r, trn1[(r.model, r.batch)])
        for r in rows
        if r.instance.startswith("inf2") and r.model in FIT_MODELS and (r.model, r.batch) in trn1
    ]


def role(row: Published) -> str:
    """``FIT`` (a row the overheads were fitted to), ``FIT (Inf2 factor)`` (an Inf2 row the
    Inf2 factor was fitted to), ``fit model, not fitted`` (a fit model on Inf2 at a batch
    Trn1 lacks) or ``held out`` (a model the fit never saw)."""
    if is_fit(row):
        return "FIT"
    if any(row is i for i, _ in inf2_pairs()):
        return "FIT (Inf2 factor)"
    return "fit model, not fitted" if row.model in FIT_MODELS else "held out"


def _config(name: str):
    import transformers as t

    large = {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16}
    large["intermediate_size"] = 4096
    roberta = {"vocab_size": 50265, "max_position_embeddings": 514, "type_vocab_size": 1}
    roberta["pad_token_id"] = 1
    # torchvision's ResNet-18/34: basic blocks, 64-512 channels
    basic = {"layer_type": "basic", "hidden_sizes": [64, 128, 256, 512]}
    return {
        "bert-base-uncased": lambda: t.BertModel(t.BertConfig()),
        "bert-large-uncased": lambda: t.BertModel(t.BertConfig(**large)),
        "distilbert-base-uncased": lambda: t.DistilBertModel(t.DistilBertConfig()),
        # AlbertConfig() is albert-xxlarge: the base model's sizes
        "albert-base-v2": lambda: t.AlbertModel(
            t.AlbertConfig(
                vocab_size=30000,
                embedding_size=128,
                hidden_size=768,
                num_attention_heads=12,
                intermediate_size=3072,
            )
        ),
        # ElectraConfig() is electra-small: the base discriminator's sizes
        "electra-base-discriminator": lambda: t.ElectraModel(
            t.ElectraConfig(
                embedding_size=768, hidden_size=768, num_attention_heads=12, intermediate_size=3072
            )
        ),
        "roberta-base": lambda: t.RobertaModel(t.RobertaConfig(**roberta)),
        "roberta-large": lambda: t.RobertaModel(t.RobertaConfig(**roberta, **large)),
        "vit-base-patch16-224": lambda: t.ViTModel(t.ViTConfig()),
        "resnet50": lambda: t.ResNetModel(t.ResNetConfig()),  # the defaults are ResNet-50's
        "resnet18": lambda: t.ResNetModel(t.ResNetConfig(depths=[2, 2, 2, 2], **basic)),
        "resnet34": lambda: t.ResNetModel(t.ResNetConfig(depths=[3, 4, 6, 3], **basic)),
        "resnet101": lambda: t.ResNetModel(t.ResNetConfig(depths=[3, 4, 23, 3])),
        "resnet152": lambda: t.ResNetModel(t.ResNetConfig(depths=[3, 8, 36, 3])),
    }[name]


def build(name: str, batch: int):
    """``(model, inputs)``: ``name``'s architecture (random weights) and a batch of inputs."""
    model = _config(name)().eval()
    if name == "vit-base-patch16-224" or name.startswith("resnet"):
        return model, (torch.randn(batch, 3, 224, 224),)
    return model, (torch.randint(3, 1000, (batch, SEQ)),)


def lowered(name: str, batch: int, cache: str | None) -> str:
    """The StableHLO text of ``name`` at ``batch`` (from ``cache`` when it holds it)."""
    path = os.path.join(cache, f"{name}_b{batch}.mlir") if cache else None
    if path and os.path.exists(path):
        with open(path) as f:
            return f.read()
    torch.manual_seed(0)
    model, inputs = build(name, batch)
    with torch.no_grad():
        text, _ = stablehlo.lower(model, inputs)
    if path:
        os.makedirs(cache, exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    return text


def project(text: str, batch: int, ovh: overheads.Overheads, instance: str) -> dict:
    return projection.project(
        text, hardware.NEURONCORE_V2, batch, "bf16", None, 1, instance, overheads=ovh
    )


def fit_instance_factor(pairs: list[tuple[Published, Published]]) -> float:
    """The geometric mean of published p50 on the instance / published p50 on Trn1."""
    return math.exp(sum(math.log(a.p50_ms / b.p50_ms) for a, b in pairs) / len(pairs))


def fit(points: list[tuple[float, float, float]]) -> tuple[float, float]:
    """``(execution_us, roofline_factor)`` minimizing the summed squared relative error of
    ``fixed + serial + factor x ops`` against ``published``, over ``points`` = ``[(serial_s,
    ops_s, published_s)]`` (the bare roofline's serial HBM row and its ops)."""
    a = np.array([[1.0 / p, o / p] for _, o, p in points])
    b = np.array([(p - s) / p for s, _, p in points])
    (fixed_s, factor), *_ = np.linalg.lstsq(a, b, rcond=None)
    return fixed_s * 1e6, factor


def _measure(rows: list[Published], cache: str | None) -> list[dict]:
    out, texts = [], {}
    for row in rows:
        t0 = time.time()
        key = (row.model, row.batch)
        if key not in texts:
            texts[key] = lowered(row.model, row.batch, cache)
        bare = project(texts[key], row.batch, overheads.NONE, row.instance)
        now = project(texts[key], row.batch, overheads.FITTED, row.instance)
        serial = bare["weights_and_inputs_s"]
        out.append(
            {
                "row": row,
                "bare_ms": bare["latency_s_per_core"] * 1e3,
                "now_ms": now["latency_s_per_core"] * 1e3,
                "serial_s": serial,
                "ops_s": bare["latency_s_per_core"] - serial,
                "s": time.time() - t0,
            }
        )
        print(f"  {row.model} batch {row.batch}: {out[-1]['s']:.0f} s", file=sys.stderr)
    return out


def _table(res: list[dict]) -> None:
    print(
        "model | instance | batch | role | published p50 ms | bare roofline ms | ratio | "
        "projected ms | ratio"
    )
    print("---|---|---|---|---|---|---|---|---")
    for r in res:
        row = r["row"]
        print(
            f"{row.model} | {row.instance} | {row.batch} | {role(row)}"
            f" | {row.p50_ms:.2f} | {r['bare_ms']:.2f} | {r['bare_ms'] / row.p50_ms:.2f} | "
            f"{r['now_ms']:.2f} | {r['now_ms'] / row.p50_ms:.2f}"
        )
    for name in ("FIT", "FIT (Inf2 factor)", "fit model, not fitted", "held out"):
        ratios = [r["now_ms"] / r["row"].p50_ms for r in res if role(r["row"]) == name]
        if ratios:
            worst = max(ratios, key=lambda x: abs(math.log(x)))
            inside = sum(1 / 1.25 <= x <= 1.25 for x in ratios)
            print(
                f"{name}: {len(ratios)} rows, {inside} within 1.25x, ratio "
                f"{min(ratios):.2f}-{max(ratios):.2f}, worst {worst:.2f}"
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true", help="fit the overheads to the FIT rows")
    ap.add_argument("--cache", help="folder for the lowered StableHLO (reused when present)")
    ap.add_argument("--models", help="comma-separated subset of the models")
    a = ap.parse_args()
    rows = [r for r in PUBLISHED if not a.models or r.model in a.models.split(",")]
    print("sources:")
    for key, (page, tab, csv) in SOURCES.items():
        print(f"  {key}: {page} ({tab}); data {csv}")
    print(
        f"overheads in use (overheads.py): {overheads.FITTED.execution_us:g} µs per "
        f"execution, roofline x {overheads.FITTED.roofline_factor:g}; fitted to "
        f"{', '.join(sorted(FIT_MODELS))} on Trn1; instance factors "
        f"{overheads.INSTANCE_FACTORS} (published / Trn1's published, same model and batch)"
    )
    res = _measure(rows, a.cache)
    _table(res)
    if a.fit:
        pts = [(r["serial_s"], r["ops_s"], r["row"].p50_ms * 1e-3) for r in res if is_fit(r["row"])]
        us, factor = fit(pts)
        print(
            f"least-squares fit over {len(pts)} FIT rows: {us:.1f} µs per execution, x{factor:.3f}"
        )
        pairs = inf2_pairs()
        for i, t in pairs:
            print(f"  {i.model} batch {i.batch}: Inf2 {i.p50_ms} / Trn1 {t.p50_ms} ms")
        print(f"Inf2 factor over {len(pairs)} pairs: x{fit_instance_factor(pairs):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
