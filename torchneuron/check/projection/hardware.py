"""NeuronCore figures for the Trainium projection (``projection.py``).

Every figure names its source: the AWS Neuron documentation's architecture pages
(awsdocs-neuron.readthedocs-hosted.com, as of Neuron 2.27-2.29, Dec 2025). Rates are dense
(no structured sparsity), per NeuronCore; chip bandwidth is shared by the chip's cores.
"""

from __future__ import annotations

from dataclasses import dataclass

_DOCS = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/neuron-hardware/"
_NKI = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/"


@dataclass(frozen=True)
class NeuronCore:
    """One NeuronCore generation. FLOP/s per core; bytes/s per chip; bytes."""

    name: str
    chip: str
    cores_per_chip: int
    tensor_bf16: float  # TensorE dense BF16/FP16/TF32 FLOP/s per core
    tensor_fp8: float  # TensorE dense FP8 (cFP8 on v3, MXFP8 on v4) FLOP/s per core
    tensor_fp32: float  # TensorE FP32 FLOP/s per core
    vector_fp32: float  # VectorE FLOP/s per core
    scalar_fp32: float  # ScalarE FLOP/s per core
    hbm_bytes_per_s_chip: float
    sbuf_bytes: int  # on-chip SRAM (SBUF) per core
    sources: dict
    #: The TensorEngine's systolic array: ``pe_rows`` x ``pe_cols`` processing elements. One
    #: matmul instruction contracts over at most ``pe_rows`` partitions (the stationary and
    #: moving tiles' partition axis, <= 128) and holds a stationary tile of at most
    #: ``pe_cols`` columns (its free axis, <= 128); the moving tile (free axis <= 512) streams
    #: through. "NeuronCore Tensor Engine is built upon a systolic array with 128 rows and 128
    #: columns of processing elements" (nki.isa.nc_matmul, NeuronCore-v2 to v4; the layout
    #: constraints: nki.isa.nc_matmul, Neuron 2.21, "relevant for Inf2, Trn1, Trn2").
    #: The cost of one matmul instruction: ``max(min(pe_min_stationary, stationary free
    #: size), moving free size)`` cycles, the moving tile at most ``pe_moving`` (nc_matmul's
    #: "Estimated instruction cost", Neuron 2.21, Inf2/Trn1/Trn2).
    pe_rows: int = 128
    pe_cols: int = 128
    pe_moving: int = 512
    pe_min_stationary: int = 64

    @property
    def hbm_bytes_per_s_core(self) -> float:
        """The chip's HBM bandwidth shared evenly by its cores."""
        return self.hbm_bytes_per_s_chip / self.cores_per_chip


#: Trainium (Trn1/Inf2): kept to compare with AWS's published Trn1 benchmarks.
NEURONCORE_V2 = NeuronCore(
    name="NeuronCore-v2",
    chip="Trainium (Trn1)",
    cores_per_chip=2,
    tensor_bf16=95e12,  # "over 90 TFLOPS of FP16/BF16" per core; Trn1 chip 190 BF16 TFLOPS / 2 cores
    tensor_fp8=95e12,  # cFP8 runs at the BF16 rate on v2 (trainium.html: 190 TFLOPS FP16/BF16/cFP8/TF32 per chip)
    tensor_fp32=23.75e12,  # Trn1 chip 47.5 FP32 TFLOPS / 2 cores (trainium.html)
    vector_fp32=2.3e12,
    scalar_fp32=2.9e12,
    # "32 GiB of device memory ... with 820 GiB/sec of bandwidth" (trainium.html, latest; the
    # Neuron 2.9 page said 820 GB/sec, 7 % less)
    hbm_bytes_per_s_chip=820 * 2**30,
    sbuf_bytes=24 * 2**20,
    sources={
        "tensor, vector, scalar": _DOCS + "neuron-core-v2.html",
        "chip FLOPS, HBM 820 GiB/s per chip (2 cores)": _DOCS + "trainium.html",
        "SBUF 24 MiB per core": _NKI + "arch/trainium_inferentia2_arch.html",
        "TensorEngine 128x128 PEs; matmul tiles: partition (contraction) <= 128, stationary "
        "free <= 128, moving free <= 512": _NKI + "api/generated/nki.isa.nc_matmul.html",
    },
)

