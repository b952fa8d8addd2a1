"""Slice bounds of ``slice`` and ``slice_scatter`` clamped to the sliced dimension.

Python's ``x[..., k:]`` reaches the graph as ``end = 2**63 - 1`` (in backward graphs as
``slice_scatter(..., start, 9223372036854775807)``). torch-mlir's StableHLO pipeline
sizes a buffer from that bound when such a ``slice_scatter`` feeds an add (HF Llama's
rotary-embedding backward) and fails with ``std::bad_alloc``. Shapes are static here,
so the bounds become the exact ones ATen uses (negative bounds wrap once, then clamp to
``[0, size]``, and ``end >= start``); values are unchanged.
"""

from __future__ import annotations

import torch

aten = torch.ops.aten

# op -> (position of the input whose dim is sliced, position of dim, of start, of end)
_SLICES = {aten.slice.Tensor: (0, 1, 2, 3), aten.slice_scatter.default: (0, 2, 3, 4)}


def _clamp(v, size: int) -> int:
    if v < 0:
        v += size
    return min(max(v, 0), size)


def clamp_slice_bounds(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    for n in gm.graph.nodes:
        spec = _SLICES.get(n.target) if n.op == "call_function" else None
        if spec is None:
            continue
        i_in, i_dim, i_start, i_end = spec
        args = list(n.args)
        val = args[i_in].meta.get("val") if isinstance(args[i_in], torch.fx.Node) else None
        if val is None:
            continue
        names = ("dim", "start", "end")
        given = {
            k: (args[i] if len(args) > i else n.kwargs.get(k))
            for k, i in zip(names, (i_dim, i_start, i_end))
        }
        dim = 0 if given["dim"] is None else given["dim"] % max(val.dim(), 1)
        size = val.shape[dim]
        if not isinstance(size, int):
            continue
        start = 0 if given["start"] is None else given["start"]
        end = size if given["end"] is None else given["end"]
        if not (isinstance(start, int) and isinstance(end, int)):
            continue
        kw = {k: v for k, v in n.kwargs.items() if k not in names}
        while len(args) < i_end + 1:
            args.append(None)
        start, end = _clamp(start, size), _clamp(end, size)
        args[i_dim], args[i_start], args[i_end] = dim, start, max(end, start)  # as ATen
        n.args, n.kwargs = tuple(args), kw
