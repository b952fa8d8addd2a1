"""Random ops take a key input and are generated inside the graph.

So compiled dropout (and any rand/randn/bernoulli) follows ``torch.neuron.manual_seed``:
the graph gets one extra input, a key of two 32-bit words (an int64 tensor of shape
(2,)), which the executable draws from the device's neuron generator on the current
stream at each launch (``plan.inputs`` entry ("rng_key", None); one draw per launch,
so the generator advances and eager draws after a call never repeat it). Each random
op's element ``i`` is the Threefry-2x32 block of counter (i, op number) under that key
(../../threefry.py); no random tensor is drawn outside the graph.

- uniform: the top m bits of the first word times 2**-m, m = the dtype's mantissa
  width plus one (24 for float32, 11 float16, 8 bfloat16, 53 float64 from both words),
  so values lie in [0, 1) exactly as the dtype can hold them;
- normal: Box-Muller, sqrt(-2 ln u1) cos(2 pi u2), u1 in (0, 1] from the first word,
  u2 from the second, in float32 (float64 for a float64 draw);
- bernoulli (and dropout, decomposed to ``rand_like < p``): a uniform float32 < p;
- randint(low, high): low + (first word mod (high - low)).
Runs after the 64-bit narrowing passes: the generator's int64 words are not values.
"""

from __future__ import annotations

import math

import torch

from ...threefry import threefry2x32
from .._fake_mode import fake_node, graph_fake_mode

aten = torch.ops.aten
_UNIFORM = {
    aten.rand.default: "rand",
    aten.rand_like.default: "rand",
    aten.randn.default: "randn",
    aten.randn_like.default: "randn",
}
_BERNOULLI = (aten.bernoulli.p, aten.bernoulli.default)
# torch-mlir lowers randint to stablehlo.rng, XLA's own state: it would ignore the seed
_RANDINT = (aten.randint.low, aten.randint.default)
_BITS = {torch.float32: 24, torch.float16: 11, torch.bfloat16: 8, torch.float64: 53}


def random_ops_to_inputs(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    g = gm.graph
    rnd = [
        n
        for n in g.nodes
        if n.op == "call_function"
        and (n.target in _UNIFORM or n.target in _BERNOULLI or n.target in _RANDINT)
    ]
    if not rnd:
        return
    mode = graph_fake_mode(g)
    if mode is None:
        return
    with mode:
        _generate(g, plan, rnd)


def _generate(g: torch.fx.Graph, plan, rnd) -> None:
    device = rnd[0].meta["val"].device
    phs = [n for n in g.nodes if n.op == "placeholder"]
    with g.inserting_after(phs[-1]) if phs else g.inserting_before(next(iter(g.nodes))):
        key = g.placeholder("rng_key")
    key.meta["val"] = torch.empty(2, dtype=torch.int64, device=device)
    plan.inputs.append(("rng_key", None))

    def emit(target, *args, **kwargs):
        return fake_node(g, target, args, kwargs)

    for number, n in enumerate(rnd):
        val = n.meta["val"]
        numel = val.numel()
        if numel >= 2**32:
            raise RuntimeError(f"random op {n} draws {numel} values; at most 2**32 - 1 per op")
        with g.inserting_before(n):
            k0 = emit(aten.select.int, key, 0, 0)
            k1 = emit(aten.select.int, key, 0, 1)
            ctr = emit(aten.arange.start_step, 0, numel, 1, dtype=torch.int64, device=device)
            y0, y1 = threefry2x32(
                k0,
                k1,
                ctr,
                number,
                op=emit,
                const=lambda c: emit(aten.full.default, [], c, dtype=torch.int64, device=device),
            )
            if n.target in _RANDINT:
                low, high = (0, n.args[0]) if n.target is aten.randint.default else n.args[:2]
                span = high - low
                if not 0 < span <= 2**32:
                    raise RuntimeError(f"compiled randint: high - low = {span}, expected 1..2**32")
                # low + word mod span (as the CPU's randint: random() % range + base)
                q = emit(aten.mul.Scalar, emit(aten.floor_divide.Scalar, y0, span), span)
                r = emit(aten.add.Scalar, emit(aten.sub.Tensor, y0, q), low)
                r = emit(aten.view.default, r, list(val.shape))
                new = (
                    r
                    if val.dtype == torch.int64
                    else emit(aten._to_copy.default, r, dtype=val.dtype)
                )
            elif n.target in _BERNOULLI:
                u = _uniform(emit, y0, y1, torch.float32)
                u = emit(aten.view.default, u, list(val.shape))
                p = n.args[1] if n.target is aten.bernoulli.p else n.args[0]
                lt = emit(aten.lt.Tensor if isinstance(p, torch.fx.Node) else aten.lt.Scalar, u, p)
                new = emit(aten._to_copy.default, lt, dtype=val.dtype)
            else:
                if _UNIFORM[n.target] == "rand":
                    r = _uniform(emit, y0, y1, val.dtype)
                else:
                    r = _normal(emit, y0, y1, val.dtype)
                new = emit(aten.view.default, r, list(val.shape))
        n.replace_all_uses_with(new)
        g.erase_node(n)


def _bits_to_float(emit, word, bits, dtype):
    """(word >> (32 - bits)) * 2**-bits, exact in ``dtype`` (bits <= 24)."""
    top = emit(aten.floor_divide.Scalar, word, 1 << (32 - bits))
    f = emit(aten._to_copy.default, top, dtype=dtype)
    return emit(aten.mul.Scalar, f, 2.0**-bits)


def _uniform(emit, y0, y1, dtype):
    if dtype not in _BITS:
        raise RuntimeError(f"compiled random op of dtype {dtype}: floating dtypes only")
    if dtype == torch.float64:  # 53 bits: 26 from y0, 27 from y1
        hi = emit(aten.mul.Scalar, emit(aten.floor_divide.Scalar, y0, 1 << 6), 1 << 27)
        m = emit(aten.add.Tensor, hi, emit(aten.floor_divide.Scalar, y1, 1 << 5))
        f = emit(aten._to_copy.default, m, dtype=torch.float64)
        return emit(aten.mul.Scalar, f, 2.0**-53)
    u = _bits_to_float(emit, y0, _BITS[dtype], torch.float32)
    return u if dtype == torch.float32 else emit(aten._to_copy.default, u, dtype=dtype)


def _normal(emit, y0, y1, dtype):
    if dtype not in _BITS:
        raise RuntimeError(f"compiled random op of dtype {dtype}: floating dtypes only")
    wide = torch.float64 if dtype == torch.float64 else torch.float32
    if dtype == torch.float64:
        u1 = _uniform(emit, y0, y1, torch.float64)
        u2 = _uniform(emit, y1, y0, torch.float64)
    else:
        u1 = _bits_to_float(emit, y0, 24, wide)
        u2 = _bits_to_float(emit, y1, 24, wide)
    u1 = emit(aten.rsub.Scalar, u1, 1.0)  # (0, 1]: log never sees 0
    r = emit(aten.sqrt.default, emit(aten.mul.Scalar, emit(aten.log.default, u1), -2.0))
    c = emit(aten.cos.default, emit(aten.mul.Scalar, u2, 2.0 * math.pi))
    z = emit(aten.mul.Tensor, r, c)
    return z if dtype == wide else emit(aten._to_copy.default, z, dtype=dtype)