#: Trainium2 (Trn2): 8 NeuronCore-v3 per chip.
NEURONCORE_V3 = NeuronCore(
    name="NeuronCore-v3",
    chip="Trainium2 (Trn2)",
    cores_per_chip=8,
    tensor_bf16=79e12,
    tensor_fp8=158e12,  # "158 cFP8 TFLOPS, and 79 BF16/FP16/TF32 TFLOPS"
    tensor_fp32=181e12 / 8,  # chip "181 FP32 TFLOPS" / 8 cores
    vector_fp32=1e12,  # "a total of 1 TFLOPS of FP32 computations"
    scalar_fp32=1e12,  # no separate figure published for v3: taken as the VectorE's
    hbm_bytes_per_s_chip=2.9e12,  # "2.9 TB/sec" (trainium2.html; the NKI Trainium2 guide of
    # Neuron 2.29 says "3TB/s", 3 % more)
    sbuf_bytes=24 * 2**20,  # SBUF 24 MiB of the core's 28 MB SRAM (NKI Trainium2 guide)
    sources={
        "tensor, vector, SRAM 28 MB": _DOCS + "neuron-core-v3.html",
        "chip FP32 181 TFLOPS, HBM 2.9 TB/s": _DOCS + "trainium2.html",
        "HBM, SBUF": _NKI + "arch/trainium2_arch.html",
    },
)

#: Trainium3 (Trn3): 8 NeuronCore-v4 per chip.
NEURONCORE_V4 = NeuronCore(
    name="NeuronCore-v4",
    chip="Trainium3 (Trn3)",
    cores_per_chip=8,
    tensor_bf16=671e12 / 8,  # chip "671 BF16/FP16/TF32 TFLOPS" / 8 cores
    tensor_fp8=315e12,  # "315 MXFP8/MXFP4 TFLOPS" per core
    tensor_fp32=183e12 / 8,  # chip "183 FP32 TFLOPS" / 8 cores
    vector_fp32=1.2e12,  # "a total of 1.2 TFLOPS of FP32 computations"
    scalar_fp32=1.2e12,  # no separate figure published: taken as the VectorE's
    hbm_bytes_per_s_chip=4.9e12,  # "144 GiB of device memory, with 4.9 TB/sec"
    sbuf_bytes=32 * 2**20,  # "SBUF capacity is 32MiB"
    sources={
        "tensor, vector, SRAM 32 MiB": _DOCS + "neuron-core-v4.html",
        "chip TFLOPS, HBM 4.9 TB/s": _DOCS + "trainium3.html",
        "SBUF 32 MiB": _NKI + "about/trainium3_arch.html",
    },
)

CORES = {"trn1": NEURONCORE_V2, "trn2": NEURONCORE_V3, "trn3": NEURONCORE_V4}

#: Instances the projection prices (chips per instance: AWS instance pages).
INSTANCES = {
    "trn1": (
        "trn1.2xlarge",
        1,
    ),  # 1 Trainium chip (https://aws.amazon.com/ec2/instance-types/trn1/)
    "trn2": (
        "trn2.48xlarge",
        16,
    ),  # 16 Trainium2 chips (https://aws.amazon.com/ec2/instance-types/trn2/)
    "trn3": ("trn3.48xlarge", 16),  # ASSUMED: no Trn3 instance size is in our sources (Trainium3 is
    # published as a chip, trainium3.html); taken as trn2.48xlarge's 16 chips
}
#: Instance names above that no source publishes (the report says "assumed").
ASSUMED_INSTANCES = {"trn3.48xlarge"}
