"""uint8 constants built as int8 constants reinterpreted as uint8 (``view.dtype``).

torch-mlir's StableHLO conversion cannot legalize a ``torch.vtensor.literal`` of
``ui8``, so every graph holding a uint8 constant failed to compile: ``zeros_like``,
``ones_like``, ``full_like``, ``fill_``, ``zero_``, ``new_full`` of a uint8 tensor, and a
conversion to uint8 of a value computed from constants only (torch-mlir folds it into a
``ui8`` literal). An ``si8`` literal lowers, and ``view.dtype`` (a bitcast) is not
folded, so the same bits reach XLA:
- ``full``-like nodes of uint8 (value ``v``) become ``full(shape, int8(v))`` viewed as
  uint8; the int8 value is the CPU's uint8 conversion of ``v`` reinterpreted (255 -> -1);
- a conversion to uint8 of a constant-only value becomes a conversion to int8 (integer
  conversions keep the low 8 bits, as to uint8; a float goes through int32 first, so
  200.0 keeps its bits) viewed as uint8.
Runs last: the passes before it add uint8 constants (``empty_results``) and conversions
(``compare_in_result_type``).
"""

from __future__ import annotations

import torch

from .._fake_mode import fake_node, graph_fake_mode

aten = torch.ops.aten
prims = torch.ops.prims
U8 = torch.uint8

# target -> the fill value from (args, kwargs); None: not a constant fill
_FILLS = {
    aten.full.default: lambda a, k: a[1],
    aten.full_like.default: lambda a, k: a[1],
    aten.new_full.default: lambda a, k: a[2],
    aten.fill.Scalar: lambda a, k: a[1],
    aten.scalar_tensor.default: lambda a, k: a[0],
    aten.zeros.default: lambda a, k: 0,
    aten.zeros_like.default: lambda a, k: 0,
    aten.new_zeros.default: lambda a, k: 0,
    aten.ones.default: lambda a, k: 1,
    aten.ones_like.default: lambda a, k: 1,
    aten.new_ones.default: lambda a, k: 1,
}
_CONVERSIONS = (aten._to_copy.default, prims.convert_element_type.default)


def _constant_only(n, memo) -> bool:
    """True when ``n``'s value is known at compile time: it depends on no graph input
    but through the shape of a fill (``full_like(x, 7)``)."""
    if n in memo:
        return memo[n]
    if n.op == "placeholder":
        memo[n] = False
    elif n.op == "call_function" and n.target in _FILLS:
        memo[n] = not isinstance(_FILLS[n.target](n.args, n.kwargs), torch.fx.Node)
    else:
        memo[n] = True  # before recursing: FX graphs are acyclic
        memo[n] = all(_constant_only(m, memo) for m in n.all_input_nodes)
    return memo[n]


def _as_int8(v) -> int:
    """The int8 whose bits are the CPU's uint8 value of the fill ``v``."""
    return torch.tensor(v).to(U8).view(torch.int8).item()


def uint8_constants(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    g = gm.graph
    todo = [
        n
        for n in g.nodes
        if n.op == "call_function"
        and isinstance(n.meta.get("val"), torch.Tensor)
        and n.meta["val"].dtype == U8
        and (n.target in _FILLS or n.target in _CONVERSIONS)
    ]
    if not todo:
        return
    mode = graph_fake_mode(g)
    if mode is None:
        return
    memo: dict = {}
    with mode:
        for n in todo:
            v = n.meta["val"]
            with g.inserting_before(n):
                if n.target in _FILLS:
                    fill = _FILLS[n.target](n.args, n.kwargs)
                    if isinstance(fill, torch.fx.Node):
                        continue  # not a compile-time value
                    s8 = fake_node(
                        g,
                        aten.full.default,
                        (list(v.shape), _as_int8(fill)),
                        {"dtype": torch.int8, "device": v.device},
                    )
                    s8.kwargs = {"dtype": torch.int8}  # device arguments are dropped before
                else:
                    src = n.args[0]
                    if not isinstance(src, torch.fx.Node) or not _constant_only(src, memo):
                        continue
                    if src.meta["val"].dtype.is_floating_point:
                        src = fake_node(g, aten._to_copy.default, (src,), {"dtype": torch.int32})
                    s8 = fake_node(g, aten._to_copy.default, (src,), {"dtype": torch.int8})
                u8 = fake_node(g, aten.view.dtype, (s8, U8))
            n.replace_all_uses_with(u8)
            g.erase_node(n)
