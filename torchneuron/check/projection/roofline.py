"""A projection of Trainium time and cost from a StableHLO module: an estimate from a
roofline model, not a measurement.

Per operation: FLOPs (``dot_general``/``convolution`` on the TensorEngine at the BF16 rate
by default: the Neuron compiler's ``--auto-cast matmult``, the "Matmult-BF16" of AWS's
published benchmarks; transcendental elementwise ops (``SCALAR_OPS``) on the ScalarEngine;
other elementwise ops and reductions on the VectorEngine; one FLOP per output element, per
input element for reductions; ops on constants only are folded, 0) and the bytes the op
moves to or from HBM: the result of a matmul, convolution, reduction or rearrangement
(``FUSION_ROOTS``) written and read back when it exceeds half the SBUF (elementwise chains
are fused with their producer and stay on chip), plus, for a gather or slice of a weight or
input, the bytes it reads (``hbm_reads``). Time per op = max(FLOPs / engine rate, bytes /
HBM bandwidth per core): compute- or memory-bound; a matmul's or convolution's rate is the
TensorEngine's peak x the share of its 128x128 PE array the op's shapes keep busy
(``pe_utilization``: the nc_matmul instruction cost of AWS's NKI docs; a convolution over 3
input channels uses 3 of the 128 PE rows). The pass = the sum of the ops' times
(no engine overlap) + one serial row (``WEIGHTS_ROW``): every other weight and input read
from HBM once, and the outputs written once, at the core's HBM bandwidth, overlapping
nothing; a weight of rank 2 or more (a matmul's or convolution's) is read at the matmul
dtype's width: the compiler casts FP32 matmuls, weights included, to BF16 by default
(``--auto-cast matmult``, neuronx-cc-training-mixed-precision.html). torch-mlir emits erf
(GELU) as a ~25-op polynomial: it is costed as one ScalarE op per element (``_fold_erf``).
What the roofline does not see (``overheads.py``, fitted to AWS's published latencies):
each operation's time x ``roofline_factor``, and a fixed cost per execution (``FIXED_ROW``);
on Inf2, the pass x its fitted factor over Trn1 (``INSTANCE_ROW``).
Not modelled: collectives. Figures: ``hardware.py``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from .hardware import ASSUMED_INSTANCES, CORES, INSTANCES, NeuronCore
from .overheads import FITTED, Overheads

_DTYPE_BYTES = {
    "f64": 8,
    "f32": 4,
    "f16": 2,
    "bf16": 2,
    "i64": 8,
    "i32": 4,
    "i16": 2,
    "i8": 1,
    "i1": 1,
    "ui8": 1,
    "f8E4M3FN": 1,
    "f8E5M2": 1,
    "complex<f32>": 8,
}

#: Ops on the ScalarEngine (one output from one input through a function: activation LUTs).
SCALAR_OPS = {
    "exponential",
    "exponential_minus_one",
    "log",
    "log_plus_one",
    "tanh",
    "logistic",
    "rsqrt",
    "sqrt",
    "cbrt",
    "sine",
    "cosine",
    "tan",
    "erf",
    "power",
    "atan2",
}
#: Elementwise ops on the VectorEngine.
VECTOR_OPS = {
    "add",
    "subtract",
    "multiply",
    "divide",
    "maximum",
    "minimum",
    "negate",
    "abs",
    "select",
    "clamp",
    "compare",
    "and",
    "or",
    "xor",
    "not",
    "remainder",
    "floor",
    "ceil",
    "round_nearest_even",
    "round_nearest_afz",
    "sign",
    "convert",
    "is_finite",
    "shift_left",
    "shift_right_logical",
    "shift_right_arithmetic",
}
REDUCE_OPS = {"reduce", "reduce_window", "select_and_scatter"}
#: Data movement without arithmetic (bytes only when they leave SBUF).
MOVE_OPS = {
    "transpose",
    "reshape",
    "broadcast_in_dim",
    "concatenate",
    "slice",
    "dynamic_slice",
    "dynamic_update_slice",
    "gather",
    "scatter",
    "pad",
    "iota",
    "reverse",
    "bitcast_convert",
    "get_tuple_element",
    "tuple",
    "sort",
    "real_dynamic_slice",
    "dynamic_broadcast_in_dim",
}

#: Ops whose result is materialized (the compiler does not fuse through them).
FUSION_ROOTS = REDUCE_OPS | {
    "transpose",
    "gather",
    "scatter",
    "concatenate",
    "sort",
    "dynamic_update_slice",
}

#: The top-ops row of the serial read of weights and inputs (engine "dma").
WEIGHTS_ROW = "HBM: weights and inputs read, outputs written"
#: The top-ops row of the fixed cost per execution (engine "runtime"; ``overheads.py``).
FIXED_ROW = "fixed cost per execution: launch, DMA descriptors, synchronization"
#: The top-ops row of an instance family's factor (engine "runtime"; ``overheads.py``).
INSTANCE_ROW = "{}: published latency x{:g} of Trn1's for the same model and batch (fitted)"
#: Bytes per element of a weight cast to the matmul dtype (``--auto-cast matmult``).
_MATMUL_BYTES = {"bf16": 2, "fp8": 1, "fp32": 4}

_TENSOR = re.compile(r"tensor<([^<>]*(?:<[^<>]*>)?)>")
_OP = re.compile(
    r"^\s*(?:%[\w#:]+(?:\s*,\s*%[\w#:]+)*\s*=\s*)?\"?(stablehlo|chlo|mhlo)\.([a-z_]+)\"?"
)


@dataclass
class Op:
    """One StableHLO operation: its kind, FLOPs, engine and bytes (operands + result)."""

    line: int
    name: str
    engine: str  # tensor | vector | scalar | move | none
    flops: float
    out_bytes: int
    in_bytes: int
    shape: str
    dtype: str
    text: str = field(repr=False, default="")
    constant_operands: bool = False  # every operand a constant (a weight): folded at compile time
    operands: list = field(default_factory=list)  # SSA names, e.g. ["%cst_1", "%arg0"]
    lines: str = ""  # the source lines when several ops were costed as one (erf)
    result: str = ""  # the SSA name it defines, e.g. "%3"
    #: a matmul's or convolution's ``(contraction, lhs free, rhs free)`` sizes per
    #: instruction group (``pe_utilization``); () for other ops
    pe_dims: tuple = ()


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
    sig = line[idx + 3 :]
    if "->" in sig:
        a, b = sig.split("->", 1)
        return [parse_tensor(t) for t in _TENSOR.findall(a)], [
            parse_tensor(t) for t in _TENSOR.findall(b)
        ]
    ts = [parse_tensor(t) for t in _TENSOR.findall(sig)]
    return ts, ts[-1:]  # elementwise short form: operands and result share the type


def _dims_attr(line: str, name: str) -> list[int]:
    m = re.search(name + r"\s*=\s*\[([\d,\s]*)\]", line)
    return [int(x) for x in m.group(1).split(",") if x.strip()] if m else []


def _dims_pair(line: str, name: str) -> tuple[list[int], list[int]]:
    """``contracting_dims = [2] x [1]`` -> ``([2], [1])`` (the lhs's and the rhs's)."""
    m = re.search(name + r"\s*=\s*\[([\d,\s]*)\]\s*x\s*\[([\d,\s]*)\]", line)
    if not m:
        return [], []
    return tuple([int(x) for x in g.split(",") if x.strip()] for g in m.groups())  # type: ignore[return-value]


def _dot_pe_dims(line: str, lhs: list[int], rhs: list[int]) -> tuple[int, int, int]:
    """A ``dot_general``'s ``(contraction, lhs free, rhs free)``: the product of the
    contracting dims, and of each operand's dims that are neither contracted nor batched."""
    lc, rc = _dims_pair(line, "contracting_dims")
    lb, rb = _dims_pair(line, "batching_dims")
    k = math.prod(lhs[i] for i in lc if i < len(lhs)) or 1
    free_l = math.prod(d for i, d in enumerate(lhs) if i not in lc and i not in lb)
    free_r = math.prod(d for i, d in enumerate(rhs) if i not in rc and i not in rb)
    return k, max(free_l, 1), max(free_r, 1)


