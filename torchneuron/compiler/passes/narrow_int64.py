"""The 64-bit policy for int64 in compiled graphs, op by op as eager applies it.

Eager (csrc/aten/native_kernel.cpp) computes each native op's int64 value arguments
as int32 and restores int64 results: arithmetic and comparisons wrap at 32 bits.
It never narrows index arguments (``index``, ``indices``, ``offsets``, ``target``:
kIndexArgNames), data movement (kDataMovementOps in csrc/aten/native_ops.h), copies,
views, fills, factories or random draws. This pass does the same on the graph: an op
that eager narrows reads int32 conversions of its int64 tensor arguments (Python int
scalars beside them wrap to int32, as eager's narrowed_scalar), and an int32 result
where the graph had int64 is converted back, so every value keeps its dtype and
agrees with eager bit for bit. An op with no int32 form runs at full width (eager's
full_width_stats case). Exempt ops read the int64 values, so torch-mlir's index
lowerings see int64. Off with TORCHNEURON_NARROW_64BIT=0. Compiled graphs are not
counted in torch.neuron.narrowing_stats() (see docs/compile.md).
"""
from __future__ import annotations

import operator

import torch

aten = torch.ops.aten

# Base names (no overload) never narrowed: eager's kDataMovementOps with their
# functional forms, plus what eager does not compute through a narrowing kernel.
_EXEMPT = frozenset("""
cat stack index_select gather take flip roll repeat tril triu constant_pad_nd
reflection_pad1d reflection_pad2d replication_pad1d replication_pad2d where masked_fill
masked_scatter index index_put _index_put_impl index_fill index_copy scatter
upsample_nearest2d _unsafe_index _unsafe_index_put embedding
slice_scatter select_scatter diagonal_scatter as_strided_scatter
view _unsafe_view reshape expand permute transpose t slice select squeeze unsqueeze alias
as_strided split split_with_sizes unbind clone _to_copy copy lift_fresh_copy detach
unfold diagonal narrow contiguous
arange full full_like zeros zeros_like ones ones_like empty empty_like empty_strided
scalar_tensor new_zeros new_ones new_full new_empty fill zero
rand rand_like randn randn_like randint randint_like bernoulli uniform normal random
""".split())
_INDEX_ARGS = frozenset(("index", "indices", "offsets", "target"))


def _enabled() -> bool:
    from ... import _C

    return bool(_C._narrow_64bit())


def _val(a):
    return a.meta.get("val") if isinstance(a, torch.fx.Node) else a


def _is_long(a) -> bool:
    v = _val(a) if isinstance(a, torch.fx.Node) else None
    return isinstance(v, torch.Tensor) and v.dtype == torch.int64


def _wrap32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def narrow_int64(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    if not _enabled():
        return
    from torch._guards import detect_fake_mode

    mode = detect_fake_mode([n.meta.get("val") for n in gm.graph.nodes
                             if isinstance(n.meta.get("val"), torch.Tensor)])
    if mode is None:
        return
    g = gm.graph
    narrow_of: dict = {}    # int64 node -> its int32 form
    inserted: set = set()   # conversions this pass inserted (either way)

    def as_int32(a):
        if a in narrow_of:
            return narrow_of[a]
        with g.inserting_after(a):
            c = g.call_function(aten._to_copy.default, (a,), {"dtype": torch.int32})
        with mode:
            c.meta["val"] = a.meta["val"].to(torch.int32)
        narrow_of[a] = c
        inserted.add(c)
        return c

    def widen(n):
        with g.inserting_after(n):
            w = g.call_function(aten._to_copy.default, (n,), {"dtype": torch.int64})
        with mode:
            w.meta["val"] = n.meta["val"].to(torch.int64)
        n.replace_all_uses_with(w, delete_user_cb=lambda u: u is not w)
        inserted.add(w)
        narrow_of[w] = n

    rerun = set()
    for n in list(g.nodes):
        if n.op != "call_function" or n in inserted:
            continue
        if n.target is operator.getitem and n.args[0] in rerun:
            old = n.meta.get("val")
            n.meta["val"] = n.args[0].meta["val"][n.args[1]]
            n.meta.pop("tensor_meta", None)
            if (isinstance(old, torch.Tensor) and old.dtype == torch.int64
                    and n.meta["val"].dtype == torch.int32 and n.users):
                widen(n)
            continue
        if not isinstance(n.target, torch._ops.OpOverload):
            continue
        schema = n.target._schema
        if schema.name.split("::")[-1].rstrip("_") in _EXEMPT:
            continue
        names = [a.name for a in schema.arguments]
        new_args, hit = list(n.args), False
        for i, a in enumerate(n.args):
            if i < len(names) and names[i] not in _INDEX_ARGS and _is_long(a):
                new_args[i], hit = as_int32(a), True
        new_kwargs = dict(n.kwargs)
        for k, a in n.kwargs.items():
            if k not in _INDEX_ARGS and _is_long(a):
                new_kwargs[k], hit = as_int32(a), True
        if not hit:
            continue
        device = next(_val(a) for a in new_args if _is_long(a) or (
            isinstance(a, torch.fx.Node) and isinstance(_val(a), torch.Tensor))).device
        # Python int scalars beside narrowed int64 tensors wrap, as in eager; one in a
        # Tensor argument becomes a 0-dim int32 tensor (torch-mlir computes a Python
        # int operand in i64, which would undo the narrowing)
        for i, a in enumerate(new_args):
            if not isinstance(a, int) or isinstance(a, bool) or i >= len(names):
                continue
            kind = schema.arguments[i].type.kind()
            if kind == "NumberType":
                new_args[i] = _wrap32(a)
            elif kind == "TensorType":
                with g.inserting_before(n):
                    c = g.call_function(aten.full.default, ([], _wrap32(a)),
                                        {"dtype": torch.int32, "device": device})
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
            n.args, n.kwargs = old_args, old_kwargs   # no int32 form: full width
            continue
        n.meta["val"] = val
        n.meta.pop("tensor_meta", None)   # stale: torch-mlir would type the result from it
        rerun.add(n)
        if (isinstance(val, torch.Tensor) and isinstance(old_val, torch.Tensor)
                and old_val.dtype == torch.int64 and val.dtype == torch.int32):
            widen(n)
    g.eliminate_dead_code()
