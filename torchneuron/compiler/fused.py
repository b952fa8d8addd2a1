"""The runner of fused segments: adaptive eager execution's compile and launch
(issue 26; docs/design/concatenation-engine.md, ``csrc/aten/concatenation_fuse.h``).

The C++ engine buffers native ops and, at a flush, describes a run of them: its
signature (``key``), and on the signature's second sight its steps, so that they are
compiled here once (``segment.compile_segment``) and the executable cached under the key;
every later sight only launches it. ``run`` is installed as the engine's runner when the
mode is on (``TORCH_NEURONX_ENABLE_CONCATENATION=1``, ``TORCHNEURON_CONCATENATION_FUSE=1``).
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_flatten, tree_map

from .segment import CompiledSegment, Ref, Segment, Step

__all__ = ["Ref", "ScalarIn", "ViewOf", "run", "compile_seconds", "segment_ops"]

_executables: dict[str, tuple[CompiledSegment, dict]] = {}  # key -> (exe, memory_orders)
_ops: dict[str, list | None] = {}  # model name -> the segment's kernels (``segment_ops``)
_compile_s = 0.0
_refusals: list[str] = []  # why recent segments were refused (the last 32)


@dataclass(frozen=True)
class ViewOf:
    """An operand that reads result ``ref`` through other ``sizes``/``strides``/``offset``
    (elements): the engine's record of a view taken of an earlier op's result, whose own
    geometry (as eager made it) is ``base_sizes``/``base_strides``/``base_offset``."""

    ref: Ref
    sizes: list
    strides: list
    offset: int
    base_sizes: list
    base_strides: list
    base_offset: int


def _op(name: str, overload: str):
    ns, op_name = name.split("::")
    return getattr(getattr(getattr(torch.ops, ns), op_name), overload or "default")


@dataclass(frozen=True)
class ScalarIn:
    """A float argument the engine passes as an input, not a constant: the call's scalar
    ``index`` (``float_inputs_op`` in ``concatenation_fuse.cpp``: an optimizer's per-step
    step size, its bias corrections). The segment reads it from a float32 input vector,
    one element per scalar, and its op is rewritten to take a tensor there
    (``_FLOAT_INPUT_OPS``)."""

    index: int


def _scalar_tensor_op(name: str):
    """``div_.Scalar(self, s)`` -> ``div_.Tensor(self, s)`` (a 0-dim tensor ``s``)."""
    op = _op(name, "Tensor")
    return lambda args, kw, add: (op, args, kw)


def _alpha_op(name: str):
    """``add.Tensor(self, other, alpha=s)`` -> ``add.Tensor(self, other * s)``: the CPU
    kernel's ``self + alpha * other``."""
    op = _op(name, "Tensor")

    def rewrite(args, kw, add):
        kw = dict(kw)
        s = kw.pop("alpha")
        return op, (args[0], add(torch.ops.aten.mul.Tensor, (args[1], s))), kw

    return rewrite


def _addc_op(name: str, div: bool):
    """``addcdiv(self, t1, t2, value=s)`` -> ``self + (s * t1) / t2`` and ``addcmul`` ->
    ``self + (s * t1) * t2``, in the order of the CPU kernels (and of ``torch._refs``)."""
    op = _op(name, "Tensor")
    aten = torch.ops.aten

    def rewrite(args, kw, add):
        self, t1, t2 = args[:3]
        s = kw.get("value", args[3] if len(args) > 3 else None)
        if div:  # ATen: self + value * t1 / t2, i.e. (value * t1) / t2
            term = add(aten.div.Tensor, (add(aten.mul.Tensor, (s, t1)), t2))
        else:
            term = add(aten.mul.Tensor, (add(aten.mul.Tensor, (s, t1)), t2))
        return op, (self, term), {}

    return rewrite


# (op name, overload) -> rewrite(args, kwargs, add) -> (op, args, kwargs): the op with its
# ScalarIn argument taken as a 0-dim float32 tensor. The C++ list (float_inputs_op) names
# the same ops; one missing here refuses its segment (it then runs unfused).
_FLOAT_INPUT_OPS = {
    **{
        ("aten::" + n, "Scalar"): _scalar_tensor_op("aten::" + n)
        for n in ("div", "div_", "mul", "mul_")
    },
    **{("aten::" + n, "Tensor"): _alpha_op("aten::" + n) for n in ("add", "add_", "sub", "sub_")},
    ("aten::addcdiv", ""): _addc_op("aten::add", div=True),
    ("aten::addcdiv_", ""): _addc_op("aten::add_", div=True),
    ("aten::addcmul", ""): _addc_op("aten::add", div=False),
    ("aten::addcmul_", ""): _addc_op("aten::add_", div=False),
    ("aten::lerp", "Scalar"): _scalar_tensor_op("aten::lerp"),
    ("aten::lerp_", "Scalar"): _scalar_tensor_op("aten::lerp_"),
}


