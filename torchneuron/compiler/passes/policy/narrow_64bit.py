"""The 64-bit policy in compiled graphs, op by op as eager applies it: float64 computed
as float32, int64 as int32, results restored to their 64-bit dtype.

Eager (csrc/aten/native_kernel.cpp) computes each native op's float64/int64 value
arguments in 32 bits and restores the result dtype: arithmetic rounds to float32 and
wraps at 32 bits. It never narrows index arguments (``index``, ``indices``,
``offsets``, ``target``: kIndexArgNames), data movement (kDataMovementOps in
csrc/aten/native_ops.h), copies, views, fills, factories or random draws, so moving
float64/int64 data is exact. This pass does the same on the graph: an op that eager
narrows reads 32-bit conversions of its 64-bit tensor arguments (Python scalars
beside them as eager's narrowed_scalar: ints wrap to int32 when int64 is narrowed,
floats saturate to the float32 range), and a 32-bit result where the graph had a
64-bit one is converted back, so every value keeps its dtype and agrees with eager.
An op with no 32-bit form runs at full width (eager's full_width_stats case), and so does
an op eager has no neuron kernel for (it takes the CPU fallback there: sort, topk,
floor_divide, shifts, nan_to_num), judged by the eager op each node was traced from
(a ``.Scalar`` overload by the ``.Tensor`` one its composite kernel calls: ``x % 3``
and ``x | 1`` narrow), and an int64 division by a scalar that is 0 at 32 bits
(``x % 2**33``: eager's narrowed kernel fails on it, so eager computes at full width).

Each narrowed op is recorded in ``plan.narrowed`` (and one at full width in
``plan.full_width``) under eager's operator name (``aten::add.Tensor``); every launch
adds them to ``torch.neuron.narrowing_stats()`` / ``full_width_stats()`` as eager
counts its calls (executable.py). Off with TORCHNEURON_NARROW_64BIT=0 (torch.neuron's
switch; a compiled callable follows it at each call: ../../narrowing_variants.py).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import operator
import threading

import torch

from .._fake_mode import graph_fake_mode

aten = torch.ops.aten

_NARROW = {torch.float64: torch.float32, torch.int64: torch.int32}
_F32_MAX = float(torch.finfo(torch.float32).max)

# Base names (no overload) never narrowed: eager's data-movement ops (read from the
# extension, one list) with their functional forms, plus what eager does not compute
# through a narrowing kernel (views, copies, creation, draws).
_EXEMPT_COMPILED = frozenset(
    """
masked_fill masked_scatter index_put _index_put_impl index_fill index_copy
_unsafe_index _unsafe_index_put embedding
slice_scatter select_scatter diagonal_scatter as_strided_scatter
view _unsafe_view reshape expand permute transpose t slice select squeeze unsqueeze alias
as_strided split split_with_sizes unbind clone _to_copy copy lift_fresh_copy detach
convert_element_type
unfold diagonal narrow contiguous
arange full full_like zeros zeros_like ones ones_like empty empty_like empty_strided
scalar_tensor new_zeros new_ones new_full new_empty fill zero
rand rand_like randn randn_like randint randint_like bernoulli uniform normal random
""".split()
)


@functools.cache
def _exempt() -> frozenset:
    from .... import _C

    return _EXEMPT_COMPILED | {n.rstrip("_") for n in _C._data_movement_ops()}


_INDEX_ARGS = frozenset(("index", "indices", "offsets", "target"))


@functools.cache
def _has_index_args(name) -> bool:
    """Whether eager op ``name`` (``aten::nll_loss_forward``) takes an index argument."""
    if not name:
        return False
    schemas = torch._C._jit_get_schemas_for_operator(name.split(".")[0])
    return any(a.name in _INDEX_ARGS for s in schemas for a in s.arguments)


_compiling = threading.local()


def enabled() -> bool:
    """The switch this compile follows: the one ``compiling_with`` set on this thread,
    else torchneuron's (TORCHNEURON_NARROW_64BIT, ``_C._set_narrow_64bit``)."""
    v = getattr(_compiling, "narrow", None)
    if v is not None:
        return v
    from .... import _C

    return bool(_C._narrow_64bit())


