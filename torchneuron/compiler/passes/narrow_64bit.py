"""The 64-bit policy in compiled graphs, as in eager: float64 values are computed as
float32 and the graph's outputs get their original dtype back (int64: narrow_int64.py).

A NeuronCore has no 64-bit arithmetic; eager kernels narrow (csrc/aten/native_kernel.cpp)
and so must compiled graphs, or compiled and eager results differ. Each 64-bit value
(input or op result) gets a conversion to 32 bits that its users read; explicit
``dtype=`` arguments of 64 bits become 32; 64-bit outputs convert back at the end.
An op that rejects the narrowed value (e.g. gather wants int64 indices) reads the
64-bit one (XLA:CPU has 64-bit integers), as eager exempts index arguments.
Off with TORCHNEURON_NARROW_64BIT=0 (torch.neuron's switch, read at compile time).
"""
from __future__ import annotations

import torch

aten = torch.ops.aten
# float64 only: int64 is narrowed op by op by narrow_int64.py, which keeps index
# arguments and data movement at int64 (torch-mlir's index lowerings need it).
_NARROW = {torch.float64: torch.float32}


def _enabled() -> bool:
    from ... import _C

    return bool(_C._narrow_64bit())


def _val(a):
    return a.meta.get("val") if isinstance(a, torch.fx.Node) else a


def _is64(v) -> bool:
    return isinstance(v, torch.Tensor) and v.dtype in _NARROW


def narrow_64bit(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    if not _enabled():
        return
    from torch._guards import detect_fake_mode

    vals = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    mode = detect_fake_mode(vals)
    if mode is None:
        return
    g = gm.graph
    out = next(n for n in g.nodes if n.op == "output")
    orig_out = [(_val(o).dtype if _is64(_val(o)) else None) for o in out.args[0]]
    wide: dict = {}   # narrowed node -> its 64-bit original

    def narrow_after(n):
        with g.inserting_after(n):
            c = g.call_function(aten._to_copy.default, (n,), {"dtype": _NARROW[n.meta["val"].dtype]})
        with mode:
            c.meta["val"] = n.meta["val"].to(_NARROW[n.meta["val"].dtype])
        n.replace_all_uses_with(c, delete_user_cb=lambda u: u is not c)
        wide[c] = n

    for n in list(g.nodes):
        if n.op == "placeholder":
            if _is64(n.meta.get("val")):
                narrow_after(n)
            continue
        if n.op != "call_function" or n in wide:
            continue
        kw = dict(n.kwargs)
        if kw.get("dtype") in _NARROW:
            kw["dtype"] = _NARROW[kw["dtype"]]
        n.kwargs = kw
        for attempt in (0, 1):
            args, kwargs = torch.fx.node.map_arg((n.args, n.kwargs), _val)
            try:
                with mode:
                    val = n.target(*args, **kwargs)
                break
            except Exception:
                if attempt == 1:
                    raise
                # the op rejects a narrowed argument: give it the 64-bit value
                n.args, n.kwargs = torch.fx.node.map_arg(
                    (n.args, n.kwargs), lambda a: wide.get(a, a))
        n.meta["val"] = val
        if _is64(val) and n.users:
            narrow_after(n)
    outs = list(out.args[0])
    for k, (o, dt) in enumerate(zip(outs, orig_out)):
        if dt is not None and isinstance(o, torch.fx.Node) and _val(o).dtype != dt:
            with g.inserting_before(out):
                c = g.call_function(aten._to_copy.default, (o,), {"dtype": dt})
            with mode:
                c.meta["val"] = _val(o).to(dt)
            outs[k] = c
    out.args = (tuple(outs),)
    g.eliminate_dead_code()
