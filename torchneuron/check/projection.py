"""A projection of Trainium time and cost from a StableHLO module: an estimate from a
roofline model, not a measurement.

Per operation: FLOPs (``dot_general``/``convolution`` on the TensorEngine; elementwise
math on the Vector or Scalar engine; reductions on the VectorEngine) and bytes moved
between HBM and the core. Time = max(FLOPs / engine rate, bytes / HBM bandwidth per core):
compute- or memory-bound. The model assumes what the Neuron compiler does by default:
matmuls of float32 models run in BF16 (``--auto-cast matmult``, the "Matmult-BF16" of
AWS's published benchmarks); elementwise chains are fused with their producer; weights and
inputs are read from HBM once and outputs written once; the results of matmuls,
reductions and rearrangements (transpose, gather, concatenate) that do not fit in half
the SBUF go through HBM. Not modelled: engine overlap
(the sum of the ops' times is taken), DMA and instruction overheads, collectives.
Figures: ``hardware.py``.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Optional

from .hardware import ASSUMED_INSTANCES, CORES, INSTANCES, NeuronCore

_DTYPE_BYTES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2, "i8": 1, "i1": 1,
                "ui8": 1, "f8E4M3FN": 1, "f8E5M2": 1, "complex<f32>": 8}

#: Ops on the ScalarEngine (one output from one input through a function: activation LUTs).
SCALAR_OPS = {"exponential", "exponential_minus_one", "log", "log_plus_one", "tanh", "logistic", "rsqrt",
              "sqrt", "cbrt", "sine", "cosine", "tan", "erf", "power", "atan2"}
#: Elementwise ops on the VectorEngine.
VECTOR_OPS = {"add", "subtract", "multiply", "divide", "maximum", "minimum", "negate", "abs", "select",
              "clamp", "compare", "and", "or", "xor", "not", "remainder", "floor", "ceil", "round_nearest_even",
              "round_nearest_afz", "sign", "convert", "is_finite", "shift_left", "shift_right_logical",
              "shift_right_arithmetic"}
REDUCE_OPS = {"reduce", "reduce_window", "select_and_scatter"}
#: Data movement without arithmetic (bytes only when they leave SBUF).
MOVE_OPS = {"transpose", "reshape", "broadcast_in_dim", "concatenate", "slice", "dynamic_slice",
            "dynamic_update_slice", "gather", "scatter", "pad", "iota", "reverse", "bitcast_convert",
            "get_tuple_element", "tuple", "sort", "real_dynamic_slice", "dynamic_broadcast_in_dim"}

#: Ops whose result is materialized (the compiler does not fuse through them).
FUSION_ROOTS = REDUCE_OPS | {"transpose", "gather", "scatter", "concatenate", "sort", "dynamic_update_slice"}

_TENSOR = re.compile(r"tensor<([^<>]*(?:<[^<>]*>)?)>")
_OP = re.compile(r"^\s*(?:%[\w#:]+(?:\s*,\s*%[\w#:]+)*\s*=\s*)?\"?(stablehlo|chlo|mhlo)\.([a-z_]+)\"?")


@dataclass
class Op:
    """One StableHLO operation: its kind, FLOPs, engine and bytes (operands + result)."""

    line: int
    name: str
    engine: str                   # tensor | vector | scalar | move | none
    flops: float
    out_bytes: int
    in_bytes: int
    shape: str
    dtype: str
    text: str = field(repr=False, default="")
    constant_operands: bool = False   # every operand a constant (a weight): folded at compile time


def parse_tensor(t: str) -> tuple[list[int], str]:
    """``"8x64xf32"`` -> ``([8, 64], "f32")``; a scalar ``"f32"`` -> ``([], "f32")``."""
    parts = t.split("x")
    dims: list[int] = []
    for i, p in enumerate(parts):
        if p.isdigit():
            dims.append(int(p))
        elif p == "?":
            dims.append(1)
        else:
            return dims, "x".join(parts[i:]).split(",")[0].strip()
    return dims, "f32"


def _bytes(dims: list[int], dtype: str) -> int:
    return math.prod(dims) * _DTYPE_BYTES.get(dtype, 4)


def _signature(line: str) -> tuple[list[tuple[list[int], str]], list[tuple[list[int], str]]]:
    """Operand and result tensor types from the trailing ``: (A, B) -> C`` or ``: T``."""
    idx = line.rfind(" : ")
    if idx < 0:
        return [], []
    sig = line[idx + 3:]
    if "->" in sig:
        a, b = sig.split("->", 1)
        return [parse_tensor(t) for t in _TENSOR.findall(a)], [parse_tensor(t) for t in _TENSOR.findall(b)]
    ts = [parse_tensor(t) for t in _TENSOR.findall(sig)]
    return ts, ts[-1:]          # elementwise short form: operands and result share the type


def _dims_attr(line: str, name: str) -> list[int]:
    m = re.search(name + r"\s*=\s*\[([\d,\s]*)\]", line)
    return [int(x) for x in m.group(1).split(",") if x.strip()] if m else []


def parse(module_text: str) -> list[Op]:
    """The costed operations of a StableHLO module's text (constants and returns skipped).
    Unknown ops are kept with engine ``none`` (listed, not costed beyond their bytes)."""
    ops: list[Op] = []
    for no, line in enumerate(module_text.splitlines(), 1):
        m = _OP.match(line)
        if not m:
            continue
        name = m.group(2)
        if name in ("constant", "return", "optimization_barrier"):
            continue
        ins, outs = _signature(line)
        if not outs:
            continue
        odims, odt = outs[0]
        out_numel = math.prod(odims)
        in_bytes = sum(_bytes(d, t) for d, t in ins)
        out_bytes = sum(_bytes(d, t) for d, t in outs)
        flops, engine = 0.0, "none"
        if name == "dot_general" and len(ins) >= 2:
            lhs = ins[0][0]
            k = math.prod(lhs[i] for i in _dims_attr(line, "contracting_dims")) or 1
            flops, engine = 2.0 * out_numel * k, "tensor"
        elif name == "convolution" and len(ins) >= 2:
            kdims = ins[1][0]          # kernel: output feature dim is the largest product left out
            out_features = odims[-1] if odims else 1
            m2 = re.search(r"dim_numbers\s*=\s*\[([^\]]*)\]x\[([^\]]*)\]->", line)
            if m2:
                kspec = [c.strip() for c in m2.group(2).split(",")]
                if "o" in kspec:
                    out_features = kdims[kspec.index("o")]
            # the kernel holds (input features / groups) x window per output feature
            per_output = math.prod(kdims) / max(out_features, 1)
            flops, engine = 2.0 * out_numel * per_output, "tensor"
        elif name in SCALAR_OPS:
            flops, engine = float(out_numel), "scalar"
        elif name in VECTOR_OPS:
            flops, engine = float(out_numel), "vector"
        elif name in REDUCE_OPS:
            flops, engine = float(sum(math.prod(d) for d, _ in ins[: max(1, len(ins) // 2)])), "vector"
        elif name in MOVE_OPS:
            engine = "move"
        operands = re.findall(r"%[\w#]+", line.split("=", 1)[1].split(" : ")[0]) if "=" in line else []
        const = bool(operands) and all(o.startswith("%cst") for o in operands)
        ops.append(Op(no, name, engine, flops, out_bytes, in_bytes, "x".join(map(str, odims)), odt, line.strip(),
                      const))
    return ops


def _arg_bytes(module_text: str) -> tuple[int, int]:
    """Bytes of the function's arguments and of its non-splat constants (weights)."""
    args = 0
    m = re.search(r"func\.func @\w+\((.*?)\)\s*->", module_text, re.S)
    if m:
        args = sum(_bytes(*parse_tensor(t)) for t in _TENSOR.findall(m.group(1)))
    weights = 0
    for line in module_text.splitlines():
        if "stablehlo.constant" in line and "dense_resource" in line:
            ts = _TENSOR.findall(line)
            if ts:
                weights += _bytes(*parse_tensor(ts[-1]))
    return args, weights


