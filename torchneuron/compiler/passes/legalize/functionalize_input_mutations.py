"""In-place updates of graph inputs (``aten.copy_`` into a placeholder) become outputs.

AOTAutograd with keep_inference_input_mutations=True leaves, at the end of an
inference graph, ``copy_(input, new_value)`` for each input the program mutated
(e.g. a KV cache or BatchNorm running stats). StableHLO values are immutable: the
pass returns ``new_value`` as an extra output, and the executable writes it back
into the caller's tensor after the run (the plan's ``mutations``).
"""

from __future__ import annotations

import torch

aten = torch.ops.aten


def functionalize_input_mutations(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    ph_arg = {n: plan.inputs[k][1] for k, n in enumerate(phs)}
    out = next(n for n in gm.graph.nodes if n.op == "output")
    outs = list(out.args[0]) if isinstance(out.args[0], (tuple, list)) else [out.args[0]]
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target not in (aten.copy_.default, aten.copy.default):
            continue
        if n.target is aten.copy.default:
            continue  # functional copy: lowered as is
        dst, src = n.args[0], n.args[1]
        if dst not in ph_arg:
            raise RuntimeError(f"in-place copy_ into a non-input value {dst} is not functional")
        # copy_ broadcasts and casts: make the written value match the input exactly.
        val = dst.meta.get("val")
        with gm.graph.inserting_before(n):
            new = src
            if val is not None and tuple(src.meta["val"].shape) != tuple(val.shape):
                new = gm.graph.call_function(aten.expand.default, (new, list(val.shape)))
                new.meta["val"] = val
            if val is not None and src.meta["val"].dtype != val.dtype:
                new = gm.graph.call_function(aten._to_copy.default, (new,), {"dtype": val.dtype})
                new.meta["val"] = val
            if new is src:
                new = gm.graph.call_function(aten.clone.default, (src,))
                new.meta["val"] = src.meta["val"]
        n.replace_all_uses_with(new)
        # a program that returns the input it mutated returns the copy_ itself
        outs = [new if o is n else o for o in outs]
        gm.graph.erase_node(n)
        plan.mutations.append((ph_arg[dst], len(outs)))
        outs.append(new)
    out.args = (tuple(outs),)
