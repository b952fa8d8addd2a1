"""Outputs that are graph inputs, unchanged, leave the executable; the call returns the
argument itself (the plan's ("arg", i) outputs).

A training forward graph returns the tensors its backward needs, among them its own
inputs (the weights and the token ids of GPT-2: 17 of them). As executable outputs
each was copied twice per call (by XLA into its result buffer, by executable.py into
a new device tensor); eager and Inductor save the input itself. Inputs the graph
mutates keep their output (its value is the one before the update).
"""

from __future__ import annotations

import torch


def return_inputs_as_is(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    ph_arg = {n: plan.inputs[k][1] for k, n in enumerate(phs) if plan.inputs[k][0] == "arg"}
    mutated = {i for i, _ in plan.mutations}
    out = next(n for n in gm.graph.nodes if n.op == "output")
    outs = list(out.args[0]) if isinstance(out.args[0], (tuple, list)) else [out.args[0]]
    as_is = {
        j
        for kind, j in plan.outputs
        if kind == "out" and outs[j] in ph_arg and ph_arg[outs[j]] not in mutated
    }
    if not as_is:
        return
    mut_outs = {j for _, j in plan.mutations}
    kept, remap = [], {}
    for j, o in enumerate(outs):
        if j in as_is and j not in mut_outs:
            continue
        remap[j] = len(kept)
        kept.append(o)
    structure = []
    for kind, v in plan.outputs:
        if kind != "out":
            structure.append((kind, v))
        elif v in as_is:
            structure.append(("arg", ph_arg[outs[v]]))
        else:
            structure.append(("out", remap[v]))
    plan.outputs = structure
    plan.mutations = [(i, remap[j]) for i, j in plan.mutations]
    out.args = (tuple(kept),)
