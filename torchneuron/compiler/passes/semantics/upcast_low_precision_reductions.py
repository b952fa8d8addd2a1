"""bfloat16/float16 ``sum``/``mean``/``cumsum``/``linalg_vector_norm`` accumulate in
float32, as ATen's.

ATen's CPU kernels of these ops accumulate a reduced-precision input in float32
(``acc_type``) and round once (its ``prod`` multiplies in the input dtype: left alone).
torch-mlir lowers the op in the input dtype, so XLA added in bfloat16: a compiled
``x.sum(-1)`` of 7 values was 6 bfloat16 ulps off, ``cumsum`` of 4096 values 3x further
from the exact result than the CPU (errors grow with the length; no error raised); the
2-norm of 8000 bfloat16 values (``torch.linalg.vector_norm``, ``torch.norm``) was 6 off
(value ~270) and of float16 values overflowed to inf where the CPU's is finite. Each
such node computes in float32 (its ``dtype=``) and its result is cast back to the input
dtype.
"""

from __future__ import annotations

import torch

from .._fake_mode import graph_fake_mode

aten = torch.ops.aten

_LOW = (torch.bfloat16, torch.float16)
_REDUCTIONS = {
    aten.sum.default,
    aten.sum.dim_IntList,
    aten.mean.default,
    aten.mean.dim,
    aten.cumsum.default,
    aten.linalg_vector_norm.default,
}


def upcast_low_precision_reductions(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    g = gm.graph
    todo = []
    for n in g.nodes:
        if n.op != "call_function" or n.target not in _REDUCTIONS:
            continue
        x, out = n.args[0], n.meta.get("val")
        xval = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
        if xval is not None and out is not None and xval.dtype in _LOW and out.dtype == xval.dtype:
            todo.append(n)
    if not todo:
        return
    mode = graph_fake_mode(g)
    if mode is None:
        return
    with mode:
        for n in todo:
            x, low = n.args[0], n.meta["val"].dtype
            users = list(n.users)
            # dtype=float32 on the op itself: a float32 copy of the input in front was
            # folded away by torch-mlir (it reduced in bfloat16 again)
            n.kwargs = {**n.kwargs, "dtype": torch.float32}
            n.meta["val"] = n.meta["val"].to(torch.float32)
            n.meta.pop("tensor_meta", None)  # stale: torch-mlir would type the result from it
            with g.inserting_after(n):
                back = g.call_function(aten._to_copy.default, (n,), {"dtype": low})
                back.meta["val"] = n.meta["val"].to(low)
            for u in users:
                u.replace_input_with(n, back)