def _contiguous(sizes, strides) -> bool:
    expect = 1
    for n, st in zip(reversed(sizes), reversed(strides)):
        if n != 1 and st != expect:
            return False
        expect *= n
    return True


def _view_steps(src: Ref, v: ViewOf, add, written: bool) -> Ref:
    """Steps that read ``v`` from result ``src``. A graph's values are logical tensors (a
    lowering lays each out row-major), so the result is first put in eager's memory order
    (a permute by its strides) and flattened; the view is taken of that flat image. An
    operand the op writes is made by views only (so that the write reaches the result);
    a read-only one may copy the permuted result to make it flat (tracing gives some ops'
    results other strides than the CPU kernel does). Raises ``ValueError`` for a result
    that is not dense in memory (the segment is then refused: it runs unfused)."""
    aten = torch.ops.aten
    bs, bst = list(v.base_sizes), list(v.base_strides)
    if v.base_offset != 0:
        raise ValueError("fused segment: a view of a result with a storage offset")
    if _contiguous(bs, bst):
        mem = src
    else:
        perm = sorted(range(len(bs)), key=lambda d: (-bst[d], d))
        if not _contiguous([bs[d] for d in perm], [bst[d] for d in perm]):
            raise ValueError("fused segment: a view of a result that is not dense")
        mem = add(aten.permute.default, (src, perm))
        if not written:
            mem = add(aten.clone.default, (mem,), {"memory_format": torch.contiguous_format})
    if mem is src and list(v.sizes) == bs and list(v.strides) == bst and v.offset == 0:
        return src
    dense = _dense_view(mem, math.prod(bs), v, add)
    if dense is not None:
        return dense
    if mem is src:  # dense in its own order: as_strided of it reads eager's memory
        # (one view deep: functionalization refuses writes through as_strided of a view)
        return add(aten.as_strided.default, (src, list(v.sizes), list(v.strides), v.offset))
    flat = add(aten.view.default, (mem, [-1]))
    return add(aten.as_strided.default, (flat, list(v.sizes), list(v.strides), v.offset))


def _dense_view(mem: Ref, numel: int, v: ViewOf, add) -> Ref | None:
    """``v`` by plain view ops of ``mem`` (a tensor whose logical order is eager's memory
    order, ``numel`` elements), when it reads every element once in some order, broadcast
    along stride-0 dims: a reshape, a transpose or permutation, an expand. None otherwise.
    (The compile path lowers ``as_strided`` as a gather; these stay views.)"""
    aten = torch.ops.aten
    real = [d for d, (n, st) in enumerate(zip(v.sizes, v.strides)) if n != 1 and st != 0]
    order = sorted(real, key=lambda d: -v.strides[d])
    if v.offset != 0 or math.prod(v.sizes[d] for d in real) != numel:
        return None
    if not _contiguous([v.sizes[d] for d in order], [v.strides[d] for d in order]):
        return None
    t = add(aten.view.default, (mem, [v.sizes[d] for d in order]))
    perm = sorted(range(len(order)), key=lambda k: order[k])  # back to the view's dim order
    if perm != list(range(len(order))):
        t = add(aten.permute.default, (t, perm))
    for d in range(len(v.sizes)):
        if d not in real:
            t = add(aten.unsqueeze.default, (t, d))
    if any(v.strides[d] == 0 and v.sizes[d] != 1 for d in range(len(v.sizes))):
        t = add(aten.expand.default, (t, list(v.sizes)))
    return t


def _name(seg: Segment, key: str) -> str:
    """The executable's model name (its graphs' names, the profiler's kernel names, begin
    with it): ``fused_``, the segment's distinct ops in order cut at 72 characters, and 8 hex
    digits of the signature's SHA-256 (``fused_addmm_gelu_1f0c9a2e``), which tell apart
    segments of the same ops and are the same in every process."""
    names = []
    for s in seg.steps:
        n = s.op._opname
        if n not in names:
            names.append(n)
    digest = hashlib.sha256(key.encode()).hexdigest()[:8]
    return f"{('fused_' + '_'.join(names))[:72]}_{digest}"


