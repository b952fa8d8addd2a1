"""The eager projection: Trainium time of a pass from its kernel trace (``phases/trace.py``).

Each device kernel is costed from its ATen operator and the shapes and dtypes of its inputs,
on the same roofline as the compiled projection (``roofline.py``, figures ``hardware.py``):
FLOPs on the TensorEngine (matmuls, convolutions, attention, at the BF16 rate as the
compiled projection's default ``--auto-cast matmult``, times the share of the array their
shapes use, ``roofline.pe_utilization``), the ScalarEngine (transcendental
elementwise ops) or the VectorEngine (other elementwise ops and reductions: one FLOP per
input element); HBM bytes: every input read and the output written, since an eager kernel
fuses nothing (the output taken as the largest input's size, a matmul's or convolution's
computed, a reduction's left out), except lookups (``index_select``, ``embedding``), which
read the rows they gather, not the table. Time per kernel = max(FLOPs / rate, bytes / HBM
bandwidth per core) x the roofline factor + a fixed cost per kernel launch.

The launch cost (``DEFAULT_LAUNCH_US``, changed with ``--launch-overhead-us``) is the compiled
projection's fixed cost per execution (``overheads.EXECUTION_US``): AWS publishes no
per-execution or per-launch figure of the Neuron runtime (searched Dec 2026: the runtime's
performance tips, the nrt and nrtpy API pages, the NKI performance guide and TorchNeuron's
best practices give none), so that cost is FITTED to AWS's published Trn1 latencies
(``overheads.py``). AWS's TorchNeuron runs each eager op as its own NEFF through the runtime
("ATen op -> NeuronDispatcher -> StableHLO -> neuronx-cc -> NEFF (cached) -> NRT",
awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/best-practices-pytorch-neuron.html),
so each kernel pays one execution, priced as the compiled graph's one. Each kernel's roofline
time is scaled by ``overheads.ROOFLINE_FACTOR``, as the compiled projection's operations are.
Not projected: CPU fallbacks and host<->device copies (gated by count).
"""

from __future__ import annotations

import math

from ..kernel import DTYPE_BYTES, Kernel
from . import overheads
from .hardware import CORES, NeuronCore
from .roofline import pe_utilization

#: Fixed cost per kernel launch (microseconds): one execution, ``overheads.EXECUTION_US``
#: (fitted to AWS's published latencies; the module's docstring).
DEFAULT_LAUNCH_US = overheads.EXECUTION_US

_SCALAR = (
    "exp",
    "log",
    "tanh",
    "sigmoid",
    "gelu",
    "erf",
    "sqrt",
    "softmax",
    "silu",
    "sin",
    "cos",
    "pow",
    "softplus",
    "elu",
    "mish",
    "tan",
)
_MOVE = (
    "copy",
    "cat",
    "stack",
    "index",
    "gather",
    "scatter",
    "embedding",
    "clone",
    "contiguous",
    "fill",
    "zero",
    "pad",
    "flip",
    "roll",
    "repeat",
    "slice",
    "masked_select",
)
_REDUCE = ("sum", "mean", "amax", "amin", "norm", "var", "std", "prod", "argmax", "argmin")
_MATMUL = {
    "mm",
    "addmm",
    "bmm",
    "baddbmm",
    "addbmm",
    "matmul",
    "mv",
    "addmv",
    "dot",
    "vdot",
    "linear",
}


def _bytes(shape: list[int], dtype: str) -> int:
    return math.prod(shape) * DTYPE_BYTES.get(dtype, 4)


def _matmul(op: str, ts: list) -> tuple[float, list[int], tuple]:
    """(FLOPs, output shape, (contraction, free, free)) of a matmul-family kernel from its
    inputs (the free dims of one matrix: a batch repeats it)."""
    if op in ("addmm", "baddbmm", "addbmm", "addmv"):
        ts = ts[1:]  # the added term first
    if op == "linear":
        x, w = ts[0][0], ts[1][0]
        return 2.0 * math.prod(x) * w[0], x[:-1] + [w[0]], (x[-1], math.prod(x[:-1]), w[0])
    a, b = ts[0][0], ts[1][0]
    if len(b) == 1:  # matrix-vector, dot
        return 2.0 * math.prod(a), a[:-1], (a[-1], math.prod(a[:-1]), 1)
    m, k, n = (a[-2] if len(a) > 1 else 1), a[-1], b[-1]
    batch = math.prod(a[:-2]) if op != "addbmm" else 1
    flops = 2.0 * math.prod(a[:-2] or [1]) * m * k * n
    return flops, ([batch] if len(a) > 2 and op != "addbmm" else []) + [m, n], (k, m, n)


