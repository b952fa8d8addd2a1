"""The key of an AOTAutograd graph as the backend receives it (before the FX passes).

A warm start looks its executable up by this key (cache.py's index) and so skips the
graph copy, the FX passes and the lowering. The key must decide the executable and
the run plan completely, so it covers: every node (op, target, arguments, with the
shape, dtype, stride and device of each placeholder), the bytes of tensor constants
(``get_attr``), the values of the scalar example inputs (the passes bake them in), the
source of the FX passes (a changed pass changes every key) and the environment the
passes read (TORCHNEURON_NARROW_64BIT). Hashing this is ~10x cheaper than printing
the graph's Python code. ``None`` when a constant cannot be read: then no index.
"""

from __future__ import annotations

import functools
import hashlib
import os

import torch

# What turns a graph into StableHLO: the passes and the modules they and the lowering use.
_PIPELINE_SOURCES = ("threefry.py", "plan.py", "lowering.py", "decompositions.py")


@functools.lru_cache(maxsize=1)
def passes_fingerprint() -> str:
    """SHA-256 of the source files of compiler/passes/ (its subfolders too) and of the
    modules the pipeline runs (``_PIPELINE_SOURCES``): a changed pass or lowering changes
    every key."""
    here = os.path.dirname(__file__)
    files = []
    for d, dirs, names in os.walk(os.path.join(here, "passes")):
        dirs.sort()  # one order on every machine
        files += [os.path.join(d, f) for f in sorted(names) if f.endswith(".py")]
    files += [os.path.join(here, f) for f in _PIPELINE_SOURCES]
    h = hashlib.sha256()
    for path in files:
        h.update(os.path.relpath(path, here).encode())
        with open(path, "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()


def _target(t) -> str:
    if isinstance(t, str):
        return t
    mod = getattr(t, "__module__", None) or ""
    return (
        f"{mod}.{getattr(t, '__qualname__', None) or getattr(t, '__name__', None) or t}"
        if not isinstance(t, torch._ops.OpOverload)
        else str(t)
    )


_PLAIN = (
    bool,
    int,
    complex,
    str,
    slice,
    type(Ellipsis),
    torch.dtype,
    torch.device,
    torch.layout,
    torch.memory_format,
)


def _tensor_spec(v) -> str:
    return f"T{tuple(v.shape)}{tuple(v.stride())}{v.dtype}{v.device}"


def _arg(a) -> str:
    if isinstance(a, torch.fx.Node):
        return f"%{a.name}"
    if isinstance(a, (list, tuple)):
        inner = ",".join(_arg(x) for x in a)
        return f"[{inner}]" if isinstance(a, list) else f"({inner})"
    if isinstance(a, dict):
        return "{" + ",".join(f"{k!r}:{_arg(v)}" for k, v in a.items()) + "}"
    if isinstance(a, torch.Tensor):  # an inline tensor argument: by value
        return (
            "tensor"
            + _tensor_spec(a)
            + hashlib.sha256(
                a.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
            ).hexdigest()
        )
    if isinstance(a, float):
        return repr(a) + "f"  # 1.0 and 1 lower differently
    if a is None or isinstance(a, _PLAIN):
        return f"{type(a).__name__}:{a!r}"
    raise TypeError(f"no key for {type(a).__name__}")  # e.g. a subgraph module


def graph_key_text(gm: torch.fx.GraphModule, example_inputs) -> str | None:
    """A text that identifies ``gm`` + scalar inputs + pass pipeline (None: not keyable)."""
    try:
        return _key_text(gm, example_inputs)
    except Exception:  # an argument we cannot read by value: no index for this graph
        return None


def _key_text(gm, example_inputs):
    from .passes.policy.narrow_64bit import _eager_calls, enabled

    # the switch the passes read (the variable's value at start-up, _set_narrow_64bit,
    # or the variant narrowing_variants.py builds)
    parts = [passes_fingerprint(), f"narrow64={int(enabled())}"]
    for x in example_inputs:
        if isinstance(x, torch.Tensor):
            parts.append("in:" + _tensor_spec(x))
        elif isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return None  # symbolic: the specializer gives concrete inputs
        else:
            parts.append("in:" + _arg(x))
    # the eager call each node was traced from: narrow_64bit decides by it (x // y and
    # div(x, y, rounding_mode="floor") are one graph, narrowed only in the second)
    calls = _eager_calls(gm.graph)
    for n in gm.graph.nodes:
        line = f"{n.op} {n.name} {_target(n.target)} {_arg(n.args)} {_arg(n.kwargs)}"
        if n in calls:
            line += f" from {calls[n]}"
        if n.op == "placeholder":
            v = n.meta.get("val")
            line += " " + (_tensor_spec(v) if isinstance(v, torch.Tensor) else repr(v))
        elif n.op == "get_attr":
            line += " " + _arg(getattr(gm, n.target))
        elif n.op in ("call_module", "call_method"):
            return None  # AOT graphs hold neither; refuse rather than guess
        parts.append(line)
    return "\n".join(parts)


def with_narrow(key_text: str, narrow: bool) -> str:
    """``key_text`` as graph_key_text gives it under the 64-bit narrowing switch ``narrow``
    (its second line names the switch; nothing else in it depends on the switch)."""
    lines = key_text.split("\n", 2)
    lines[1] = f"narrow64={int(bool(narrow))}"
    return "\n".join(lines)
