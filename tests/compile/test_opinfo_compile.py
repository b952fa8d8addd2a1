"""The compile path on PyTorch's OpInfo samples (opinfo_compile_sweep.py): each
(op, dtype) matches the CPU or is refused with a NeuronCompileError naming the op;
never a crash, never a silent mismatch.

``make test`` runs SUBSET (the cases issue 24 found wrong, and one of each kind of op);
``python tests/compile/opinfo_compile_sweep.py [float32 bfloat16 int64 grad]`` runs every
case and prints the rates and the mismatch, error and refuse lists (about a second a case).
"""

from __future__ import annotations

import opinfo_compile_sweep as sw
import pytest
from compile_support import fresh_compile_state  # noqa: F401

# (op id, dtype) -> the expected outcome
SUBSET = {
    # 0-dim reductions with dim=0, keepdim=True had killed the process in the lowering
    ("sum", "float32"): "match",
    ("mean", "bfloat16"): "match",
    ("amax", "int64"): "match",
    ("argmax", "float32"): "match",  # dim=None of a 0-dim tensor had failed to lower
    ("argmin", "bfloat16"): "match",
    ("logsumexp", "float32"): "match",
    ("nansum", "float32"): "match",
    # broadcasting bounds, 0-dim all/any/cumsum had failed to compile
    ("clamp_min", "float32"): "match",
    ("clamp_max", "int64"): "match",
    ("fmin", "float32"): "match",
    ("fmax", "bfloat16"): "match",
    ("all", "float32"): "match",
    ("any", "int64"): "match",
    ("cumsum", "float32"): "match",
    # average pools: divisor_override, ceil_mode, int64 (compiled had returned float32)
    ("nn.functional.avg_pool1d", "float32"): "match",
    ("nn.functional.avg_pool2d", "int64"): "match",
    ("nn.functional.avg_pool3d", "float32"): "match",
    # one of each kind, and gradients
    ("add", "int64"): "match",
    ("matmul", "bfloat16"): "match",
    ("addmv", "float32"): "match",  # had been refused (no lowering)
    ("nn.functional.layer_norm", "float32"): "match",
    ("_native_batch_norm_legit", "float32"): "match",  # eval: saved stats (0,), as ATen
    ("softmax", "grad"): "match",
    ("nn.functional.gelu", "grad"): "match",
    ("amax", "grad"): "match",  # its backward: a keepdim full sum of a 0-dim tensor crashed
    ("where", "float32"): "match",
    ("index_select", "int64"): "match",
    # what the compile path refuses, naming the op
    ("fft.fft", "float32"): "refused",
    ("linalg.pinv", "float32"): "refused",
    # lowered since (decompositions_indexed.py, decompositions_order.py, _conv.py)
    ("median", "float32"): "match",
    ("kthvalue", "int64"): "match",  # tied values: an index of one of them
    ("mode", "grad"): "match",
    ("scatter_reduce.amax", "float32"): "match",
    ("index_reduce.mean", "int64"): "match",
    ("nn.functional.conv_transpose2d", "grad"): "match",
    # issue 24, part two: the CPU's float32 trigamma off near a pole (_CPU_FLOAT32_OFF),
    # bfloat16 bilinear rounded once, empty as zeros, the lowerings added, and a refusal
    # that named no op (complex128: the op making it)
    ("polygamma.polygamma_n_0", "float32"): "match",
    ("nn.functional.bilinear", "bfloat16"): "match",
    ("nn.functional.pad.circular", "grad"): "match",
    ("special.i1e", "float32"): "match",
    ("nn.functional.avg_pool2d", "grad"): "match",
    ("put", "int64"): "match",
    ("cdouble", "float32"): "refused",
    # issue 24, part three: Chebyshev polynomials and bfloat16/int64 addbmm lowered
    ("special.chebyshev_polynomial_t", "int64"): "match",
    ("special.shifted_chebyshev_polynomial_w", "float32"): "match",
    ("addbmm", "bfloat16"): "match",
    # issue 24, part four: Bessel/Airy/ndtri/zeta and the orthogonal polynomials lowered
    # (decompositions_bessel.py), erf of integers, frexp; the bfloat16 rule by error norms
    ("special.bessel_y1", "float32"): "match",
    ("special.modified_bessel_k1", "int64"): "match",
    ("special.airy_ai", "float32"): "match",
    ("special.zeta", "int64"): "match",
    ("special.ndtri", "float32"): "match",
    ("special.legendre_polynomial_p", "int64"): "match",
    ("erf", "int64"): "match",
    ("frexp", "float32"): "match",
    ("nn.functional.conv_transpose3d", "bfloat16"): "match",
    ("igamma", "float32"): "refused",
    # issue 24, part five: small dense linear algebra unrolled (decompositions_linalg.py)
    ("linalg.inv", "float32"): "match",
    ("linalg.solve", "grad"): "match",
    ("linalg.cholesky", "float32"): "match",
    ("linalg.slogdet", "grad"): "match",
}


@pytest.mark.parametrize("case", sorted(SUBSET), ids=lambda c: f"{c[0]}-{c[1]}")
def test_opinfo_subset(case):
    got = sw.run_case(*case)
    assert got.status == SUBSET[case], got.detail
