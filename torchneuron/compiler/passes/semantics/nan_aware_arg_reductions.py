"""``argmax``/``argmin``/``max.dim``/``min.dim`` of floats give NaN's position, as ATen.

ATen treats NaN as the extreme value: a row holding NaN has ``max.dim`` value NaN at the
first NaN's index (``argmax``/``argmin`` the same). torch-mlir lowers these ops to a
StableHLO reduce whose comparator (``GE``/``LE``) is false for NaN, so the compiled
graph skipped NaN and returned the largest number's index, without an error. Each such
node is followed by: ``nan = isnan(x)`` as int32, ``first = argmax(nan)`` (first NaN),
``has = amax(nan) > 0``; the index becomes ``where(has, first, index)`` and a value
``where(has, NaN, value)``. Rows without NaN are unchanged.
"""

from __future__ import annotations

import operator

import torch

from .._fake_mode import fake_node as _node
from .._fake_mode import graph_fake_mode

aten = torch.ops.aten

_INDEX_ONLY = {aten.argmax.default, aten.argmin.default}
_VALUE_INDEX = {aten.max.dim, aten.min.dim}


def _nan_info(g, x, dim, keepdim):
    nan = _node(
        g, aten._to_copy.default, (_node(g, aten.isnan.default, (x,)),), {"dtype": torch.int32}
    )
    first = _node(g, aten.argmax.default, (nan, dim, keepdim))
    dims = [] if dim is None else [dim]
    has = _node(g, aten.gt.Scalar, (_node(g, aten.amax.default, (nan, dims, keepdim)), 0))
    return first, has


def nan_aware_arg_reductions(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    g = gm.graph
    if not any(n.op == "call_function" and n.target in _INDEX_ONLY | _VALUE_INDEX for n in g.nodes):
        return
    mode = graph_fake_mode(g)
    if mode is None:
        return
    with mode:
        _rewrite(g)


def _rewrite(g: torch.fx.Graph) -> None:
    for n in list(g.nodes):
        if n.op != "call_function" or n.target not in _INDEX_ONLY | _VALUE_INDEX:
            continue
        x = n.args[0]
        xval = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
        if xval is None or not xval.dtype.is_floating_point:
            continue
        dim = n.args[1] if len(n.args) > 1 else n.kwargs.get("dim")
        keepdim = n.args[2] if len(n.args) > 2 else n.kwargs.get("keepdim", False)
        if n.target in _INDEX_ONLY:
            users = list(n.users)
            with g.inserting_before(n.next):
                first, has = _nan_info(g, x, dim, keepdim)
                fixed = _node(g, aten.where.self, (has, first, n))
            for u in users:
                u.replace_input_with(n, fixed)
            continue
        getters = {
            u.args[1]: u
            for u in n.users
            if u.op == "call_function" and u.target is operator.getitem
        }
        if len(getters) != len(n.users):
            continue  # a use we do not know: leave the node as torch-mlir lowers it
        # the getters moved right after n, so that the fixes come before every use of
        # them (narrow_64bit put a float64 max's widening between the getters: the
        # widening of value then read a fix defined after it, and the graph failed)
        last = n
        for k in sorted(getters):
            last.append(getters[k])
            last = getters[k]
        with g.inserting_before(last.next):
            first, has = _nan_info(g, x, dim, keepdim)
            fixes = {}
            if 0 in getters:
                nan = _node(
                    g,
                    aten.full.default,
                    ([], float("nan")),
                    {"dtype": xval.dtype, "device": xval.device},
                )
                fixes[0] = _node(g, aten.where.self, (has, nan, getters[0]))
            if 1 in getters:
                fixes[1] = _node(g, aten.where.self, (has, first, getters[1]))
        for k, fixed in fixes.items():
            for u in list(getters[k].users):
                if u is not fixed:
                    u.replace_input_with(getters[k], fixed)
