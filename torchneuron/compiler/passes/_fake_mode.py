"""The fake mode an FX graph's ``meta["val"]`` values belong to, for passes that build
new nodes by running ops on those values."""
from __future__ import annotations

import torch


def graph_fake_mode(g: torch.fx.Graph):
    """The graph's FakeTensorMode, or None when no node carries a fake value (the
    passes then leave the graph as it is)."""
    from torch._guards import detect_fake_mode

    return detect_fake_mode([n.meta["val"] for n in g.nodes
                             if isinstance(n.meta.get("val"), torch.Tensor)])
