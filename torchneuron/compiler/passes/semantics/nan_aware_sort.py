"""``sort``/``topk`` (and ``argsort``/``msort``, which AOTAutograd turns into them) order
NaN and ties as ATen does.

ATen's comparator puts NaN above every number (last ascending, first descending) and
treats ``-0.0 == 0.0``; ``stable=True`` keeps equal keys in their input order.
torch-mlir lowers ``sort`` to a StableHLO sort whose comparator is a plain ``LT``/``GT``,
false for NaN, so a compiled ``sort`` of ``[1, nan, -3, 0, 9]`` came back unsorted
(``[-3, 1, nan, 0, 9]``), without an error; ``sort.stable`` did not lower at all.

Each such node of a float32/16-bit float (or <= 32-bit integer) input is rebuilt on an int64 key that
is unique and totally ordered: the value's float32 bits as an ordered int32 (``-0.0``
made ``+0.0``, every NaN the positive quiet NaN, negative floats' magnitude bits
flipped), bit-inverted for a descending order, times 2**32 plus the position along the
dimension. Its ascending sort is ATen's stable order; the values are gathered at the
sorted positions. ``topk`` takes the first ``k`` of that sort (ATen leaves the order of
ties in ``topk`` unspecified).

float64 and int64 inputs (eager sorts them on the CPU fallback at full width) have no
room for the position in a 64-bit key: their ordered 64-bit key (float64 bits made
ordered as above; an int64 as itself) is sorted once, each element's dense rank among
the sorted keys (a cumulative count of key changes) is scattered back to its position,
and ``rank * n + position`` is sorted again (unique, so the order is ATen's stable one).
Unrewritten, a float64 sort with NaN came back unsorted.
"""

from __future__ import annotations

import operator

import torch

from .._fake_mode import fake_node as _node
from .._fake_mode import graph_fake_mode

aten = torch.ops.aten

_SORTS = {aten.sort.default, aten.sort.stable, aten.topk.default}
_INTS = (torch.int8, torch.int16, torch.int32, torch.uint8, torch.bool)


def _scalar(g, value, dtype, device):
    return _node(g, aten.full.default, ([], value), {"dtype": dtype, "device": device})


def _ordered_int32(g, x, xval):
    """int32 keys whose signed order is ATen's order of ``x``'s values."""
    dev = xval.device
    if xval.dtype in _INTS:
        return _node(g, aten._to_copy.default, (x,), {"dtype": torch.int32})
    f = (
        x
        if xval.dtype == torch.float32
        else _node(g, aten._to_copy.default, (x,), {"dtype": torch.float32})
    )
    nan = _scalar(g, float("nan"), torch.float32, dev)
    f = _node(g, aten.where.self, (_node(g, aten.ne.Tensor, (f, f)), nan, f))
    bits = _node(g, aten.view.dtype, (f, torch.int32))
    # -0.0 as 0.0 on the bits: a float compare with 0 is true for subnormals too (XLA:CPU
    # flushes them), which made them ties and left them in input order
    bits = _node(
        g,
        aten.where.self,
        (_node(g, aten.eq.Scalar, (bits, -(2**31))), _scalar(g, 0, torch.int32, dev), bits),
    )
    neg = _node(g, aten.lt.Scalar, (bits, 0))
    flip = _node(
        g,
        aten.where.self,
        (neg, _scalar(g, 0x7FFFFFFF, torch.int32, dev), _scalar(g, 0, torch.int32, dev)),
    )
    return _node(g, aten.bitwise_xor.Tensor, (bits, flip))


def _ordered_int64(g, x, xval):
    """int64 keys whose signed order is ATen's order of float64/int64 ``x``."""
    if xval.dtype == torch.int64:
        return x
    dev = xval.device
    nan = _scalar(g, float("nan"), torch.float64, dev)
    f = _node(g, aten.where.self, (_node(g, aten.ne.Tensor, (x, x)), nan, x))
    bits = _node(g, aten.view.dtype, (f, torch.int64))
    bits = _node(
        g,
        aten.where.self,
        (_node(g, aten.eq.Scalar, (bits, -(2**63))), _scalar(g, 0, torch.int64, dev), bits),
    )  # -0.0
    neg = _node(g, aten.lt.Scalar, (bits, 0))
    flip = _node(
        g,
        aten.where.self,
        (neg, _scalar(g, 2**63 - 1, torch.int64, dev), _scalar(g, 0, torch.int64, dev)),
    )
    return _node(g, aten.bitwise_xor.Tensor, (bits, flip))


