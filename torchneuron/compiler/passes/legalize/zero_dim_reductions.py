"""Reductions and scans of a 0-dim tensor along ``dim=0`` run on it as a 1-element tensor.

ATen accepts ``dim=0``/``-1`` (with or without ``keepdim``) on a 0-dim tensor and returns
a 0-dim result. torch-mlir's lowering did not: with ``keepdim=True``, ``sum``, ``mean``,
``amax``, ``amin``, ``argmax``, ``argmin``, ``logsumexp``, ``nansum``, ``nanmean`` and the
``masked.*`` reductions killed the process (SIGSEGV inside the StableHLO conversion);
``any``/``all``/``cumsum`` of a 0-dim tensor failed to lower ("Out-of-bounds dimension 0").
A full reduction (``dim=None``/``[]``) with ``keepdim=True`` crashed too (``amax``'s
backward sums that way).
Each such node gets its input viewed as ``(1,)``, its ``dim`` arguments set to 0 and
``keepdim`` to False; each tensor result is viewed back as 0-dim (ATen's shape).
"""

from __future__ import annotations

import operator

import torch

from .._fake_mode import fake_node, graph_fake_mode

aten = torch.ops.aten


def _dim_args(target) -> list[tuple[int, str]]:
    """(position, name) of the schema's ``dim`` argument (int, int[], optional or not)."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return []
    return [
        (i, a.name)
        for i, a in enumerate(schema.arguments)
        if a.name == "dim" and "int" in str(a.type).lower()
    ]


def _candidate(n: torch.fx.Node):
    if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload):
        return None
    if not n.args or not isinstance(n.args[0], torch.fx.Node):
        return None
    x = n.args[0].meta.get("val")
    if not isinstance(x, torch.Tensor) or x.dim() != 0:
        return None
    dims = _dim_args(n.target)
    if not dims:
        return None
    pos, name = dims[0]
    given = n.kwargs.get(name, n.args[pos] if pos < len(n.args) else None)
    if (given is None or given == []) and not _keepdim(n):
        return None  # a full reduction without keepdim: lowered right
    return pos, name


def _keepdim(n: torch.fx.Node) -> bool:
    names = [a.name for a in n.target._schema.arguments]
    if "keepdim" in n.kwargs:
        return bool(n.kwargs["keepdim"])
    i = names.index("keepdim") if "keepdim" in names else len(n.args)
    return bool(n.args[i]) if i < len(n.args) else False


def zero_dim_reductions(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    g = gm.graph
    todo = [(n, c) for n in g.nodes if (c := _candidate(n)) is not None]
    if not todo:
        return
    mode = graph_fake_mode(g)
    if mode is None:
        return
    with mode:
        for n, (pos, name) in todo:
            with g.inserting_before(n):
                one = fake_node(g, aten.view.default, (n.args[0], [1]))
            args, kwargs = list(n.args), dict(n.kwargs)
            args[0] = one
            # int[] (also int[]? of a full reduction with keepdim: sum.dim_IntList in a
            # backward graph crashed) or int
            listed = "List" in str(n.target._schema.arguments[pos].type)
            zero = [0] if listed else 0
            if name in kwargs:
                kwargs[name] = zero
            elif pos < len(args):
                args[pos] = zero
            else:
                kwargs[name] = zero
            schema_names = [a.name for a in n.target._schema.arguments]
            if "keepdim" in kwargs:
                kwargs["keepdim"] = False
            elif "keepdim" in schema_names and schema_names.index("keepdim") < len(args):
                args[schema_names.index("keepdim")] = False
            n.args, n.kwargs = tuple(args), kwargs
            old = n.meta["val"]
            a, kw = torch.fx.node.map_arg((n.args, n.kwargs), lambda m: m.meta["val"])
            n.meta["val"] = n.target(*a, **kw)
            n.meta.pop("tensor_meta", None)
            users = list(n.users)
            if isinstance(old, torch.Tensor):
                with g.inserting_after(n):
                    back = fake_node(g, aten.view.default, (n, list(old.shape)))
                for u in users:
                    u.replace_input_with(n, back)
                continue
            # a tuple (max.dim, cummax, sort, ...): its getters' results viewed back
            for u in users:
                if u.op != "call_function" or u.target is not operator.getitem:
                    continue
                u.meta["val"] = n.meta["val"][u.args[1]]
                want = list(old[u.args[1]].shape)
                later = list(u.users)
                with g.inserting_after(u):
                    back = fake_node(g, aten.view.default, (u, want))
                for w in later:
                    w.replace_input_with(u, back)
