"""Threefry-2x32 (20 rounds), the counter-based generator of compiled graphs' random ops.

Salmon et al., "Parallel random numbers: as easy as 1, 2, 3" (SC'11), Random123's
threefry2x32_20; the generator JAX uses. Written once over an ``op(target, *args)``
callable so the same code builds FX nodes (passes/policy/random_ops_to_inputs.py) and runs
on CPU tensors (tests): add/xor/shift/or only, in int64 holding 32-bit words
(values in [0, 2**32), masked after each add and rotation), which every StableHLO
lowering of torch-mlir handles.
"""

from __future__ import annotations

import torch

aten = torch.ops.aten
MASK32 = 0xFFFFFFFF
_PARITY = 0x1BD11BDA  # Threefry's key-schedule constant (Random123)
_ROT = (13, 15, 26, 6, 17, 29, 16, 24)  # rotation constants of Threefry-2x32


def _eager_op(target, *args):
    return target(*args)


def _eager_const(c):
    return torch.tensor(c, dtype=torch.int64)


def threefry2x32(k0, k1, x0, x1, op=_eager_op, const=_eager_const):
    """(y0, y1) = Threefry-2x32-20 of counter (x0, x1) under key (k0, k1).

    All four are int64 tensors (broadcastable; x1 may be a Python int) with values in [0, 2**32); the results
    are int64 in [0, 2**32), shape of the broadcast. ``op(target, *args)`` applies an
    ATen op (default: directly); ``const(c)`` makes a 0-dim int64
    tensor (torch-mlir lowers the bitwise ops' Tensor overloads only)."""
    mask = const(MASK32)

    def is_tensor(a):
        return isinstance(a, (torch.fx.Node, torch.Tensor))

    def add(a, b):
        if not is_tensor(a):
            a, b = b, a
        s = op(aten.add.Tensor if is_tensor(b) else aten.add.Scalar, a, b)
        return op(aten.bitwise_and.Tensor, s, mask)

    def rotl(a, r):
        hi = op(aten.bitwise_and.Tensor, op(aten.mul.Scalar, a, 1 << r), mask)
        lo = op(aten.floor_divide.Scalar, a, 1 << (32 - r))  # a >= 0: a logical shift
        return op(aten.bitwise_or.Tensor, hi, lo)

    k2 = op(aten.bitwise_xor.Tensor, op(aten.bitwise_xor.Tensor, k0, k1), const(_PARITY))
    ks = (k0, k1, k2)
    x0, x1 = add(x0, k0), add(x1, k1)
    for block in range(5):
        for j in range(4):
            x0 = add(x0, x1)
            x1 = op(aten.bitwise_xor.Tensor, rotl(x1, _ROT[(block % 2) * 4 + j]), x0)
        # key injection after each 4 rounds: s = block + 1
        s = block + 1
        x0 = add(x0, ks[s % 3])
        x1 = add(add(x1, ks[(s + 1) % 3]), s)
    return x0, x1