def _conv(k: Kernel, ts: list) -> tuple[float, list[int], tuple]:
    """(FLOPs, output shape, (contraction, stationary, moving)) of a convolution: stride,
    padding, dilation from its arguments. One matmul per window tap over the input channels
    (per group), its kernel stationary, as ``roofline.pe_utilization`` maps a convolution;
    one over channels x window when stride = window, unpadded and undilated (the compiled
    projection's patch rule, ``roofline._patchify``)."""
    x, w = ts[0][0], ts[1][0]
    nd = len(x) - 2
    c = k.concrete + [None] * 9
    stride, pad, dil = (
        (list(v) if isinstance(v, (list, tuple)) and len(v) == nd else [d] * nd)
        for v, d in ((c[3], 1), (c[4], 0), (c[5], 1))
    )
    spatial = [
        (x[2 + i] + 2 * pad[i] - dil[i] * (w[2 + i] - 1) - 1) // stride[i] + 1 for i in range(nd)
    ]
    window = w[2:]
    if c[6] is True:  # transposed: each input element spreads over the kernel window
        out = [x[0], w[1]] + [x[2 + i] * stride[i] for i in range(nd)]
        return (
            2.0 * math.prod(x) * w[1] * math.prod(window),
            out,
            (x[1], w[1], x[0] * math.prod(x[2:])),
        )
    out = [x[0], w[0]] + spatial
    patch = stride == list(window) and not any(pad) and all(d == 1 for d in dil)
    pe = (w[1] * (math.prod(window) if patch else 1), w[0], x[0] * math.prod(spatial))
    return 2.0 * math.prod(out) * math.prod(w[1:]), out, pe


def cost(k: Kernel) -> dict:
    """``{"engine", "flops", "hbm_bytes"}`` of one device kernel."""
    ts = k.tensors()
    op = k.name.split("::")[-1].split(".")[0].lstrip("_")
    dt = ts[0][1] if ts else "float"
    in_b = sum(_bytes(s, d) for s, d in ts)
    if not ts:
        return {"engine": "none", "flops": 0.0, "hbm_bytes": 0}
    if op in _MATMUL and len(ts) >= 2:
        flops, out, pe = _matmul(op, ts)
        return {
            "engine": "tensor",
            "flops": flops,
            "hbm_bytes": in_b + _bytes(out, dt),
            "pe": [(flops, *pe, True)],
        }
    if "convolution" in op and len(ts) >= 2:
        flops, out, pe = _conv(k, ts)
        return {
            "engine": "tensor",
            "flops": flops,
            "hbm_bytes": in_b + _bytes(out, dt),
            "pe": [(flops, *pe, False)],
        }
    if "scaled_dot_product" in op and len(ts) >= 3:
        q, kk, v = (t[0] for t in ts[:3])
        bl, s_len = math.prod(q[:-1]), kk[-2]
        qk, pv = 2.0 * bl * s_len * q[-1], 2.0 * bl * s_len * v[-1]
        return {
            "engine": "tensor",
            "flops": qk + pv,
            "hbm_bytes": in_b + _bytes(q[:-1] + [v[-1]], dt),
            # Q.K^T contracts over the head dim; P.V over the keys
            "pe": [(qk, q[-1], q[-2], s_len, True), (pv, s_len, q[-2], v[-1], True)],
        }
    if "transformer_encoder_layer" in op:
        # projections and FFN: 2 FLOPs per token per weight; attention 4 per token pair per dim
        x = ts[0][0]
        tokens, seq, dim = math.prod(x[:-1]), x[-2] if len(x) > 1 else 1, x[-1]
        weights = sum(math.prod(s) for s, _ in ts[1:] if len(s) == 2)
        flops = 2.0 * tokens * weights + 4.0 * tokens * seq * dim
        return {"engine": "tensor", "flops": flops, "hbm_bytes": in_b + _bytes(x, dt)}
    if op in ("index_select", "embedding") and len(ts) >= 2:
        # a lookup reads the rows it gathers, not the table (the compiled projection's rule)
        table, idx = (ts[0], ts[1]) if op == "embedding" else (ts[0], ts[-1])
        dim = k.concrete[1] if op == "index_select" and len(k.concrete) > 1 else 0
        dim = dim if isinstance(dim, int) and 0 <= dim < len(table[0]) else 0
        row = math.prod(table[0]) // max(table[0][dim], 1) if table[0] else 1
        out = _bytes([math.prod(idx[0]) * row], table[1])
        return {"engine": "move", "flops": 0.0, "hbm_bytes": 2 * out + _bytes(*idx)}
    largest = max(ts, key=lambda t: math.prod(t[0]))
    if any(m in op for m in _MOVE):
        return {"engine": "move", "flops": 0.0, "hbm_bytes": in_b + _bytes(*largest)}
    flops = float(math.prod(largest[0]))
    if any(r == op or op.startswith(r + "_") for r in _REDUCE):
        return {"engine": "vector", "flops": flops, "hbm_bytes": in_b}
    engine = "scalar" if any(s in op for s in _SCALAR) else "vector"
    return {"engine": engine, "flops": flops, "hbm_bytes": in_b + _bytes(*largest)}


