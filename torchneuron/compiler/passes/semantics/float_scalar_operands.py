"""Python int operands of float arithmetic and comparisons become floats.

torch-mlir's folder of ``add``/``sub``/``mul`` and ``lt``/``le``/``gt``/``ge`` on a
float constant tensor (``torch.full((), 3.0)``, ``torch.arange(4).float()``, a
decomposition's ``scalar_tensor``) and a Python int gave a wrong constant in about
half the graphs, differing from run to run (``full((), 3.0) + -1``, ``full((), -3.0) <
0`` came out as other values, silently); with a float operand it folds right. ATen
converts the int to the tensor's float dtype either way, so ``x + 2`` and ``x + 2.0``
are one computation (ints past 2**53, which float() would round, are left).
"""

from __future__ import annotations

import torch

aten = torch.ops.aten

_OPS = frozenset("add sub rsub mul div lt le gt ge eq ne".split())


def _float_tensor(a) -> bool:
    v = a.meta.get("val") if isinstance(a, torch.fx.Node) else None
    return isinstance(v, torch.Tensor) and v.dtype.is_floating_point


def _as_float(a):
    if isinstance(a, int) and not isinstance(a, bool) and abs(a) <= 2**53:
        return float(a)
    return a


def float_scalar_operands(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    for n in gm.graph.nodes:
        if (
            n.op != "call_function"
            or not isinstance(n.target, torch._ops.OpOverload)
            or n.target._schema.name.split("::")[-1] not in _OPS
            or not any(_float_tensor(a) for a in n.args)
        ):
            continue
        n.args = tuple(_as_float(a) for a in n.args)
        n.kwargs = {k: _as_float(v) for k, v in n.kwargs.items()}
