"""``aten.fmod.Tensor`` nodes are lowered as the op torch-mlir maps to ``stablehlo.remainder``.

torch-mlir lowers ``aten.fmod`` as ``a - b * trunc(a / b)``: when ``a / b`` rounds
across an integer the result is off by ``b`` (compiled ``fmod(5.0, 0.1)`` gave -7e-8,
CPU 0.09999999), and an exact zero loses the dividend's sign (``fmod(-8., 4.)`` gave
+0.0). It lowers ``aten.remainder.Tensor`` to ``stablehlo.remainder``, which *is* C's
``fmod`` (exact; the result has the dividend's sign; XLA's implementation). So after
AOTAutograd (which has already decomposed Python-style remainder into fmod plus the
sign fix-up, decompositions.py) each fmod node takes that target: in this graph,
and only here, ``aten.remainder.Tensor`` means StableHLO's truncated remainder.
"""

from __future__ import annotations

import torch

aten = torch.ops.aten


def exact_fmod(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target is aten.fmod.Tensor:
            n.target = aten.remainder.Tensor