def project(
    kernels: list[Kernel],
    core: NeuronCore,
    launch_us: float = DEFAULT_LAUNCH_US,
    top: int = 5,
    roofline_factor: float = overheads.ROOFLINE_FACTOR,
) -> dict:
    """Projected seconds of the traced pass on one ``core``: the sum over its device kernels
    of the roofline time x ``roofline_factor`` (``overheads.py``, as the compiled
    projection) plus ``launch_us`` each (graph executions pay a launch too; a fused
    segment pays one, and the roofline time of the kernels it holds, priced as eager ones:
    an upper bound, since the segment's elementwise chains stay on chip)."""
    rates = {"tensor": core.tensor_bf16, "vector": core.vector_fp32, "scalar": core.scalar_fp32}
    bw = core.hbm_bytes_per_s_core
    by_op: dict[str, dict] = {}
    # a fused segment is one execution of the eager kernels it holds
    costed = [k for k in kernels if k.kind == "kernel"]
    costed += [o for k in kernels if k.kind == "fused" for o in k.ops]
    for k in costed:
        c = cost(k)
        if c.get("pe"):  # the TensorEngine's share from the shapes, as the compiled projection
            compute = sum(
                f / (rates["tensor"] * pe_utilization(kk, a, b, core, either))
                for f, kk, a, b, either in c["pe"]
            )
        else:
            compute = c["flops"] / rates.get(c["engine"], math.inf)
        t = max(compute, c["hbm_bytes"] / bw)
        t *= roofline_factor
        row = by_op.setdefault(
            k.name, {"op": k.name, "kernels": 0, "flops": 0.0, "hbm_bytes": 0, "roofline_s": 0.0}
        )
        row["kernels"] += 1
        row["flops"] += c["flops"]
        row["hbm_bytes"] += c["hbm_bytes"]
        row["roofline_s"] += t
    launches = sum(k.kind in ("kernel", "graph", "fused") for k in kernels)
    roof = sum(r["roofline_s"] for r in by_op.values())
    launch_s = launches * launch_us * 1e-6
    return {
        "core": core.name,
        "chip": core.chip,
        "latency_s": roof + launch_s,
        "roofline_s": roof,
        "launches": launches,
        "launch_s": launch_s,
        "launch_us": launch_us,
        "roofline_factor": roofline_factor,
        # matmuls at the TensorEngine's share their shapes reach (roofline.pe_utilization)
        "pe_utilization": True,
        "flops": sum(r["flops"] for r in by_op.values()),
        "hbm_bytes": sum(r["hbm_bytes"] for r in by_op.values()),
        "top_ops": sorted(by_op.values(), key=lambda r: r["roofline_s"], reverse=True)[:top],
    }


def project_all(kernels: list[Kernel], launch_us: float = DEFAULT_LAUNCH_US) -> dict:
    """``project`` on NeuronCore-v3 (Trn2) and NeuronCore-v4 (Trn3)."""
    return {key: project(kernels, CORES[key], launch_us) for key in ("trn2", "trn3")}
