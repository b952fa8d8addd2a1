"""Random ops become graph inputs drawn at run time from the neuron generator.

So compiled dropout (and any rand/randn/bernoulli) follows ``torch.neuron.manual_seed``
and advances the same per-core generator as eager kernels: the executable draws
each tensor with ``torch.rand``/``torch.randn`` on the device just before the
launch, in graph order. (TorchNeuron passes a seed and offset and generates inside
the graph; drawing outside gives the same semantics, at the cost of the random
tensor's memory: see docs/compile.md.)
"""
from __future__ import annotations

import torch

from ..plan import RandomInput

aten = torch.ops.aten
_RAND = {aten.rand.default: "rand", aten.randn.default: "randn",
         aten.rand_like.default: "rand", aten.randn_like.default: "randn"}


def random_ops_to_inputs(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    last_ph = phs[-1] if phs else None
    for n in list(gm.graph.nodes):
        if n.op != "call_function":
            continue
        if n.target in _RAND:
            val = n.meta["val"]
            spec = RandomInput(_RAND[n.target], tuple(val.shape), val.dtype)
            with _insert_after_placeholders(gm, last_ph):
                ph = gm.graph.placeholder(f"random_{len(plan.inputs)}")
            ph.meta["val"] = val
            last_ph = ph
            n.replace_all_uses_with(ph)
            gm.graph.erase_node(n)
            plan.inputs.append(("rand", spec))
        elif n.target is aten.bernoulli.p or n.target is aten.bernoulli.default:
            val = n.meta["val"]
            spec = RandomInput("rand", tuple(val.shape), val.dtype)
            with _insert_after_placeholders(gm, last_ph):
                ph = gm.graph.placeholder(f"random_{len(plan.inputs)}")
            ph.meta["val"] = val
            last_ph = ph
            with gm.graph.inserting_before(n):
                p = n.args[1] if n.target is aten.bernoulli.p else n.args[0]
                lt = gm.graph.call_function(aten.lt.Tensor if isinstance(p, torch.fx.Node)
                                            else aten.lt.Scalar, (ph, p))
                lt.meta["val"] = val.to(torch.bool) if hasattr(val, "to") else val
                cast = gm.graph.call_function(aten._to_copy.default, (lt,), {"dtype": val.dtype})
                cast.meta["val"] = val
            n.replace_all_uses_with(cast)
            gm.graph.erase_node(n)
            plan.inputs.append(("rand", spec))


def _insert_after_placeholders(gm, last_ph):
    if last_ph is None:
        first = next(iter(gm.graph.nodes))
        return gm.graph.inserting_before(first)
    return gm.graph.inserting_after(last_ph)
