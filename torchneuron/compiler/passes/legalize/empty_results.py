"""A node whose result is an empty tensor becomes a constant of that shape.

An empty result holds no values, so nothing that produced it matters. Lowered as they
come, some ops on empty tensors aborted the whole process inside torch-mlir's pipeline
(SIGABRT: ``sort``/``gather`` of a ``(0, 5)`` tensor) and others failed to compile
(``stack``, ``scatter``, ``scatter_add``, indexing with a tensor). Each such node (and the
multi-result node behind its ``getitem``s, once unused) gives way to
``full(shape, 0, dtype)``; a uint8 one is made lowerable by ``uint8_constants.py``
later (``sort``/``gather`` of an empty uint8 tensor aborted the process while uint8
results were left here). Results of the wider unsigned types are left as they are, and
so is everything they are computed from (torch-mlir folds a conversion of a constant
into a constant of the result's type). Ops with side effects (``copy_`` into an input)
are kept.
"""

from __future__ import annotations

import operator

import torch

from .._fake_mode import fake_node, graph_fake_mode

aten = torch.ops.aten
_UNSIGNED = (torch.uint16, torch.uint32, torch.uint64)  # uint8: uint8_constants.py


def _empty(n) -> bool:
    v = n.meta.get("val")
    return (
        n.op == "call_function"
        and isinstance(v, torch.Tensor)
        and v.numel() == 0
        and v.dtype not in _UNSIGNED
        and not v.dtype.is_complex
        and not n.is_impure()
    )


def _feeding_unsigned(g) -> set:
    """The nodes a uint16/32/64 result is computed from (itself included)."""
    seen, stack = (
        set(),
        [
            n
            for n in g.nodes
            if isinstance(n.meta.get("val"), torch.Tensor) and n.meta["val"].dtype in _UNSIGNED
        ],
    )
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(n.all_input_nodes)
    return seen


def empty_results(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    g = gm.graph
    todo = [n for n in g.nodes if _empty(n) and n.target is not aten.full.default]
    if todo:
        keep = _feeding_unsigned(g)
        todo = [n for n in todo if n not in keep]
    if not todo:
        return
    mode = graph_fake_mode(g)
    if mode is None:
        return
    with mode:
        for n in todo:
            v = n.meta["val"]
            with g.inserting_before(n):
                c = fake_node(
                    g, aten.full.default, (list(v.shape), 0), {"dtype": v.dtype, "device": v.device}
                )
            n.replace_all_uses_with(c)
            src = n.args[0] if n.target is operator.getitem else None
            g.erase_node(n)
            # a multi-result node (sort) whose results were all empty
            if isinstance(src, torch.fx.Node) and not src.users and not src.is_impure():
                g.erase_node(src)
