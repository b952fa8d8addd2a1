"""``&``/``|`` of an integer truncated from a wider one computed before the truncation.

XLA:CPU (jaxlib 0.10.2, its fusion emitters) crashed the process (SIGSEGV while
compiling) on ``and``/``or`` with an operand converted from a wider integer type
(int64 -> int32, int32 -> int8/int16): every int64 ``x & y`` / ``x | y`` narrowed by
narrow_64bit, and ``x.int() & y.int()``. Truncation commutes with bitwise ops, so
``trunc(x) & y`` becomes ``trunc(x & widen(y))`` (the low bits are the same), a form
XLA compiles.
"""

from __future__ import annotations

import torch

from .._fake_mode import fake_node as _node

aten = torch.ops.aten

_OPS = (aten.bitwise_and.Tensor, aten.bitwise_or.Tensor)
_CONVERTS = (aten._to_copy.default, torch.ops.prims.convert_element_type.default)


def _val(a):
    return a.meta.get("val") if isinstance(a, torch.fx.Node) else None


def _truncated_from(a, dtype):
    """The wider integer node ``a`` truncates to ``dtype``, or None."""
    if not (isinstance(a, torch.fx.Node) and a.op == "call_function" and a.target in _CONVERTS):
        return None
    src = a.args[0]
    v = _val(src)
    if (
        isinstance(v, torch.Tensor)
        and not v.dtype.is_floating_point
        and v.dtype != torch.bool
        and v.dtype.itemsize > dtype.itemsize
    ):
        return src
    return None


def bitwise_before_truncation(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    # a chain of truncations (int64 -> int32 -> int16) moves the op one level per round
    for _ in range(8):
        if not _one_round(gm):
            break


def _one_round(gm: torch.fx.GraphModule) -> bool:
    from .._fake_mode import graph_fake_mode

    g = gm.graph
    todo = []
    for n in g.nodes:
        v = _val(n)
        if (
            n.op == "call_function"
            and n.target in _OPS
            and isinstance(v, torch.Tensor)
            and v.dtype != torch.bool
            and not v.dtype.is_floating_point
        ):
            # only a truncation to the result's own dtype is undone: one to a narrower
            # type then promoted (int64 -> int8 under an int16 result) is a value
            srcs = [
                _truncated_from(a, v.dtype)
                if isinstance(_val(a), torch.Tensor) and _val(a).dtype == v.dtype
                else None
                for a in n.args[:2]
            ]
            if any(s is not None for s in srcs):
                todo.append((n, srcs))
    if not todo:
        return False
    mode = graph_fake_mode(g)
    if mode is None:
        return False
    with mode:
        for n, srcs in todo:
            dt = _val(n).dtype
            wide = max((_val(s).dtype for s in srcs if s is not None), key=lambda d: d.itemsize)
            with g.inserting_before(n):
                args = []
                for a, s in zip(n.args[:2], srcs):
                    if s is not None and _val(s).dtype == wide:
                        args.append(s)
                    elif isinstance(a, torch.fx.Node):
                        if _val(a).dtype != dt:  # promoted first (bool, uint8, int8 -> dt)
                            a = _node(g, aten._to_copy.default, (a,), {"dtype": dt})
                        args.append(_node(g, aten._to_copy.default, (a,), {"dtype": wide}))
                    else:
                        args.append(a)
                m = _node(g, n.target, tuple(args), {})
                r = _node(g, aten._to_copy.default, (m,), {"dtype": dt})
            n.replace_all_uses_with(r)
            g.erase_node(n)
    g.eliminate_dead_code()
    return True