@contextlib.contextmanager
def compiling_with(narrow: bool):
    """Compiles on this thread under ``narrow`` whatever the switch becomes meanwhile
    (narrowing_variants.py builds the variant a call asked for)."""
    prev = getattr(_compiling, "narrow", None)
    _compiling.narrow = bool(narrow)
    try:
        yield
    finally:
        _compiling.narrow = prev


def _val(a):
    return a.meta.get("val") if isinstance(a, torch.fx.Node) else a


def _is_wide(a) -> bool:
    v = _val(a) if isinstance(a, torch.fx.Node) else None
    return isinstance(v, torch.Tensor) and v.dtype in _NARROW


def _wrap32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


# rsub.Scalar's composite kernel calls native::rsub, which calls sub.Tensor (1.0 - x
# narrows in eager; rsub.Tensor itself has no neuron kernel)
_COMPOSITE_CALLS = {"aten::rsub.Scalar": "aten::sub.Tensor"}


@functools.cache
def _eager_kernel(name):
    """(whether eager computes ``name`` (``aten::add.Tensor``) with a neuron kernel, which
    narrows, the name eager counts it under). An op without one takes the CPU fallback
    at full width (``sort``, ``floor_divide``, ``>>``: compiled, they had been narrowed)."""
    if name is None:
        return True, None
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    if has(name, "PrivateUse1"):
        return True, name
    # A .Scalar overload without a neuron kernel runs its CompositeExplicitAutograd
    # kernel in eager, which calls the .Tensor overload (or the plain op) with the scalar
    # wrapped: that one decides (x % 3, x | 1, fmod(x, 3) narrow; x // 3 falls back).
    if name in _COMPOSITE_CALLS:  # a composite that calls another op than its sibling
        return _eager_kernel(_COMPOSITE_CALLS[name])
    base, _, overload = name.partition(".")
    if overload == "Scalar" and has(name, "CompositeExplicitAutograd"):
        for sibling in (base + ".Tensor", base):
            try:
                return has(sibling, "PrivateUse1"), sibling
            except RuntimeError:  # no such overload
                continue
    return False, name


def _native_in_eager(name) -> bool:
    return _eager_kernel(name)[0]


_DIVISIONS = frozenset(("fmod", "remainder", "div", "floor_divide"))


def _wraps_to_zero(a) -> bool:
    """An int divisor that is 0 at 32 bits but not at 64 (2**33): a Python int, or the
    0-dim tensor a decomposition made of one (``scalar_tensor``/``full``); or one that
    may be: a 0-dim CPU int64 graph input (``x % torch.tensor(2**33)``), whose value eager
    looks at per call and the graph cannot, so the call keeps full width (exact)."""
    if isinstance(a, torch.fx.Node) and a.op == "placeholder":
        v = _val(a)
        return (
            isinstance(v, torch.Tensor)
            and v.device.type == "cpu"
            and v.dim() == 0
            and v.dtype == torch.int64
        )
    if (
        isinstance(a, torch.fx.Node)
        and a.op == "call_function"
        and a.target in (aten.scalar_tensor.default, aten.full.default)
    ):
        a = a.args[0] if a.target is aten.scalar_tensor.default else a.args[1]
    return isinstance(a, int) and not isinstance(a, bool) and a != 0 and _wrap32(a) == 0


def _zero_divisor_calls(g: torch.fx.Graph, calls: dict) -> set:
    """Eager calls that divide int64 by a scalar wrapping to 0 at 32 bits: eager's
    narrowed kernel fails on the zero divisor (probed on zeros), so eager computes the
    call at full width (x % 2**33 is exact); the whole call, as its decomposition's
    other nodes (remainder's ``r + b``) would wrap the divisor too."""
    out = set()
    for n in g.nodes:
        if (
            n.op == "call_function"
            and isinstance(n.target, torch._ops.OpOverload)
            and n.target._schema.name.split("::")[-1] in _DIVISIONS
            and len(n.args) > 1
            and _is_wide(n.args[0])
            and _val(n.args[0]).dtype == torch.int64
            and _wraps_to_zero(n.args[1])
        ):
            out.add(calls[n][0])
    return out


