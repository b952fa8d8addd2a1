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
(engine rates and HBM bytes), i.e. the engines reach 1 / ROOFLINE_FACTOR of the rate the
op's shapes allow on these graphs (what a shape leaves of the 128x128 TensorEngine idle is
modelled apart, from AWS's instruction cost: ``roofline.pe_utilization``): engines waiting
on each other and on DMA, instruction issue. It multiplies every operation's roofline time; the serial HBM row
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
throughput batch), and on Inf2 (inf2.xlarge: the same NeuronCore-v2, inferentia2.html) those
four encoders, ViT-base and ResNet-18/34/50/101/152 at batch 1, with the TensorEngine's
utilization from each op's shapes (``roofline.pe_utilization``, sourced, not fitted) and the
Inf2 factor below (``INSTANCE_FACTORS``, fitted to two published Inf2/Trn1 ratios): 27 of 27
rows within 0.85-1.17 (``docs/design/projection.md``). Refitted with the utilization, the two
constants read 82.6 µs and x1.729, within 1.2 % of those in use, which are kept. The fit is
on NeuronCore-v2 (AWS publishes no Trn2/Trn3 encoder latencies); the Trn2 and Trn3
projections take the same constants: an assumption.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Fixed cost of one execution (µs): FITTED to AWS's published Trn1 latencies (module docstring).
EXECUTION_US = 83.0
#: Measured / roofline time of the operations (dimensionless): FITTED (module docstring).
ROOFLINE_FACTOR = 1.75

#: Published latency on an instance family / published latency on Trn1 (trn1.2xlarge), for
#: the same model and batch: the whole pass is scaled by it on that family.
#:
#: ``inf2``: FITTED, not explained. Inf2 has Trn1's NeuronCore-v2 (two per chip, 190 BF16
#: TFLOPS, 820 GiB/s of HBM: inferentia2.html, trainium.html), yet AWS publishes the same
#: model at the same batch and sequence length slower on inf2.xlarge. We checked the rows
#: for a data error first: every Inf2 and Trn1 encoder row is FP32 with Matmult-BF16
#: autocast, sequence length 128, data parallel, p50 = batch / (throughput / 2 cores)
#: within 2 %; the SDKs differ (Inf2 2.21-2.27, Trn1 2.26-2.27) but the gap does not follow
#: them (DistilBERT at batch 16: Inf2 on 2.27, Trn1 on 2.26, 1.185x). AWS documents no
#: difference between the two chips' NeuronCores, runtimes or DMA that would explain it
#: (searched the architecture and benchmark pages, Dec 2026); the instances' hosts differ
#: (inf2.xlarge: 4 vCPUs; trn1.2xlarge: 8), an untested guess. So the factor is fitted:
#: the geometric mean of published Inf2 p50 / published Trn1 p50 over the fit models that
#: AWS publishes at the same batch on both (source: the fitted rows,
#: about-neuron/benchmarks/inf2/throughput_data_encoder.csv and
#: trn1/throughput_data_encoder.csv): distilbert-base-uncased at batch 16 (6.011 / 5.073 =
#: 1.185) and bert-large-uncased at batch 4 (8.411 / 7.241 = 1.162): 1.173, taken as 1.17.
#: It reads no projection. Held out: the third same-batch pair, ELECTRA-base at batch 16
#: (11.024 / 9.335 = 1.181), and every Inf2 row the bench projects other than those two.
INSTANCE_FACTORS = {"inf2": 1.17}


def instance_family(instance: str | None) -> str:
    """``"inf2.xlarge"`` -> ``"inf2"``; ``None`` -> ``""``."""
    return (instance or "").split(".")[0].lower()


@dataclass(frozen=True)
class Overheads:
    """The costs a projection adds to its roofline: ``execution_us`` per execution (µs),
    each operation's roofline time times ``roofline_factor``."""

    execution_us: float = EXECUTION_US
    roofline_factor: float = ROOFLINE_FACTOR
    instance_factors: dict = field(default_factory=lambda: dict(INSTANCE_FACTORS))

    def instance_factor(self, instance: str | None) -> float:
        """The whole pass's scale on ``instance`` (``INSTANCE_FACTORS``; 1 elsewhere)."""
        return self.instance_factors.get(instance_family(instance), 1.0)

    def as_dict(self) -> dict:
        return {
            "execution_us": self.execution_us,
            "roofline_factor": self.roofline_factor,
            "instance_factors": dict(self.instance_factors),
            # the TensorEngine's utilization from the op's shapes (roofline.pe_utilization):
            # a projection made without it is not compared with one made with it
            "pe_utilization": True,
        }


#: The fitted overheads: what ``torchneuron check --projection`` and the gates use.
FITTED = Overheads()
#: The bare roofline (no fixed cost, every engine at its peak rate for the op's shapes, no
#: instance factor): what the projection read before the fitted costs.
NONE = Overheads(0.0, 1.0, {})
