"""The fake mode an FX graph's ``meta["val"]`` values belong to, for passes that build
new nodes by running ops on those values."""

from __future__ import annotations

import torch


def graph_fake_mode(g: torch.fx.Graph):
    """The graph's FakeTensorMode, or None when no node carries a fake value (the
    passes then leave the graph as it is). The values' own mode, not the ambient one
    (detect_fake_mode prefers Dynamo's TracingContext): a graph unpickled from
    AOTAutogradCache (aot_cache.py) has its values in another mode than Dynamo's, and
    ops mixing the two failed ("Mixing fake modes NYI")."""
    from torch._guards import detect_fake_mode
    from torch._subclasses.fake_tensor import FakeTensor

    vals = [n.meta["val"] for n in g.nodes if isinstance(n.meta.get("val"), torch.Tensor)]
    fake = next((v for v in vals if isinstance(v, FakeTensor)), None)
    return fake.fake_mode if fake is not None else detect_fake_mode(vals)


def fake_node(g: torch.fx.Graph, target, args, kwargs=None) -> torch.fx.Node:
    """A new ``call_function`` node of ``target`` at ``g``'s insertion point, its
    ``meta["val"]`` computed by running ``target`` on its inputs' values (call it
    inside ``graph_fake_mode(g)``). Raises what ``target`` raises on those values."""
    n = g.call_function(target, args, kwargs or {})
    a, kw = torch.fx.node.map_arg((args, kwargs or {}), lambda m: m.meta["val"])
    n.meta["val"] = target(*a, **kw)
    return n
