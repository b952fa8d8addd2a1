"""Scalar (int/float/bool) graph inputs become constants.

Shapes are static: a scalar input (e.g. a size Dynamo passed as an argument) is
baked into the graph, and the compiled graph is cached per value (the backend
keys its specializations on them). StableHLO functions take tensors only.
"""

from __future__ import annotations

import torch


def specialize_scalar_inputs(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    keep = []
    for i, (n, v) in enumerate(zip(phs, example_inputs)):
        if isinstance(v, torch.Tensor):
            keep.append(("arg", i))
            continue
        value = v
        if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            value = v.node.hint if v.node.hint is not None else v.node.pytype(v)
        for user in list(n.users):
            sub = lambda a: value if a is n else a  # noqa: E731
            user.args = torch.fx.node.map_aggregate(user.args, sub)
            user.kwargs = torch.fx.node.map_aggregate(user.kwargs, sub)
        gm.graph.erase_node(n)
        plan.scalar_args[i] = value
    plan.inputs = keep
