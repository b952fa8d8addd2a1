"""Device arguments (``device=neuron:0`` of factory ops, ``_to_copy``,
``prims.device_put``) leave the graph.

A compiled graph runs wholly on one NeuronCore, so a device argument says nothing;
torch-mlir lowers a non-CPU device argument to ``aten.to.device``, which has no
StableHLO lowering. Factory ops then create on the graph's device.
"""

from __future__ import annotations

import torch


def drop_device_arguments(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    for n in list(gm.graph.nodes):
        if n.op == "call_function" and n.target is torch.ops.prims.device_put.default:
            n.replace_all_uses_with(n.args[0])  # same device: the value itself
            gm.graph.erase_node(n)
            continue
        if n.op == "call_function" and "device" in n.kwargs:
            kw = dict(n.kwargs)
            del kw["device"]
            n.kwargs = kw