def _kernels(seg: Segment, inputs: list) -> list | None:
    """What each non-view step of ``seg`` would launch as an eager kernel: ``(op, input
    shapes, input dtypes, arguments)``, shapes found by running the steps on meta tensors.
    None when an op has no meta kernel."""
    vals = [torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta") for t in inputs]
    results: list[list] = []
    out = []

    def val(a):
        if not isinstance(a, Ref):
            return a
        return vals[a.index] if a.op == -1 else results[a.op][a.index]

    try:
        for s in seg.steps:
            args, kwargs = tree_map(val, s.args), tree_map(val, s.kwargs)
            r = s.op(*args, **kwargs)
            results.append([r] if isinstance(r, torch.Tensor) else list(r))
            if s.op.is_view:
                continue
            flat = tree_flatten((args, kwargs))[0]
            ts = [a for a in flat if isinstance(a, torch.Tensor)]
            out.append(
                (
                    f"{s.op.namespace}::{s.op._opname}",
                    [list(t.shape) for t in ts],
                    [t.dtype for t in ts],
                    [None if isinstance(a, torch.Tensor) else a for a in (*args, *kwargs.values())],
                )
            )
    except Exception:  # no meta kernel: the segment's ops stay unknown (costed as nothing)
        return None
    return out


def segment_ops(kernel_name: str) -> list | None:
    """The eager kernels a fused segment stands for, from the name its launch has in the
    profiler (``fused_addmm_gelu_1f0c9a2e_0_inference_0``): ``[(op, input shapes, input
    dtypes, arguments)]`` in order, views left out (they launch nothing). None for a name
    this process did not compile or whose ops have no meta kernel (``torchneuron check``'s
    eager projection costs the segment's ops with them)."""
    for name, ops in _ops.items():
        if kernel_name == name or kernel_name.startswith(name + "_"):
            return ops
    return None


def compile_seconds() -> float:
    """Seconds spent compiling fused segments in this process."""
    return _compile_s


def refusals() -> list[str]:
    """Why the most recent segments failed to compile (up to 32, oldest first): each
    such signature runs its ops one by one from then on."""
    return list(_refusals)


def _written_inputs(steps) -> set[int]:
    """The inputs some step writes (an operand of an argument its schema marks written)."""
    out: set[int] = set()
    for name, overload, args, _ in steps:
        for spec, a in zip(_op(name, overload)._schema.arguments, args):
            if spec.alias_info and spec.alias_info.is_write:
                for x in a if isinstance(a, list) else [a]:
                    r = x.ref if isinstance(x, ViewOf) else x
                    if isinstance(r, Ref) and r.op == -1:
                        out.add(r.index)
    return out


def memory_orders(inputs: list, written: set[int]) -> dict[int, list[int]]:
    """``{input: permutation}`` for the read-only inputs that are dense in another order
    than row-major (a transposed weight: ``w.t()``): passed permuted into memory order,
    they reach the executable without a copy, and the segment permutes them back. A
    graph's inputs are row-major (the compile path copies any other layout at each call:
    MiniLM's 36 transposed weights were 14 ms of copies in a 145 ms fused pass)."""
    out = {}
    for i, t in enumerate(inputs):
        if i in written or t.dim() < 2 or t.is_contiguous():
            continue
        perm = sorted(range(t.dim()), key=lambda d: (-t.stride(d), d))
        if t.permute(perm).is_contiguous():
            out[i] = perm
    return out


def to_segment(
    steps, outputs, n_inputs: int, perms: dict | None = None, scalars: int | None = None
) -> Segment:
    """The engine's steps ``(op name, overload, args, n_results)`` (operands as ``Ref``,
    ``ViewOf``, ``ScalarIn`` or Python numbers) as a ``Segment``: a view operand becomes an
    ``as_strided`` step before its reader; kwarg-only arguments become keywords. An input
    in ``perms`` (``memory_orders``) arrives permuted and is permuted back before use.
    ``scalars``: the input holding the ``ScalarIn`` values (a float32 vector); a step with
    one is rewritten by ``_FLOAT_INPUT_OPS``. Raises ``ValueError`` for a step it cannot
    express."""
    out_steps: list[Step] = []
    scalar_refs: dict[int, Ref] = {}
    where: list[int] = []  # engine step -> segment step
    logical: dict[int, Ref] = {}  # a permuted input, permuted back

    def add(op, args, kwargs=None) -> Ref:
        out_steps.append(Step(op, args, kwargs or {}))
        return Ref(len(out_steps) - 1, 0)

    def input_ref(r: Ref) -> Ref:
        perm = (perms or {}).get(r.index)
        if perm is None:
            return r
        if r.index not in logical:
            inverse = sorted(range(len(perm)), key=perm.__getitem__)
            logical[r.index] = add(torch.ops.aten.permute.default, (r, inverse))
        return logical[r.index]

    def operand(a, written=False):
        if isinstance(a, ScalarIn):
            if scalars is None:
                raise ValueError("fused segment: a float input without the scalars input")
            if a.index not in scalar_refs:
                scalar_refs[a.index] = add(
                    torch.ops.aten.select.int, (Ref(-1, scalars), 0, a.index)
                )
            return scalar_refs[a.index]
        if isinstance(a, ViewOf):
            src = input_ref(a.ref) if a.ref.op == -1 else Ref(where[a.ref.op], a.ref.index)
            return _view_steps(src, a, add, written)
        if isinstance(a, Ref):
            return input_ref(a) if a.op == -1 else Ref(where[a.op], a.index)
        if isinstance(a, list):
            return [operand(e, written) for e in a]
        return a

    for name, overload, args, n_out in steps:
        op = _op(name, overload)
        specs = op._schema.arguments
        vals = [
            operand(a, bool(spec.alias_info and spec.alias_info.is_write))
            for spec, a in zip(specs, args)
        ]
        pos, kw = [], {}
        for spec, v in zip(specs, vals):
            if spec.kwarg_only:
                kw[spec.name] = v
            else:
                pos.append(v)
        pos = tuple(pos)
        if any(
            isinstance(a, ScalarIn) and not isinstance(spec.type, torch.TensorType)
            for spec, a in zip(specs, args)
        ):  # a float argument (a wrapped number in a Tensor argument is a tensor already)
            rewrite = _FLOAT_INPUT_OPS.get((name, overload))
            if rewrite is None:
                raise ValueError(f"fused segment: no float input form of {name}.{overload}")
            op, pos, kw = rewrite(pos, kw, add)
        out_steps.append(Step(op, pos, kw, n_out))
        where.append(len(out_steps) - 1)
    return Segment(out_steps, n_inputs, [Ref(where[s], i) for s, i in outputs])


def run(key: str, compile: bool, steps, outputs, inputs: list, dsts: list, scalars=()) -> bool:
    """Launch the executable of ``key`` on the current stream, reading ``inputs`` (and
    ``scalars``, the values of the steps' ``ScalarIn`` arguments) and writing the outputs
    into ``dsts``; with ``compile``, compile it from ``steps`` first. Returns False, having
    launched nothing, when the segment cannot be compiled (the engine then runs its ops
    one by one and never tries this signature again)."""
    global _compile_s
    with _disable_current_modes(), torch.no_grad():
        n_tensors = len(inputs)
        if scalars:
            # one float32 vector, copied with the segment's launch (the CPU kernels cast
            # each double to float32 too); not waited for
            vec = torch.tensor(scalars, dtype=torch.float32)
            inputs = [
                *inputs,
                vec.to(torch.device("neuron", torch.neuron.current_device()), non_blocking=True),
            ]
        if compile:
            t0 = time.perf_counter()
            try:
                perms = memory_orders(inputs, _written_inputs(steps))
                seg = to_segment(steps, outputs, len(inputs), perms, n_tensors if scalars else None)
                name = _name(seg, key)
                ins = _permuted(inputs, perms)
                exe = CompiledSegment(seg, ins, model_name=name)
                # The first call compiles (lowering, XLA) before it launches: an
                # error there has launched nothing.
                exe(ins, dsts)
            except Exception as e:
                _refusals.append(f"{type(e).__name__}: {str(e).strip()[:500]}")
                del _refusals[:-32]
                return False
            finally:
                _compile_s += time.perf_counter() - t0
            _executables[key] = (exe, perms)
            _ops[name] = _kernels(seg, ins)
            return True
        hit = _executables.get(key)
        if hit is None:
            return False
        # the key holds every input's sizes and strides: the same permutations apply
        hit[0](_permuted(inputs, hit[1]), dsts)
        return True


def _permuted(inputs: list, perms: dict) -> list:
    return (
        [t.permute(perms[i]) if i in perms else t for i, t in enumerate(inputs)]
        if perms
        else inputs
    )