def project(module_text: str, core: NeuronCore, batch: int, matmul_dtype: str = "bf16",
            price_per_hour: Optional[float] = None, chips_per_instance: int = 1,
            instance: Optional[str] = None, top: int = 10) -> dict:
    """Roofline projection of one forward pass of ``module_text`` on one ``core``.

    ``batch``: samples per forward pass; ``matmul_dtype``: bf16 | fp8 | fp32, the TensorE
    rate used for dot_general/convolution. Returns seconds per pass on one core, samples/s
    per core and per instance (every core serving its own replica), USD per million
    samples when ``price_per_hour`` is known, and the ``top`` ops by projected time, each
    compute- or memory-bound. Raises ValueError when the module has no costed operation.
    """
    ops = parse(module_text)
    if not ops:
        raise ValueError("the StableHLO module has no operation to cost")
    rate = {"bf16": core.tensor_bf16, "fp8": core.tensor_fp8, "fp32": core.tensor_fp32}[matmul_dtype]
    rates = {"tensor": rate, "vector": core.vector_fp32, "scalar": core.scalar_fp32}
    bw = core.hbm_bytes_per_s_core
    resident = core.sbuf_bytes / 2          # an intermediate up to this size stays on chip
    args_b, weights_b = _arg_bytes(module_text)
    rows = []
    for op in ops:
        # fused: elementwise chains stream through SBUF with their producer; only a fusion
        # root's result (matmul, convolution, reduction, data rearrangement) goes to HBM
        # (written, later read), and only when it is too big to stay in SBUF
        hbm = 2 * op.out_bytes if (op.name in FUSION_ROOTS or op.engine == "tensor") and op.out_bytes > resident \
            and not op.constant_operands else 0     # a weight's transpose is folded by the compiler
        t_compute = op.flops / rates[op.engine] if op.engine in rates else 0.0
        t_mem = hbm / bw
        rows.append({"line": op.line, "op": op.name, "engine": op.engine, "shape": op.shape, "dtype": op.dtype,
                     "flops": op.flops, "hbm_bytes": hbm, "compute_s": t_compute, "memory_s": t_mem,
                     "time_s": max(t_compute, t_mem),
                     "bound": "compute" if t_compute >= t_mem else "memory"})
    io_s = (args_b + weights_b) / bw        # inputs and weights read once
    total = sum(r["time_s"] for r in rows) + io_s
    per_engine = {}
    for r in rows:
        per_engine[r["engine"]] = per_engine.get(r["engine"], 0.0) + r["time_s"]
    cores = core.cores_per_chip * chips_per_instance
    thr_core = batch / total if total > 0 else None
    thr_inst = thr_core * cores if thr_core else None
    usd = (price_per_hour / 3600 * 1e6 / thr_inst) if (price_per_hour and thr_inst) else None
    rows.sort(key=lambda r: r["time_s"], reverse=True)
    return {
        "estimate": "ESTIMATE from a roofline model of the StableHLO graph, not a measurement",
        "core": core.name, "chip": core.chip, "matmul_dtype": matmul_dtype, "batch": batch,
        "latency_s_per_core": total, "throughput_per_core": thr_core,
        "instance": instance, "instance_assumed": instance in ASSUMED_INSTANCES,
        "cores_per_instance": cores, "throughput_per_instance": thr_inst,
        "price_per_hour": price_per_hour,
        "usd_per_million": usd,
        "total_flops": sum(r["flops"] for r in rows),
        "weights_and_inputs_bytes": args_b + weights_b, "weights_and_inputs_s": io_s,
        "time_by_engine_s": per_engine, "operations": len(rows),
        "top_ops": rows[:top],
        "constants": {"tensor_flops": rate, "vector_flops": core.vector_fp32, "scalar_flops": core.scalar_fp32,
                      "hbm_bytes_per_s_core": bw, "sbuf_bytes": core.sbuf_bytes},
        "sources": core.sources,
    }


def project_all(module_text: str, batch: int, prices: Optional[dict] = None, matmul_dtype: str = "bf16") -> dict:
    """``project`` on NeuronCore-v3 (Trn2) and NeuronCore-v4 (Trn3), priced from ``prices``
    (``{instance: usd_per_hour or None}``)."""
    out = {}
    for key in ("trn2", "trn3"):
        inst, chips = INSTANCES[key]
        price = (prices or {}).get(inst)
        out[key] = project(module_text, CORES[key], batch, matmul_dtype, price, chips, inst)
    return out
