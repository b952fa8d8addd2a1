"""Comparisons of two tensors of different dtypes compare in ATen's result type.

ATen converts both operands of ``lt``/``le``/``gt``/``ge``/``eq``/``ne`` to
``torch.result_type(a, b)``, where a 0-dim tensor does not widen a dimensioned one of
the same category: uint8 ``x < torch.tensor(-5, dtype=torch.int32)`` compares with
-5 as uint8 (251). The lowered compare promoted both to a wider type instead (all
False there; 300 compared as 300, not 44), silently. Both operands are converted to
the result type explicitly.

A compare of a tensor with a Python scalar (``.Scalar``) whose result type is not the
tensor's converts the tensor: bool ``x < 2`` compares as int64 (all True); lowered, the
2 was converted to bool and it compared ``x < True``.
"""

from __future__ import annotations

import torch

from .._fake_mode import graph_fake_mode

aten = torch.ops.aten

_OPS = (
    aten.lt.Tensor,
    aten.le.Tensor,
    aten.gt.Tensor,
    aten.ge.Tensor,
    aten.eq.Tensor,
    aten.ne.Tensor,
)


def _val(a):
    return a.meta.get("val") if isinstance(a, torch.fx.Node) else None


_SCALAR_OPS = (
    aten.lt.Scalar,
    aten.le.Scalar,
    aten.gt.Scalar,
    aten.ge.Scalar,
    aten.eq.Scalar,
    aten.ne.Scalar,
)


def _mixed(n) -> bool:
    if n.op != "call_function" or len(n.args) < 2 or not isinstance(_val(n.args[0]), torch.Tensor):
        return False
    a, b = _val(n.args[0]), _val(n.args[1])
    if n.target in _OPS:
        return isinstance(b, torch.Tensor) and a.dtype != b.dtype
    return (
        n.target in _SCALAR_OPS
        and isinstance(n.args[1], (bool, int, float))
        and torch.result_type(a, n.args[1]) != a.dtype
    )


def compare_in_result_type(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    g = gm.graph
    todo = [n for n in g.nodes if _mixed(n)]
    if not todo:
        return
    mode = graph_fake_mode(g)
    if mode is None:
        return
    with mode:
        for n in todo:
            b = _val(n.args[1]) if n.target in _OPS else n.args[1]
            dt = torch.result_type(_val(n.args[0]), b)
            args = list(n.args)
            for i in (0, 1) if n.target in _OPS else (0,):
                v = _val(args[i])
                if v.dtype != dt:
                    with g.inserting_before(n):
                        c = g.call_function(aten._to_copy.default, (args[i],), {"dtype": dt})
                    c.meta["val"] = v.to(dt)
                    args[i] = c
            n.args = tuple(args)