def _positions(g, xval, dim):
    n, dev = xval.shape[dim], xval.device
    pos = _node(g, aten.arange.default, (n,), {"dtype": torch.int64, "device": dev})
    shape = [1] * xval.dim()
    shape[dim] = n
    return _node(g, aten.view.default, (pos, shape))


def _unique_key64(g, x, xval, dim, descending):
    """rank * n + position: unique int64 keys in ATen's stable order of 64-bit ``x``."""
    dev, n = xval.device, xval.shape[dim]
    key = _ordered_int64(g, x, xval)
    if descending:
        key = _node(g, aten.bitwise_not.default, (key,))
    s = _node(g, aten.sort.default, (key, dim))
    sk, si = _node(g, operator.getitem, (s, 0)), _node(g, operator.getitem, (s, 1))
    # dense rank of each sorted key: how many key changes precede it
    changed = _node(
        g,
        aten.ne.Tensor,
        (
            _node(g, aten.slice.Tensor, (sk, dim, 1, n)),
            _node(g, aten.slice.Tensor, (sk, dim, 0, n - 1)),
        ),
    )
    first = [*xval.shape[:dim], 1, *xval.shape[dim + 1 :]]
    changed = _node(
        g,
        aten.cat.default,
        (
            [
                _node(g, aten.zeros.default, (first,), {"dtype": torch.int64, "device": dev}),
                _node(g, aten._to_copy.default, (changed,), {"dtype": torch.int64}),
            ],
            dim,
        ),
    )
    rank = _node(g, aten.cumsum.default, (changed, dim))
    rank = _node(g, aten.scatter.src, (_node(g, aten.zeros_like.default, (rank,)), dim, si, rank))
    key = _node(g, aten.mul.Tensor, (rank, _scalar(g, n, torch.int64, dev)))
    return _node(g, aten.add.Tensor, (key, _positions(g, xval, dim)))


def _stable_sort(g, x, xval, dim, descending):
    """(values, int64 indices) of ATen's stable sort of ``x`` along ``dim``."""
    dev = xval.device
    if xval.dtype in (torch.float64, torch.int64):
        key = _unique_key64(g, x, xval, dim, descending)
    else:
        key = _ordered_int32(g, x, xval)
        if descending:
            key = _node(g, aten.bitwise_not.default, (key,))
        key = _node(g, aten._to_copy.default, (key,), {"dtype": torch.int64})
        key = _node(g, aten.mul.Tensor, (key, _scalar(g, 2**32, torch.int64, dev)))
        key = _node(g, aten.add.Tensor, (key, _positions(g, xval, dim)))
    s = _node(g, aten.sort.default, (key, dim))
    idx = _node(g, operator.getitem, (s, 1))
    return _node(g, aten.gather.default, (x, dim, idx)), idx


def nan_aware_sort(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    g = gm.graph
    todo = [n for n in g.nodes if n.op == "call_function" and n.target in _SORTS and _eligible(n)]
    if not todo:
        return
    mode = graph_fake_mode(g)
    if mode is None:
        return
    with mode:
        for n in todo:
            _rewrite(g, n)
    g.eliminate_dead_code()


def _eligible(n) -> bool:
    x = n.args[0]
    xval = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
    if xval is None or xval.dim() == 0:
        return False
    if not (
        xval.dtype in _INTS
        or xval.dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64)
    ):
        return False
    # only uses we know (the value/index getters): anything else stays as lowered
    return all(u.op == "call_function" and u.target is operator.getitem for u in n.users)


def _arg(n, i, name, default):
    return n.args[i] if len(n.args) > i else n.kwargs.get(name, default)


def _rewrite(g, n) -> None:
    x = n.args[0]
    xval = x.meta["val"]
    if n.target is aten.topk.default:
        k = n.args[1]
        dim = _arg(n, 2, "dim", -1) % xval.dim()
        descending = _arg(n, 3, "largest", True)
    elif n.target is aten.sort.stable:
        dim = n.kwargs.get("dim", -1) % xval.dim()
        descending = n.kwargs.get("descending", False)
    else:
        dim = _arg(n, 1, "dim", -1) % xval.dim()
        descending = _arg(n, 2, "descending", False)
    with g.inserting_before(n):
        values, idx = _stable_sort(g, x, xval, dim, descending)
        if n.target is aten.topk.default:
            values = _node(g, aten.slice.Tensor, (values, dim, 0, k))
            idx = _node(g, aten.slice.Tensor, (idx, dim, 0, k))
    for u in list(n.users):
        u.replace_all_uses_with(values if u.args[1] == 0 else idx)