def eager_op_name(target: torch._ops.OpOverload) -> str:
    """The name eager's counters use for ``target``: ``aten::add.Tensor``, ``aten::exp``."""
    s = target._schema
    return s.name + (f".{s.overload_name}" if s.overload_name else "")


def _is_backward_graph(g: torch.fx.Graph) -> bool:
    """AOTAutograd's backward graphs take the gradients as ``tangents_*`` inputs."""
    return any(n.op == "placeholder" and n.name.startswith("tangents_") for n in g.nodes)


def _eager_calls(g: torch.fx.Graph) -> dict:
    """node -> (call number, eager op name) of the eager call it comes from, so an op that
    AOTAutograd decomposed (layer_norm into mean, sub, ...) is counted once, under the
    name eager counts it by. A call is a run of consecutive nodes traced from one
    Dynamo node (``from_node``) and one ATen op (``original_aten``). Forward nodes the
    min-cut partitioner recomputes in a backward graph (they keep their ``from_node``;
    backward nodes have none) get negative call numbers: eager ran them once, in the
    forward, so they are decided as eager decides but not counted again."""
    out, prev, k, recomputed = {}, None, 0, {}
    backward = _is_backward_graph(g)
    for n in g.nodes:
        if n.op != "call_function":
            continue
        src = n.meta.get("from_node") or ()
        op = n.meta.get("original_aten")  # a copy of the op (the graph was copied)
        if not isinstance(op, torch._ops.OpOverload):
            op = n.target if isinstance(n.target, torch._ops.OpOverload) else None
        if backward and src:  # recomputed forward node: decided as eager, not counted
            name = _eager_kernel(eager_op_name(op))[1] if op is not None else None
            out[n] = (recomputed.setdefault((src[0].name, name), -1 - len(recomputed)), name)
            continue
        # backward nodes have no from_node; AOTAutograd's seq_nr ties a decomposed
        # backward op's nodes together (gelu_backward counted 22 times for 2 calls)
        seq = n.meta.get("seq_nr")
        origin = (
            src[0].name
            if src
            else (("seq_nr", seq) if seq is not None and op is not None else n.name)
        )
        key = (origin, _eager_kernel(eager_op_name(op))[1] if op is not None else None)
        if key != prev:
            k, prev = k + 1, key
        out[n] = (k, key[1])
    return out


