"""``eq(x, x)`` of floats written as ``logical_not(ne(x, x))`` before lowering.

torch-mlir folds ``aten.eq.Tensor`` of one value with itself to ``true``, which is wrong
for NaN: ``x == x`` (the NaN test idiom), ``isfinite`` (decomposed to
``(x == x) * (abs(x) != inf)``), ``isclose`` and ``nan_to_num``'s gradient gave True or 1
at NaN in compiled graphs, without an error. ``ne`` is not folded, so the same value is
computed from it. Integer and bool operands are left alone (equal to themselves).
"""

from __future__ import annotations

import torch

aten = torch.ops.aten


def self_equality(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    g = gm.graph
    for n in list(g.nodes):
        if n.op != "call_function" or n.target is not aten.eq.Tensor:
            continue
        a, b = n.args[0], n.args[1]
        val = a.meta.get("val") if isinstance(a, torch.fx.Node) else None
        if a is not b or val is None or not (val.dtype.is_floating_point or val.dtype.is_complex):
            continue
        with g.inserting_before(n):
            ne = g.call_function(aten.ne.Tensor, (a, a))
            ne.meta["val"] = n.meta["val"]
            out = g.call_function(aten.logical_not.default, (ne,))
            out.meta["val"] = n.meta["val"]
        n.replace_all_uses_with(out)
        g.erase_node(n)
