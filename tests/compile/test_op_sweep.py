"""The compile-path op sweep (tests/compile/compile_sweep.py, its cases in
compile_sweep_cases.py): compiled vs the CPU.

``make test`` runs a representative subset (FAST: one graph per dtype); the whole table,
every op over 10 dtypes and 3 input kinds (special values, non-contiguous, empty), is
marked ``compile_sweep`` and runs with ``make test-compile-sweep``. Each op of a
(kind, dtype) is compared on its own; the ops of one (kind, dtype) share one compiled
graph (computed once per module). Known differences (docs/compile.md, "Known
differences from Trainium") are strict xfails: one that starts to match fails the run,
so the list and the docs get updated.
"""

from __future__ import annotations

import functools

import compile_sweep_cases as sweep_cases
import pytest
import torch
from compile_sweep import sweep


@pytest.fixture(scope="module", autouse=True)
def sweep_cache(tmp_path_factory):
    """One NEFF cache folder for the module (each graph is compiled once: a per-test
    fixture made thousands of cheap cases slow)."""
    from torchneuron.compiler import cache

    mp = pytest.MonkeyPatch()
    mp.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path_factory.mktemp("neff_cache")))
    cache.clear_memory_cache()
    yield
    torch.neuron.synchronize()
    torch._dynamo.reset()
    mp.undo()


# A few dozen cases: each class of op, the 64-bit policy, NaN/inf/-0.0, strided and
# empty inputs, in-place ops on clones, and the ops the sweep found wrong.
FAST = {
    ("plain", torch.float32): [
        "exp",
        "log1p",
        "tanh",
        "sigmoid",
        "softmax",
        "logsumexp",
        "std",
        "round decimals",
        "div",
        "atan2",
        "maximum",
        "where",
        "sort",
        "argmax",
        "cumsum",
        "pow 0.5",
        "logcumsumexp",
        "cummax",
        "hypot",
        "isclose",
        "mm",
        "i1",
    ],
    ("strided", torch.float64): [
        "exp",
        "add",
        "mul 2.5",
        "sum",
        "cummin",
        "max dim",
        "cat",
        "nan_to_num",
        "div floor",
    ],
    ("plain", torch.int64): [
        "add",
        "floor_divide",
        "remainder",
        "bitwise_and",
        "rshift",
        "cumprod",
        "sort",
        "cummax",
        "index_put_",
        "type promotion float",
    ],
    ("empty", torch.int32): ["sum", "cumsum", "amax", "mm", "cat"],
    ("plain", torch.uint8): ["sub", "lt 2", "amax", "bitwise_xor", "to int", "mul_ clone"],
    ("plain", torch.bool): [
        "lt 2",
        "eq 2",
        "ge 0.5",
        "clamp tensor min",
        "add",
        "sum",
        "cummax",
        "any",
        "logical_xor",
    ],
}

_ZERO = "signed zero (docs/compile.md: sign of zero)"
_GELU = "ATen's vectorized CPU GELU gives NaN at +inf (its scalar path and the compiled graph inf)"
_ABORTS = (
    "its compile aborts the process (SIGABRT in torch-mlir's pipeline): not run "
    "(docs/compile.md: empty tensors)"
)

# (kind or None for all, dtype or None for all, op) -> reason. Float ones apply to the
# float dtypes; the compile failures are exact (an op that starts to compile must leave).
KNOWN = {}


def _known(kinds, dtypes, ops, reason):
    for k in kinds:
        for d in dtypes:
            for o in ops:
                KNOWN[(k, d, o)] = reason


_KINDS = ("plain", "strided", "empty")
_NONEMPTY = ("plain", "strided")
_known(
    _NONEMPTY, sweep_cases.F, ["elu", "selu", "leaky_relu", "relu6", "relu", "clamp_ clone"], _ZERO
)
_known(_NONEMPTY, (torch.float64,), ["softshrink"], _ZERO)
_known(_NONEMPTY, (torch.float16, torch.bfloat16), ["logsigmoid"], _ZERO)
_known(_NONEMPTY, sweep_cases.I, ["copysign"], _ZERO)
_known(("plain",), (torch.float32, torch.bfloat16), ["gelu"], _GELU)
# float32-grade formulas only (decompositions_special._float_op): a float64 one fails to
# lower, naming the op, rather than differing from eager's full width by ~1e-7
_known(
    _NONEMPTY,
    (torch.float64,),
    ["erfc", "lgamma", "digamma", "erfinv", "i0", "i1", "trigamma"],
    "no float64-precision lowering (docs/compile.md)",
)
# x = -1.0: the compiled trigamma gives the pole's inf; ATen's float32/bfloat16 kernels a
# large finite value (1.3e15: their sin(pi x) is not reduced; float16 overflows to inf too)
_known(
    _NONEMPTY,
    (torch.float32, torch.bfloat16),
    ["trigamma"],
    "trigamma at a negative integer: inf (docs/compile.md)",
)


@functools.cache
def _results(kind, dtype, names=None) -> dict:
    return sweep(dtype, kind, None if names is None else set(names))


def _check(kind, dtype, name, names=None):
    r = _results(kind, dtype, names)[name]
    if isinstance(r, tuple):
        pytest.fail(f"{name} ({kind}, {dtype}) failed to compile: {r[1]}")
    assert r is None, f"{name} ({kind}, {dtype}) differs from the CPU: {r}"


def _params(groups, marks=()):
    out = []
    for (kind, dtype), names in groups:
        for op in sweep_cases.cases(
            dtype, kind, None if names is None else set(names), aborting=True
        ):
            reason = KNOWN.get((kind, dtype, op.name))
            m = list(marks) + ([pytest.mark.xfail(strict=True, reason=reason)] if reason else [])
            if (kind, dtype, op.name) in sweep_cases.ABORTS:
                m = list(marks) + [pytest.mark.xfail(run=False, reason=_ABORTS)]
            out.append(
                pytest.param(
                    kind, dtype, op.name, names, marks=m, id=f"{kind}-{str(dtype)[6:]}-{op.name}"
                )
            )
    return out


@pytest.mark.parametrize(
    "kind, dtype, name, names", _params([(k, tuple(v)) for k, v in FAST.items()])
)
def test_compile_sweep_subset_matches_cpu(kind, dtype, name, names):
    _check(kind, dtype, name, names)


@pytest.mark.parametrize(
    "kind, dtype, name, names",
    _params(
        [((k, d), None) for k in _KINDS for d in sweep_cases.ALL], marks=[pytest.mark.compile_sweep]
    ),
)
def test_compile_sweep_matches_cpu(kind, dtype, name, names):
    _check(kind, dtype, name, names)
