"""None (and other non-tensor) outputs leave the graph; the executable puts them back.

Backward graphs return None for inputs that need no gradient; StableHLO functions
return tensors only.
"""

from __future__ import annotations

import torch


def remove_none_outputs(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    out = next(n for n in gm.graph.nodes if n.op == "output")
    outs = list(out.args[0]) if isinstance(out.args[0], (tuple, list)) else [out.args[0]]
    n_user = len(outs) - len(plan.mutations)  # mutation outputs come last
    kept, structure, remap = [], [], {}
    for j, o in enumerate(outs):
        if isinstance(o, torch.fx.Node):
            remap[j] = len(kept)
            if j < n_user:
                structure.append(("out", len(kept)))
            kept.append(o)
        elif j < n_user:
            structure.append(("const", o))
    plan.outputs = structure
    plan.mutations = [(i, remap[j]) for i, j in plan.mutations]
    out.args = (tuple(kept),)
