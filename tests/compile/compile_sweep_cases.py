"""The cases of the compile-path op sweep (compile_sweep.py runs them): the dtype groups,
the inputs of each kind (special values, non-contiguous, empty), the op table, and which
ops of it are cases for a (dtype, input kind): those the CPU runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

F = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
I = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)
B = (torch.bool,)
ALL = F + I + B
_NAN, _INF = float("nan"), float("inf")


@dataclasses.dataclass(frozen=True)
class Op:
    name: str
    fn: Callable  # fn(x, y) -> tensor or tuple of tensors
    dtypes: tuple = ALL
    zero_sign: bool = True  # False: the sign of a zero result is not compared


def _values(dtype, which: int) -> torch.Tensor:
    """A (3, 5) input: ``which`` 0 is x (special values), 1 is y (no integer zero)."""
    if dtype.is_floating_point:
        v = (
            [
                [-2.5, -1.0, -0.0, 0.0, 0.5],
                [1.0, 3.75, _NAN, _INF, -_INF],
                [1e-3, 100.0, -0.3, 7.0, 0.9],
            ]
            if which == 0
            else [
                [0.5, -3.0, 2.0, -0.0, 0.25],
                [4.0, -1.5, 1.0, 2.0, _NAN],
                [-0.0, 3.0, 0.75, -2.0, 0.5],
            ]
        )
        return torch.tensor(v, dtype=dtype)
    if dtype == torch.bool:
        return torch.tensor(
            [[1, 0, 1, 1, 0], [0, 0, 1, 0, 1], [1, 1, 0, 0, 1]]
            if which == 0
            else [[0, 1, 1, 0, 0], [1, 0, 1, 1, 0], [0, 1, 1, 0, 1]],
            dtype=torch.bool,
        )
    if dtype == torch.uint8:
        v = (
            [[0, 1, 7, 200, 255], [3, 128, 9, 64, 2], [17, 0, 250, 5, 100]]
            if which == 0
            else [[3, 1, 2, 7, 255], [5, 2, 1, 3, 128], [1, 9, 4, 2, 6]]
        )
        return torch.tensor(v, dtype=dtype)
    v = (
        [[-7, 0, 5, -1, 3], [100, -100, 9, 2, -3], [1, 17, -17, 0, 64]]
        if which == 0
        else [[3, -2, 2, 7, -1], [5, 3, -4, 1, 2], [-9, 4, 6, -3, 1]]
    )
    return torch.tensor(v, dtype=dtype)


def inputs(dtype, kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """x, y of ``kind``: ``plain`` (3, 5), ``strided`` (the same values, non-contiguous:
    a transposed view, every other column of a wider tensor), ``empty`` (0, 5)."""
    x, y = _values(dtype, 0), _values(dtype, 1)
    if kind == "plain":
        return x, y
    if kind == "strided":
        xs = x.t().contiguous().t()
        yw = torch.zeros(3, 10, dtype=dtype)
        yw[:, ::2] = y
        ys = yw[:, ::2]
        assert not xs.is_contiguous() and not ys.is_contiguous()
        return xs, ys
    if kind == "empty":
        return x[:0], y[:0]
    raise ValueError(kind)


def _f(t):
    return t.float() if not t.dtype.is_floating_point else t


# --- the op table -----------------------------------------------------------------------
UNARY_FLOAT = {
    "exp": torch.exp,
    "exp2": torch.exp2,
    "expm1": torch.expm1,
    "log": torch.log,
    "log2": torch.log2,
    "log10": torch.log10,
    "log1p": torch.log1p,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "sin": torch.sin,
    "cos": torch.cos,
    "tan": torch.tan,
    "asin": torch.asin,
    "acos": torch.acos,
    "atan": torch.atan,
    "sinh": torch.sinh,
    "cosh": torch.cosh,
    "tanh": torch.tanh,
    "asinh": torch.asinh,
    "acosh": torch.acosh,
    "atanh": torch.atanh,
    "sigmoid": torch.sigmoid,
    "erf": torch.erf,
    "erfc": torch.erfc,
    "reciprocal": torch.reciprocal,
    "logit": torch.logit,
    "sinc": torch.sinc,
    "lgamma": torch.lgamma,
    "digamma": torch.digamma,
    "erfinv": torch.erfinv,
    "i0": torch.i0,
    "i1": torch.special.i1,
    "trigamma": lambda a: torch.polygamma(1, a),
    "deg2rad": torch.deg2rad,
    "rad2deg": torch.rad2deg,
    "frac": torch.frac,
    "round": torch.round,
    "round decimals": lambda a: a.round(decimals=1),
    "floor": torch.floor,
    "ceil": torch.ceil,
    "trunc": torch.trunc,
    "gelu": torch.nn.functional.gelu,
    "gelu tanh": lambda a: torch.nn.functional.gelu(a, approximate="tanh"),
    "silu": torch.nn.functional.silu,
    "softplus": torch.nn.functional.softplus,
    "elu": torch.nn.functional.elu,
    "selu": torch.nn.functional.selu,
    "celu": torch.nn.functional.celu,
    "mish": torch.nn.functional.mish,
    "leaky_relu": torch.nn.functional.leaky_relu,
    "hardsigmoid": torch.nn.functional.hardsigmoid,
    "hardswish": torch.nn.functional.hardswish,
    "hardtanh": torch.nn.functional.hardtanh,
    "relu6": torch.nn.functional.relu6,
    "logsigmoid": torch.nn.functional.logsigmoid,
    "softsign": torch.nn.functional.softsign,
    "tanhshrink": torch.nn.functional.tanhshrink,
    "hardshrink": torch.nn.functional.hardshrink,
    "softshrink": torch.nn.functional.softshrink,
    "nan_to_num": torch.nan_to_num,
    "nan_to_num args": lambda a: a.nan_to_num(1.0, 2.0, -3.0),
    "isnan": torch.isnan,
    "isposinf": torch.isposinf,
    "isneginf": torch.isneginf,
    "signbit": torch.signbit,
    "angle": torch.angle,
    "softmax": lambda a: a.softmax(-1),
    "log_softmax": lambda a: a.log_softmax(0),
    "logsumexp": lambda a: a.logsumexp(1),
    "logcumsumexp": lambda a: a.logcumsumexp(1),
    "mean": lambda a: a.mean(1),
    "std": lambda a: a.std(1),
    "var": lambda a: a.var(0),
    "nansum": lambda a: a.nansum(1),
    "nanmean": lambda a: a.nanmean(1),
    "norm": lambda a: a.norm(dim=1),
    "norm 1": lambda a: a.norm(p=1, dim=0),
    "layer_norm": lambda a: torch.nn.functional.layer_norm(a, a.shape[-1:]),
    "normalize": lambda a: torch.nn.functional.normalize(a.nan_to_num(), dim=1),
}
BINARY_FLOAT = {
    "atan2": torch.atan2,
    "hypot": torch.hypot,
    "copysign": torch.copysign,
    "nextafter": torch.nextafter,
    "xlogy": torch.xlogy,
    "logaddexp": torch.logaddexp,
    "logaddexp2": torch.logaddexp2,
    "fmax": torch.fmax,
    "fmin": torch.fmin,
    "lerp": lambda a, b: torch.lerp(a, b, 0.3),
    "lerp tensor": lambda a, b: torch.lerp(a, b, b),
    "div": torch.div,
    "div 0-dim": lambda a, b: a / b[0, 1],
    "true_divide scalar": lambda a, b: a / 3,
    "xlogy scalar": lambda a, b: torch.xlogy(a, 2.0),
    "copysign scalar": lambda a, b: torch.copysign(a, -1.0),
    "pow": torch.pow,
    "pow 0.5": lambda a, b: a**0.5,
    "rpow": lambda a, b: 2.0**a,
    "float_power": torch.float_power,
    "heaviside": torch.heaviside,
    "addcdiv": lambda a, b: torch.addcdiv(a, a, b, value=0.5),
    "mse": lambda a, b: torch.nn.functional.mse_loss(a, b, reduction="none"),
    "smooth_l1": lambda a, b: torch.nn.functional.smooth_l1_loss(a, b, reduction="none"),
    "binary_cross_entropy_with_logits": lambda a, b: (
        torch.nn.functional.binary_cross_entropy_with_logits(a, b.sigmoid(), reduction="none")
    ),
}
UNARY_ANY = {
    "abs": torch.abs,
    "neg": lambda a: -a if a.dtype != torch.bool else ~a,
    "sign": torch.sign,
    "sgn": torch.sgn,
    "square": torch.square,
    "relu": torch.relu,
    "positive": torch.positive,
    "isinf": torch.isinf,
    "isfinite": torch.isfinite,
    "logical_not": torch.logical_not,
    "clone": torch.clone,
    "clamp": lambda a: a.clamp(-1, 2) if a.dtype != torch.uint8 else a.clamp(1, 9),
    "clamp_min": lambda a: a.clamp_min(1),
    "clamp_max": lambda a: a.clamp_max(1),
    "sum": lambda a: a.sum(1),
    "sum all": lambda a: a.sum(),
    "prod": lambda a: a.prod(0),
    "amax": lambda a: a.amax(1),
    "amin": lambda a: a.amin(0),
    "max dim": lambda a: a.max(1),
    "min dim": lambda a: a.min(0),
    "argmax": lambda a: a.argmax(1),
    "argmin": lambda a: a.argmin(0),
    "cumsum": lambda a: a.cumsum(1),
    "cumprod": lambda a: a.cumprod(0),
    "cummax": lambda a: a.cummax(1),
    "cummin": lambda a: a.cummin(0),
    "all": lambda a: a.all(1),
    "any": lambda a: a.any(0),
    "count_nonzero": lambda a: a.count_nonzero(1),
    "sort": lambda a: a.sort(1),
    "sort desc stable": lambda a: a.sort(0, descending=True, stable=True),
    "argsort": lambda a: a.argsort(1, stable=True),
    "to float": lambda a: a.float(),
    "to int": lambda a: (
        a.int() if not a.dtype.is_floating_point else a.nan_to_num().clamp(-50, 50).int()
    ),
    "to bool": lambda a: a.bool(),
    "to uint8": lambda a: (
        a.to(torch.uint8)
        if not a.dtype.is_floating_point
        else a.nan_to_num().clamp(0, 200).to(torch.uint8)
    ),
    "to half": lambda a: a.half(),
    "to double": lambda a: a.double(),
    "to long": lambda a: (
        a.long() if not a.dtype.is_floating_point else a.nan_to_num().clamp(-50, 50).long()
    ),
    "t": lambda a: a.t(),
    "transpose contiguous": lambda a: a.transpose(0, 1).contiguous(),
    "reshape": lambda a: a.reshape(5, 3),
    "flatten": lambda a: a.flatten(),
    "unsqueeze": lambda a: a.unsqueeze(1),
    "permute": lambda a: a.unsqueeze(0).permute(2, 0, 1),
    "expand": lambda a: a[:, :1].expand(-1, 4),
    "repeat": lambda a: a.repeat(2, 1),
    "flip": lambda a: a.flip(1),
    "roll": lambda a: a.roll(2, 1),
    "tril": lambda a: a.tril(),
    "triu": lambda a: a.triu(1),
    "narrow": lambda a: a.narrow(1, 1, 3),
    "select": lambda a: a[:, 2],
    "slice step": lambda a: a[:, ::2],
    "slice neg": lambda a: a[:, -2:],
    "diagonal": lambda a: a.diagonal(),
    "index_select": lambda a: a.index_select(1, torch.tensor([4, 0, 0], device=a.device)),
    "gather": lambda a: a.gather(
        1, torch.tensor([[0, 4], [1, 1], [3, 2]], device=a.device)[: a.shape[0]]
    ),
    "index neg": lambda a: a[:, torch.tensor([-1, 0], device=a.device)],
    "pad": lambda a: torch.nn.functional.pad(a, (1, 2)),
    "split": lambda a: a.split(2, 1),
    "unbind": lambda a: a.unbind(1),
    "chunk": lambda a: a.chunk(2, 1),
    "movedim": lambda a: a.unsqueeze(0).movedim(0, 2),
    "zeros_like": torch.zeros_like,
    "ones_like": torch.ones_like,
    "full_like": lambda a: torch.full_like(a, 1),
    "masked_fill": lambda a: a.masked_fill(a.bool(), 0),
    "where scalar": lambda a: (
        torch.where(a.bool(), a, 0) if a.dtype != torch.bool else torch.where(a, a, False)
    ),
    "mul 2": lambda a: a * 2,
    "add 3": lambda a: a + 3,
    "rsub 1": lambda a: 1 - a if a.dtype != torch.bool else a,
    "mul 2.5": lambda a: a * 2.5,
    "add -1.5": lambda a: a + -1.5,
    "div 4": lambda a: a / 4,
    "eq 1": lambda a: a == 1,
    "eq 2": lambda a: a == 2,
    "lt 2": lambda a: a < 2,
    "ge 0.5": lambda a: a >= 0.5,
    "add_ clone": lambda a: (
        a.clone().add_(1) if a.dtype != torch.bool else a.clone().logical_not_()
    ),
    "mul_ clone": lambda a: a.clone().mul_(2),
    "clamp_ clone": lambda a: a.clone().clamp_(0, 3),
    "index_put_": lambda a: (
        a.clone().index_put_((torch.tensor([0, 2], device=a.device),), a[1])
        if a.shape[0]
        else a.clone()
    ),
    "masked_fill_": lambda a: a.clone().masked_fill_(a.bool(), 1),
    "fill_": lambda a: a.clone().fill_(0),
    "zero_": lambda a: a.clone().zero_(),
    "setitem": lambda a: _setitem(a),
}
BINARY_ANY = {
    "add": torch.add,
    "sub": lambda a, b: a - b if a.dtype != torch.bool else a ^ b,
    "mul": torch.mul,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "eq": torch.eq,
    "ne": torch.ne,
    "lt": torch.lt,
    "le": torch.le,
    "gt": torch.gt,
    "ge": torch.ge,
    "logical_and": torch.logical_and,
    "logical_or": torch.logical_or,
    "logical_xor": torch.logical_xor,
    "where": lambda a, b: torch.where(b > a, a, b),
    "add alpha": lambda a, b: torch.add(a, b, alpha=2) if a.dtype != torch.bool else a | b,
    "cat": lambda a, b: torch.cat([a, b], 1),
    "stack": lambda a, b: torch.stack([a, b]),
    "true div": lambda a, b: a / b,
    "addcmul": lambda a, b: torch.addcmul(a, a, b, value=2) if a.dtype != torch.bool else a,
    "mul 0-dim": lambda a, b: a * b[0, 1] if b.numel() else a * 2,
    "clamp tensor": lambda a, b: (
        torch.clamp(a, b, b + 5) if a.dtype != torch.bool else torch.clamp(a, b, b)
    ),
    "clamp tensor min": lambda a, b: torch.clamp(a, min=b),
    "isclose": lambda a, b: torch.isclose(a, b),
    "mm": lambda a, b: a @ b.t(),
    "bmm": lambda a, b: torch.bmm(a[None], b.t()[None]),
    "einsum": lambda a, b: torch.einsum("ij,ij->i", a, b),
    "add_ input": lambda a, b: (
        a.clone().add_(b) if a.dtype != torch.bool else a.clone().logical_or_(b)
    ),
    "copy_ cast": lambda a, b: torch.empty_like(a, dtype=torch.float32).copy_(b),
    "type promotion float": lambda a, b: a + b.float(),
    "type promotion int": lambda a, b: (
        a * (b.nan_to_num().int() if b.dtype.is_floating_point else b.int())
    ),
    "type promotion bool": lambda a, b: a + b.bool(),
    "scatter": lambda a, b: a.scatter(
        1, torch.tensor([[0, 1], [2, 3], [4, 0]], device=a.device)[: a.shape[0]], b[:, :2]
    ),
    "scatter_add": lambda a, b: a.scatter_add(
        1, torch.tensor([[0, 0], [2, 3], [4, 4]], device=a.device)[: a.shape[0]], b[:, :2]
    ),
    "index_add": lambda a, b: a.index_add(1, torch.tensor([0, 0, 4], device=a.device), b[:, :3]),
}
BINARY_INT = {
    "floor_divide": lambda a, b: a // b,
    "remainder": torch.remainder,
    "fmod": torch.fmod,
    "div trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "div floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "bitwise_and": torch.bitwise_and,
    "bitwise_or": torch.bitwise_or,
    "bitwise_xor": torch.bitwise_xor,
    "gcd": torch.gcd,
    "lcm": torch.lcm,
    "lshift": lambda a, b: a << b.remainder(5),
    "rshift": lambda a, b: a >> b.remainder(5),
    "remainder scalar": lambda a, b: a % 3,
    "floor_divide scalar": lambda a, b: a // -3,
    "pow int": lambda a, b: a ** b.remainder(3),
}
UNARY_INT = {
    "bitwise_not": torch.bitwise_not,
    "reciprocal int": torch.reciprocal,
    "sqrt int": torch.sqrt,
    "exp int": torch.exp,
    "sigmoid int": torch.sigmoid,
    "mean int": lambda a: a.float().mean(1),
    "xor 5": lambda a: a ^ 5,
}


def _setitem(a):
    a = a.clone()
    a[a > 1] = 0 if a.dtype != torch.bool else False
    return a


def _binary_float_like_int(name):  # the float-only binaries that also take int inputs
    return name in {
        "atan2",
        "hypot",
        "copysign",
        "xlogy",
        "pow",
        "float_power",
        "heaviside",
        "fmax",
        "fmin",
        "div",
        "logaddexp",
    }


# IEEE 754 leaves max/min of +0 and -0 open; XLA's pick depended on the graph around
# the op (one graph matched the CPU, another with other ops in it did not)
_OPEN_ZERO_SIGN = {"fmax", "fmin", "maximum", "minimum", "clamp tensor", "clamp tensor min"}


def table() -> list[Op]:
    ops = []
    for n, f in UNARY_FLOAT.items():
        ops.append(Op(n, (lambda f: lambda x, y: f(x))(f), F))
    for n, f in BINARY_FLOAT.items():
        ops.append(Op(n, f, F + I if _binary_float_like_int(n) else F))
    for n, f in UNARY_ANY.items():
        ops.append(Op(n, (lambda f: lambda x, y: f(x))(f), ALL))
    for n, f in BINARY_ANY.items():
        ops.append(Op(n, f, ALL))
    for n, f in BINARY_INT.items():
        ops.append(
            Op(
                n,
                f,
                I
                + (
                    F
                    if n
                    in (
                        "remainder",
                        "fmod",
                        "floor_divide",
                        "div trunc",
                        "div floor",
                        "remainder scalar",
                        "floor_divide scalar",
                    )
                    else ()
                ),
            )
        )
    for n, f in UNARY_INT.items():
        ops.append(Op(n, (lambda f: lambda x, y: f(x))(f), I + B))
    return [
        dataclasses.replace(op, zero_sign=False) if op.name in _OPEN_ZERO_SIGN else op for op in ops
    ]


# (kind, dtype, op) whose compile aborts the process (SIGABRT in torch-mlir's pipeline):
# not compiled by the sweep (docs/compile.md)
# (sort/gather of an empty uint8 tensor were: passes/legalize/uint8_constants.py)
ABORTS: set = set()


def cases(dtype, kind, names=None, aborting=False) -> list[Op]:
    """The ops of the table that the CPU runs for ``dtype`` (an op the CPU rejects for a
    dtype is not a case); those in ABORTS only with ``aborting``."""
    x, y = inputs(dtype, kind)
    res = []
    for op in table():
        if dtype not in op.dtypes or (names is not None and op.name not in names):
            continue
        if (kind, dtype, op.name) in ABORTS and not aborting:
            continue
        try:
            op.fn(x, y)
        except (RuntimeError, TypeError, ValueError, NotImplementedError, IndexError):
            continue
        res.append(op)
    return res