def _tiles(n: int, size: int) -> tuple[int, float]:
    """``n`` cut into tiles of at most ``size``: ``(tiles, mean tile size)``."""
    t = max(1, math.ceil(n / size))
    return t, n / t


def _matmul_cycles(k: int, stationary: int, moving: int, core: NeuronCore) -> float:
    """TensorEngine cycles of a ``k`` x ``stationary`` by ``k`` x ``moving`` matmul, cut into
    nc_matmul instructions: partition (contraction) tiles of ``core.pe_rows``, stationary
    free tiles of ``core.pe_cols``, moving free tiles of ``core.pe_moving``; each
    instruction ``max(min(pe_min_stationary, stationary tile), moving tile)`` cycles."""
    tk, _ = _tiles(k, core.pe_rows)
    ts, s = _tiles(stationary, core.pe_cols)
    tm, m = _tiles(moving, core.pe_moving)
    return tk * ts * tm * max(min(core.pe_min_stationary, s), m)


def pe_utilization(
    k: int, free_a: int, free_b: int, core: NeuronCore, either: bool = True
) -> float:
    """The share of the TensorEngine's peak a matmul reaches from its shapes alone: the
    cycles at peak (``k x free_a x free_b`` MACs on ``pe_rows x pe_cols`` PEs) over the
    cycles of its nc_matmul instructions (``_matmul_cycles``) with ``free_a`` stationary,
    or, when ``either``, the better of the two ways to map it (a ``dot_general``: either
    operand's free dims may be the stationary one; the compiler chooses).

    The TensorEngine is a ``pe_rows x pe_cols`` (128 x 128) systolic array: an instruction
    contracts over at most 128 partitions, holds a stationary tile of at most 128 columns
    and streams a moving tile of at most 512; its average cost is "max(min(64,
    N_stationary), N_moving) Tensor Engine cycles" (BF16/FP16/FP8/TF32; 4x for FP32:
    ``tensor_fp32``) whatever its contraction (nki.isa.nc_matmul, NeuronCore-v2;
    ``hardware.NeuronCore.pe_rows``). So a contraction under 128 leaves PE rows idle (k = 3
    uses 3/128 of them), and a moving tile under 64 columns pays for 64.

    A convolution (``either`` False) contracts over its input channels, one matmul per window
    tap accumulated in PSUM, with its kernel stationary (``free_a``: the output channels)
    and its pixels moving: an instruction's result lands with the stationary free axis on
    the partitions, and the next convolution contracts over channels on the partitions, so
    keeping the pixels stationary would need a transpose per layer. A 7x7 stem over 3
    channels is then 49 matmuls with k = 3 and 64 columns: 3/128 x 64/128 of the PEs. The
    compiler may fold taps into partitions (im2col); that is not assumed."""
    peak = k * free_a * free_b / (core.pe_rows * core.pe_cols)
    cycles = _matmul_cycles(k, free_a, free_b, core)
    if either:
        cycles = min(cycles, _matmul_cycles(k, free_b, free_a, core))
    return min(1.0, peak / cycles) if cycles > 0 else 1.0