def narrow_64bit(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    if not enabled():
        return
    mode = graph_fake_mode(gm.graph)
    if mode is None:
        return
    g = gm.graph
    narrow_of: dict = {}  # 64-bit node -> its 32-bit form
    inserted: set = set()  # conversions this pass inserted (either way)
    narrowed, full_width = [], []  # nodes, counted if they survive dead-code removal

    def as_narrow(a):
        if a in narrow_of:
            return narrow_of[a]
        dt = _NARROW[a.meta["val"].dtype]
        with g.inserting_after(a):
            c = g.call_function(aten._to_copy.default, (a,), {"dtype": dt})
        with mode:
            c.meta["val"] = a.meta["val"].to(dt)
        narrow_of[a] = c
        inserted.add(c)
        return c

    def widen(n, dt):
        with g.inserting_after(n):
            w = g.call_function(aten._to_copy.default, (n,), {"dtype": dt})
        with mode:
            w.meta["val"] = n.meta["val"].to(dt)
        n.replace_all_uses_with(w, delete_user_cb=lambda u: u is not w)
        inserted.add(w)
        narrow_of[w] = n

    def restores(old, new) -> bool:  # a 64-bit result now computed in 32 bits
        return (
            isinstance(old, torch.Tensor)
            and isinstance(new, torch.Tensor)
            and _NARROW.get(old.dtype) == new.dtype
        )

    calls = _eager_calls(g)
    zero_divisor = _zero_divisor_calls(g, calls)
    rerun = set()
    for n in list(g.nodes):
        if n.op != "call_function" or n in inserted:
            continue
        if n.target is operator.getitem and n.args[0] in rerun:
            old = n.meta.get("val")
            n.meta["val"] = n.args[0].meta["val"][n.args[1]]
            n.meta.pop("tensor_meta", None)
            if restores(old, n.meta["val"]) and n.users:
                widen(n, old.dtype)
            continue
        if not isinstance(n.target, torch._ops.OpOverload):
            continue
        schema = n.target._schema
        if schema.name.split("::")[-1].rstrip("_") in _exempt():
            continue
        if not _native_in_eager(calls[n][1]):
            continue  # eager runs that op on the CPU fallback, at full width
        if calls[n][0] in zero_divisor:
            if any(_is_wide(a) for a in n.args):
                full_width.append(n)
            continue
        names = [a.name for a in schema.arguments]
        # A node decomposed from an op with index arguments (nll_loss's target,
        # embedding_dense_backward's indices): its int64 values are those indices, which
        # eager never narrows (the decomposition computes with them under other names).
        keep_ints = eager_op_name(n.target) != calls[n][1] and _has_index_args(calls[n][1])

        def narrows(a) -> bool:
            return _is_wide(a) and not (keep_ints and _val(a).dtype == torch.int64)

        new_args, narrowed_dtypes = list(n.args), set()
        for i, a in enumerate(n.args):
            if i < len(names) and names[i] not in _INDEX_ARGS and narrows(a):
                narrowed_dtypes.add(_val(a).dtype)
                new_args[i] = as_narrow(a)
        new_kwargs = dict(n.kwargs)
        for k, a in n.kwargs.items():
            if k not in _INDEX_ARGS and narrows(a):
                narrowed_dtypes.add(_val(a).dtype)
                new_kwargs[k] = as_narrow(a)
        if not narrowed_dtypes:
            continue
        wrap_ints = torch.int64 in narrowed_dtypes
        device = next(
            _val(a)
            for a in new_args
            if isinstance(a, torch.fx.Node) and isinstance(_val(a), torch.Tensor)
        ).device
        # Python scalars beside narrowed tensors, as eager's narrowed_scalar: ints wrap
        # (with int64 tensors), floats saturate to float32's range. An int in a Tensor
        # argument becomes a 0-dim int32 tensor (torch-mlir computes a Python int
        # operand in i64, which would undo the narrowing).
        for i, a in enumerate(new_args):
            if i >= len(names) or isinstance(a, bool) or not isinstance(a, (int, float)):
                continue
            kind = schema.arguments[i].type.kind()
            if isinstance(a, float):
                if kind == "NumberType" and abs(a) > _F32_MAX and a == a and abs(a) != float("inf"):
                    new_args[i] = _F32_MAX if a > 0 else -_F32_MAX
            elif wrap_ints and kind == "NumberType":
                new_args[i] = _wrap32(a)
            elif wrap_ints and kind == "TensorType":
                with g.inserting_before(n):
                    c = g.call_function(
                        aten.full.default,
                        ([], _wrap32(a)),
                        {"dtype": torch.int32, "device": device},
                    )
                with mode:
                    c.meta["val"] = torch.full([], _wrap32(a), dtype=torch.int32, device=device)
                inserted.add(c)
                new_args[i] = c
        old_val = n.meta.get("val")
        old_args, old_kwargs = n.args, n.kwargs
        n.args, n.kwargs = tuple(new_args), new_kwargs
        try:
            a, kw = torch.fx.node.map_arg((n.args, n.kwargs), _val)
            with mode:
                val = n.target(*a, **kw)
        except Exception:
            n.args, n.kwargs = old_args, old_kwargs  # no 32-bit form: full width
            full_width.append(n)
            continue
        narrowed.append(n)
        n.meta["val"] = val
        n.meta.pop("tensor_meta", None)  # stale: torch-mlir would type the result from it
        rerun.add(n)
        if restores(old_val, val):
            widen(n, old_val.dtype)
    g.eliminate_dead_code()
    live = set(g.nodes)
    narrowed_calls = {calls[n] for n in narrowed if n in live and calls[n][0] > 0}
    full_calls = {calls[n] for n in full_width if n in live and calls[n][0] > 0}
    full_calls -= narrowed_calls

    def count(cs):
        c = collections.Counter(name for _, name in cs)
        return tuple(sorted(c.items()))

    plan.narrowed, plan.full_width = count(narrowed_calls), count(full_calls)
