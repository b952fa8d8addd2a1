"""What the roofline does not see, fitted to AWS's published inference latencies.

The roofline (``roofline.py``, ``kernels.py``) costs each operation at its engine's peak rate
or at the HBM bandwidth, and nothing else. Against AWS's published latencies it reads about
0.5x at batch 16 and 0.6-0.9x at batch 1 (``docs/design/projection.md``): what it misses
grows with the work, so no fixed cost alone closes the gap. Two constants do:

``EXECUTION_US`` (microseconds per execution): the fixed cost of one execution of a compiled
NEFF -- the runtime launching it, its DMA descriptors, the synchronization with its
completion -- paid once per pass whatever the batch. The compiled projection adds it once per
pass (one graph execution); the eager projection once per kernel launch (AWS's TorchNeuron
runs each eager op as its own NEFF through the runtime, best-practices-pytorch-neuron.html),
so both projections price an execution the same way. AWS publishes no such figure (searched
Dec 2026: the Neuron runtime's performance tips, the nrt/nrtpy API pages, the NKI performance
guide and TorchNeuron's best practices give none): it is FITTED, see below.

``ROOFLINE_FACTOR`` (dimensionless, >= 1): measured time / roofline time of the operations
(engine rates and HBM bytes), i.e. the engines reach 1 / ROOFLINE_FACTOR of their published
peak on these graphs: tiling onto the 128x128 TensorEngine, engines waiting on each other and
on DMA, instruction issue. It multiplies every operation's roofline time; the serial HBM row
(weights read once, at the bandwidth) and the fixed cost are not scaled. FITTED, see below.

The fit (``bench/projection_vs_published.py --fit``, its log in ``docs/design/projection.md``):
least squares of the relative error, ``(EXECUTION_US + serial + ROOFLINE_FACTOR x ops -
published) / published``, over AWS's published Trn1 p50 latencies (trn1.2xlarge, Neuron
2.26-2.27, sequence length 128, FP32 with Matmult-BF16 autocast) of three models, each at
batch 1 ("Latency optimized") and at its published throughput batch: bert-base-uncased
(1, 16), bert-large-uncased (1, 4), distilbert-base-uncased (1, 16). It gives 83.2 µs and
x1.747 from the page's figures (0.01 ms), 85.9 µs and x1.747 from its CSV's; taken as 83 µs
and 1.75. Source:
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/benchmarks/trn1/trn1-inference-performance.html
(Encoder Models; the page's data: github.com/aws-neuron/aws-neuron-sdk,
about-neuron/benchmarks/trn1/throughput_data_encoder.csv and latency_data_encoder.csv).
Held out, within 1.25x: ALBERT, ELECTRA, RoBERTa base and large on Trn1 (batch 1 and their
throughput batch), ViT-base and four of the encoders on Inf2 (inf2.xlarge: the same
NeuronCore-v2, inferentia2.html). Outside: three Inf2 encoder rows (0.72-0.77: AWS publishes
the same model and batch up to 1.19x slower on Inf2 than on Trn1) and ResNet-50 at batch 1
(0.41: convolutions with few channels, no CNN in the fit). The fit is on NeuronCore-v2 (AWS
publishes no Trn2/Trn3 encoder latencies); the Trn2 and Trn3 projections take the same
constants: an assumption.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Fixed cost of one execution (µs): FITTED to AWS's published Trn1 latencies (module docstring).
EXECUTION_US = 83.0
#: Measured / roofline time of the operations (dimensionless): FITTED (module docstring).
ROOFLINE_FACTOR = 1.75


@dataclass(frozen=True)
class Overheads:
    """The costs a projection adds to its roofline: ``execution_us`` per execution (µs),
    each operation's roofline time times ``roofline_factor``."""

    execution_us: float = EXECUTION_US
    roofline_factor: float = ROOFLINE_FACTOR

    def as_dict(self) -> dict:
        return {"execution_us": self.execution_us, "roofline_factor": self.roofline_factor}


#: The fitted overheads: what ``torchneuron check --projection`` and the gates use.
FITTED = Overheads()
#: The bare roofline (no fixed cost, every engine at its peak): what the projection read before.
NONE = Overheads(0.0, 1.0)