def _patchify(line: str, kdims: list[int], kspec: list[str]) -> bool:
    """A convolution whose stride equals its window, unpadded and undilated (ViT's patch
    embedding): its windows tile the input without overlap, so gathering them is a reshape
    (no element copied twice) and the convolution is one matmul contracting over input
    channels x window, not one per window tap."""
    window = [kdims[i] for i, c in enumerate(kspec) if c not in "io"]
    stride = _dims_attr(line, "stride")
    pads = re.search(r"pad\s*=\s*\[(.*?)\]\]", line)
    unpadded = not pads or not re.search(r"[1-9]", pads.group(1))
    dilations = re.findall(r"(?:lhs|rhs)_dilate\s*=\s*\[([\d,\s]*)\]", line)
    undilated = all(int(x) == 1 for d in dilations for x in d.split(",") if x.strip())
    return bool(window) and stride == window and unpadded and undilated and max(window) > 1


_SPLAT = re.compile(r"^\s*(%[\w#]+)\s*=\s*stablehlo\.constant dense<([-+0-9.eE]+)>")


def parse(module_text: str) -> list[Op]:
    """The costed operations of a StableHLO module's text (constants and returns skipped).
    Unknown ops are kept with engine ``none`` (listed, not costed beyond their bytes).
    torch-mlir's polynomial for erf is costed as one ``erf`` (``_fold_erf``)."""
    ops: list[Op] = []
    splats: dict[str, float] = {}
    for no, line in enumerate(module_text.splitlines(), 1):
        c = _SPLAT.match(line)
        if c:
            splats[c.group(1)] = float(c.group(2))
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
        flops, engine, pe_dims = 0.0, "none", ()
        if name == "dot_general" and len(ins) >= 2:
            lhs = ins[0][0]
            k = math.prod(lhs[i] for i in _dims_attr(line, "contracting_dims")) or 1
            flops, engine = 2.0 * out_numel * k, "tensor"
            pe_dims = _dot_pe_dims(line, lhs, ins[1][0])
        elif name == "convolution" and len(ins) >= 2:
            kdims = ins[1][0]  # kernel: output feature dim is the largest product left out
            out_features = odims[-1] if odims else 1
            in_features = 1
            m2 = re.search(r"dim_numbers\s*=\s*\[([^\]]*)\]x\[([^\]]*)\]->", line)
            if m2:
                kspec = [c.strip() for c in m2.group(2).split(",")]
                if "o" in kspec:
                    out_features = kdims[kspec.index("o")]
                if "i" in kspec:
                    in_features = kdims[kspec.index("i")]
            # the kernel holds (input features / groups) x window per output feature
            per_output = math.prod(kdims) / max(out_features, 1)
            flops, engine = 2.0 * out_numel * per_output, "tensor"
            # per window tap: contract the group's input features; the free sizes are the
            # group's output features and the output's pixels (x batch)
            mg = re.search(r"feature_group_count\s*=\s*(\d+)", line)
            groups = int(mg.group(1)) if mg else 1
            pixels = out_numel // max(out_features, 1)
            if m2 and _patchify(line, kdims, kspec):  # windows that do not overlap: a matmul
                in_features *= math.prod(kdims[i] for i, c in enumerate(kspec) if c not in "io")
            pe_dims = (max(in_features, 1), max(out_features // groups, 1), max(pixels, 1))
        elif name in SCALAR_OPS:
            flops, engine = float(out_numel), "scalar"
        elif name in VECTOR_OPS:
            flops, engine = float(out_numel), "vector"
        elif name in REDUCE_OPS:
            flops, engine = (
                float(sum(math.prod(d) for d, _ in ins[: max(1, len(ins) // 2)])),
                "vector",
            )
        elif name in MOVE_OPS:
            engine = "move"
        operands = (
            re.findall(r"%[\w#]+", line.split("=", 1)[1].split(" : ")[0]) if "=" in line else []
        )
        const = bool(operands) and all(o.startswith("%cst") for o in operands)
        if const:  # computed from constants only: folded by the compiler, no work at run time
            flops = 0.0
        ops.append(
            Op(
                no,
                name,
                engine,
                flops,
                out_bytes,
                in_bytes,
                "x".join(map(str, odims)),
                odt,
                line.strip(),
                const,
                operands,
                result=(re.match(r"\s*(%[\w#]+)", line) or [""])[0].strip(),
                pe_dims=pe_dims,
            )
        )
    return _fold_erf(ops, splats)


def _clamp_bounds(op: Op, splats: dict[str, float]) -> tuple[float, float] | None:
    if op.name != "clamp" or len(op.operands) != 3:
        return None
    lo, hi = splats.get(op.operands[0]), splats.get(op.operands[2])
    return (lo, hi) if lo is not None and hi is not None else None


def _fold_erf(ops: list[Op], splats: dict[str, float]) -> list[Op]:
    """torch-mlir lowers ``erf`` (GELU's) to a rational polynomial: clamp(x, -4, 4), two
    polynomials in x^2, a divide, clamp(.., -1, 1) -- about 25 elementwise ops, no erf op.
    That span is costed as one ``erf`` on the ScalarEngine (one op per element: a function
    of the activation unit), not as 25 VectorEngine ops."""
    out: list[Op] = []
    i = 0
    while i < len(ops):
        op = ops[i]
        if _clamp_bounds(op, splats) == (-4.0, 4.0):
            for j in range(i + 1, min(i + 40, len(ops))):
                if _clamp_bounds(ops[j], splats) == (-1.0, 1.0) and ops[j].shape == op.shape:
                    end = ops[j]
                    numel = math.prod(int(d) for d in end.shape.split("x") if d) if end.shape else 1
                    out.append(
                        Op(
                            op.line,
                            "erf",
                            "scalar",
                            float(numel),
                            end.out_bytes,
                            op.in_bytes,
                            end.shape,
                            end.dtype,
                            f"erf: torch-mlir's polynomial, lines {op.line}-{end.line}",
                            False,
                            op.operands,
                            lines=f"{op.line}-{end.line}",
                        )
                    )
                    i = j + 1
                    break
            else:
                out.append(op)
                i += 1
            continue
        out.append(op)
        i += 1
    return out


def _hbm_values(module_text: str, matmul_dtype: str = "fp32") -> dict[str, int]:
    """``{name: bytes}`` of what starts in HBM: the function's arguments (``%arg0``) and its
    non-splat constants (weights, ``dense_resource``). A floating-point weight of rank 2 or
    more (a matmul's or convolution's; biases and norm scales are 1-D) counts at the matmul
    dtype's width when that is narrower: the compiler casts it once, at compile time."""
    vals: dict[str, int] = {}
    width = _MATMUL_BYTES.get(matmul_dtype, 4)
    m = re.search(r"func\.func @\w+\((.*?)\)\s*->", module_text, re.S)
    if m:
        for name, t in re.findall(r"(%[\w#]+)\s*:\s*tensor<([^<>]*(?:<[^<>]*>)?)>", m.group(1)):
            vals[name] = _bytes(*parse_tensor(t))
    for line in module_text.splitlines():
        if "stablehlo.constant" in line and "dense_resource" in line:
            name, ts = re.match(r"\s*(%[\w#]+)", line), _TENSOR.findall(line)
            if name and ts:
                dims, dt = parse_tensor(ts[-1])
                cast = (
                    len(dims) >= 2
                    and dt.startswith(("f", "bf"))
                    and width < _DTYPE_BYTES.get(dt, 4)
                )
                vals[name.group(1)] = math.prod(dims) * width if cast else _bytes(dims, dt)
    return vals


#: Ops that read only part of their first operand: its result's bytes (rows gathered x row bytes).
PARTIAL_READS = {"gather", "dynamic_gather", "dynamic_slice", "real_dynamic_slice", "slice"}


def _output_bytes(module_text: str) -> int:
    """Bytes of the function's results (written to HBM once)."""
    m = re.search(r"func\.func @\w+\(.*?\)\s*->\s*(.*?)\s*\{\s*$", module_text, re.S | re.M)
    return sum(_bytes(*parse_tensor(t)) for t in _TENSOR.findall(m.group(1))) if m else 0


#: Ops whose result is their operand's data, rearranged or cast (a weight passes through them).
_SAME_DATA = {"transpose", "reshape", "convert", "bitcast_convert", "broadcast_in_dim"}


def _matmul_uses(name: str, users: dict[str, list[int]], ops: list[Op]) -> int:
    """How many matmuls/convolutions read ``name``, directly or through ``_SAME_DATA`` ops
    (a weight's transpose, computed once, feeds every layer that shares the weight)."""
    count, todo, seen = 0, [name], {name}
    while todo:
        for i in users.get(todo.pop(), []):
            op = ops[i]
            if op.engine == "tensor":
                count += 1
            elif op.name in _SAME_DATA and op.result not in seen:
                seen.add(op.result)
                todo.append(op.result)
    return count


def hbm_reads(
    module_text: str, ops: list[Op], matmul_dtype: str = "fp32"
) -> tuple[int, dict[int, int]]:
    """What the pass reads of the values that start in HBM (``_hbm_values``):
    ``(serial_bytes, {op index: bytes})``. A value read only as the first operand of
    gathers or slices (an embedding table) counts the bytes those ops read, attributed to
    them; any other used value counts whole in ``serial_bytes``, once per matmul or
    convolution that reads it (weights are streamed through SBUF per matmul, not kept across
    layers: ALBERT's one shared layer is read 12 times a pass) and at least once; an unused
    one counts 0."""
    vals = _hbm_values(module_text, matmul_dtype)
    uses: dict[str, list[tuple[int, int]]] = {}
    users: dict[str, list[int]] = {}
    for i, op in enumerate(ops):
        for k, name in enumerate(op.operands):
            users.setdefault(name, []).append(i)
            if name in vals:
                uses.setdefault(name, []).append((i, k))
    serial, partial = 0, {}
    for name, us in uses.items():
        if all(ops[i].name in PARTIAL_READS and k == 0 for i, k in us):
            for i, _ in us:
                partial[i] = partial.get(i, 0) + min(ops[i].out_bytes, vals[name])
        else:
            serial += vals[name] * max(1, _matmul_uses(name, users, ops))
    return serial, partial


def _op_rows(ops: list[Op], partial: dict[int, int], core: NeuronCore, rate: float, factor: float):
    """One row per op: its roofline time (compute- or memory-bound) x ``factor``."""
    rates = {"tensor": rate, "vector": core.vector_fp32, "scalar": core.scalar_fp32}
    bw = core.hbm_bytes_per_s_core
    resident = core.sbuf_bytes / 2  # an intermediate up to this size stays on chip
    rows = []
    for i, op in enumerate(ops):
        # fused: elementwise chains stream through SBUF with their producer; only a fusion
        # root's result (matmul, convolution, reduction, data rearrangement) goes to HBM
        # (written, later read), and only when it is too big to stay in SBUF
        hbm = (
            2 * op.out_bytes
            if (op.name in FUSION_ROOTS or op.engine == "tensor")
            and op.out_bytes > resident
            and not op.constant_operands
            else 0
        )  # a weight's transpose is folded by the compiler
        hbm += partial.get(i, 0)  # the rows a gather/slice reads of a table in HBM
        t_compute = op.flops / rates[op.engine] if op.engine in rates else 0.0
        util = (
            pe_utilization(*op.pe_dims, core, either=op.name != "convolution")
            if op.pe_dims
            else 1.0
        )
        t_compute /= util  # the TensorEngine's rate over the PEs the op's shapes use
        t_mem = hbm / bw
        rows.append(
            _row(op.line, op.name, op.engine, op.shape, op.dtype, op.flops, hbm, t_compute, t_mem)
            | {"time_s": max(t_compute, t_mem) * factor}
            | ({"pe_utilization": util} if op.pe_dims else {})
        )
    return rows


def _row(line, op, engine, shape, dtype, flops, hbm, compute_s, memory_s) -> dict:
    return {
        "line": line,
        "op": op,
        "engine": engine,
        "shape": shape,
        "dtype": dtype,
        "flops": flops,
        "hbm_bytes": hbm,
        "compute_s": compute_s,
        "memory_s": memory_s,
        "time_s": max(compute_s, memory_s),
        "bound": "compute" if compute_s >= memory_s else "memory",
    }


def _by_engine(rows: list[dict]) -> dict[str, float]:
    out: dict[str, float] = {}
    for r in rows:
        out[r["engine"]] = out.get(r["engine"], 0.0) + r["time_s"]
    return out


def project(
    module_text: str,
    core: NeuronCore,
    batch: int,
    matmul_dtype: str = "bf16",
    price_per_hour: float | None = None,
    chips_per_instance: int = 1,
    instance: str | None = None,
    top: int = 10,
    overheads: Overheads = FITTED,
) -> dict:
    """Projection of one forward pass of ``module_text`` on one ``core``: the roofline
    of its ops x ``overheads.roofline_factor``, the serial HBM row (``WEIGHTS_ROW``) and
    the fixed cost of one execution (``FIXED_ROW``, ``overheads.execution_us``).

    ``batch``: samples per forward pass; ``matmul_dtype``: bf16 | fp8 | fp32, the TensorE
    rate used for dot_general/convolution and the width its weights are read at. Returns
    seconds per pass on one core, samples/s per core and per instance (every core serving
    its own replica), USD per million samples when ``price_per_hour`` is known, and the
    ``top`` ops by projected time, each compute- or memory-bound, with the serial HBM row
    and the fixed cost always among them; the pass's seconds are the sum of every row.
    Raises ValueError when the module has no costed operation."""
    ops = parse(module_text)
    if not ops:
        raise ValueError("the StableHLO module has no operation to cost")
    rate = {"bf16": core.tensor_bf16, "fp8": core.tensor_fp8, "fp32": core.tensor_fp32}[
        matmul_dtype
    ]
    bw = core.hbm_bytes_per_s_core
    read_b, partial = hbm_reads(module_text, ops, matmul_dtype)
    out_b = _output_bytes(module_text)
    serial_b = read_b + out_b
    rows = _op_rows(ops, partial, core, rate, overheads.roofline_factor)
    io_s = serial_b / bw  # the other weights and inputs read once, the outputs written once
    rows.append(_row(None, WEIGHTS_ROW, "dma", "", "", 0.0, serial_b, 0.0, io_s))
    fixed_s = overheads.execution_us * 1e-6
    rows.append(_row(None, FIXED_ROW, "runtime", "", "", 0.0, 0, fixed_s, 0.0))
    factor = overheads.instance_factor(instance)
    instance_s = (factor - 1.0) * sum(r["time_s"] for r in rows)
    if instance_s:  # the pass x the instance family's factor (overheads.INSTANCE_FACTORS)
        rows.append(
            _row(
                None, INSTANCE_ROW.format(instance, factor), "runtime", "", "", 0, 0, instance_s, 0
            )
        )
    total = sum(r["time_s"] for r in rows)
    per_engine = _by_engine(rows)
    cores = core.cores_per_chip * chips_per_instance
    thr_core = batch / total if total > 0 else None
    thr_inst = thr_core * cores if thr_core else None
    usd = (price_per_hour / 3600 * 1e6 / thr_inst) if (price_per_hour and thr_inst) else None
    rows.sort(key=lambda r: r["time_s"], reverse=True)
    return {
        "estimate": "ESTIMATE from a roofline model of the StableHLO graph with fixed costs "
        "fitted to AWS's published latencies, not a measurement",
        "core": core.name,
        "chip": core.chip,
        "matmul_dtype": matmul_dtype,
        "batch": batch,
        "latency_s_per_core": total,
        "throughput_per_core": thr_core,
        "instance": instance,
        "instance_assumed": instance in ASSUMED_INSTANCES,
        "cores_per_instance": cores,
        "throughput_per_instance": thr_inst,
        "price_per_hour": price_per_hour,
        "usd_per_million": usd,
        "total_flops": sum(r["flops"] for r in rows),
        "weights_and_inputs_bytes": read_b,
        "outputs_bytes": out_b,
        "weights_and_inputs_s": io_s,
        "weights_and_inputs_share": io_s / total if total > 0 else None,
        "gathered_bytes": sum(partial.values()),
        "fixed_s": fixed_s,
        "instance_factor": factor,
        "instance_s": instance_s,
        "overheads": overheads.as_dict(),
        "time_by_engine_s": per_engine,
        "operations": len(ops),
        # the serial row and the fixed cost are always listed (ranked, or last when below the top)
        "top_ops": rows[:top] + [r for r in rows[top:] if r["engine"] in ("dma", "runtime")],
        "constants": _constants(core, rate, bw, overheads),
        "sources": core.sources,
    }


def _constants(core: NeuronCore, rate: float, bw: float, overheads: Overheads) -> dict:
    """The figures a projection used: engine rates, HBM bandwidth, SBUF, fixed costs."""
    return {
        "tensor_flops": rate,
        "vector_flops": core.vector_fp32,
        "scalar_flops": core.scalar_fp32,
        "hbm_bytes_per_s_core": bw,
        "sbuf_bytes": core.sbuf_bytes,
        **overheads.as_dict(),
    }


def project_all(
    module_text: str, batch: int, prices: dict | None = None, matmul_dtype: str = "bf16"
) -> dict:
    """``project`` on NeuronCore-v3 (Trn2) and NeuronCore-v4 (Trn3), priced from ``prices``
    (``{instance: usd_per_hour or None}``)."""
    out = {}
    for key in ("trn2", "trn3"):
        inst, chips = INSTANCES[key]
        price = (prices or {}).get(inst)
        out[key] = project(module_text, CORES[key], batch, matmul_dtype, price, chips, inst)
    return out
