"""A compiled graph's host prologue at run time: the plan's ``host`` steps (small
computations on CPU inputs, passes/performance/host_prologue.py) run on the calling
thread with ATen's CPU kernels, before the launch; their values are returned, written
into the CPU inputs they update, or packed for the device (one tensor per dtype).

Steps that repeat across an optimizer's parameters (AdamW: ten per parameter, 280 for
GPT-2's 28) run as one ``_foreach_`` call per kind: on the CPU a foreach op is the
per-tensor op in a loop (ATen's slow path), so each value is the one the step alone
gives, bit for bit (a vectorized op over stacked values is not: its ``pow`` differs in
the last bit), without a Python call per step (~10 us each on a loaded host).
"""

from __future__ import annotations

import torch

from . import config
from .plan import GraphPlan, HostRef

aten = torch.ops.aten
_REF = object()  # an operand's place in a step's structure
# binary ops with a foreach form: (tensor, tensor) -> .List, (tensor, number) -> .Scalar
_BINARY = {
    "aten::add.Tensor": "_foreach_add",
    "aten::sub.Tensor": "_foreach_sub",
    "aten::mul.Tensor": "_foreach_mul",
    "aten::div.Tensor": "_foreach_div",
    "aten::pow.Tensor_Tensor": "_foreach_pow",
    "aten::pow.Tensor_Scalar": "_foreach_pow",
    "aten::maximum": "_foreach_maximum",
    "aten::minimum": "_foreach_minimum",
}


def _op(name: str):
    ns, rest = name.split("::", 1)
    op, _, overload = rest.partition(".")
    return getattr(getattr(getattr(torch.ops, ns), op), overload or "default")


def _refs(a) -> list:
    if type(a) is HostRef:
        return [a]
    if isinstance(a, (list, tuple)):
        return [r for x in a for r in _refs(x)]
    if isinstance(a, dict):
        return [r for x in a.values() for r in _refs(x)]
    return []


def _form(a):
    """A step's structure with its operands as _REF and each other value with its type
    (``1``, ``1.0`` and ``True`` are different arguments): equal for steps that differ
    only in their operands."""
    if type(a) is HostRef:
        return _REF
    if isinstance(a, (list, tuple)):
        return (type(a).__name__, tuple(_form(x) for x in a))
    if isinstance(a, dict):
        return tuple(sorted((k, _form(v)) for k, v in a.items()))
    return (type(a).__name__, a)


def _foreach(name: str, args: tuple, kwargs: dict):
    """(foreach op, how it is called) for steps of this form: ("unary",),
    ("list",), ("scalar", number), ("scalar_base", number); None: step by step."""
    if kwargs:
        return None
    base, _, overload = name.split("::", 1)[1].partition(".")
    if len(args) == 1 and type(args[0]) is HostRef and overload in ("", "default"):
        f = getattr(aten, f"_foreach_{base}", None)
        ok = f is not None and "default" in f.overloads() and base not in ("copy_", "zero_")
        return (f.default, ("unary",)) if ok else None
    if len(args) != 2:
        return None
    a, b = (type(x) is HostRef for x in args)
    if name == "aten::pow.Scalar" and not a and b and isinstance(args[0], (int, float)):
        return aten._foreach_pow.ScalarAndTensor, ("scalar_base", args[0])
    f = _BINARY.get(name)
    if f is None or not a:
        return None
    f = getattr(aten, f)
    if b:
        return f.List, ("list",)
    if isinstance(args[1], (int, float)) and not isinstance(args[1], bool):
        return (f.Scalar, ("scalar", args[1])) if "Scalar" in f.overloads() else None
    return None


class HostPrologue:
    """The host prologue of graph ``name``'s ``plan``: ``run(args)`` gives the values of
    its steps over the call's arguments; ``pack`` stages some for the device; ``write``
    puts the updated ones into the arguments."""

    def __init__(self, name: str, plan: GraphPlan):
        steps = plan.host
        self.name, self.n, self.mutations = name, len(steps), list(plan.host_mutations)
        # steps whose value may share memory with an argument (views of one)
        self.may_alias: set[int] = set()
        self.arg_indices = sorted(
            {r.index for _, a, kw in steps for r in _refs((a, kw)) if r.kind == "arg"}
        )
        level, groups = [], {}
        for k, (name, args, kwargs) in enumerate(steps):
            refs = _refs((args, kwargs))
            first = refs[0] if refs else None
            if _op(name).is_view and first is not None:
                if first.kind == "arg" or first.index in self.may_alias:
                    self.may_alias.add(k)
            level.append(1 + max((level[r.index] for r in refs if r.kind == "host"), default=0))
            key = (level[k], name, _form(args), _form(kwargs))
            try:
                hash(key)
            except TypeError:  # an argument that is not hashable: a group of its own
                key = (level[k], name, k)
            groups.setdefault(key, []).append(k)
        # values returned or written that may share memory with an argument: copied
        self._copy = self.may_alias & (
            {v for kind, v in plan.outputs if kind == "host"} | {k for _, k in self.mutations}
        )
        # (foreach op, its call form, lanes, operands per lane), or (None, per lane
        # (op, args, kwargs), lanes, None), in an order that follows the operands
        self._groups = []
        for (_, name, *_), ks in sorted(groups.items(), key=lambda g: g[0][0]):
            _, args, kwargs = steps[ks[0]]
            fe = _foreach(name, args, kwargs) if len(ks) > 1 else None
            operands = [_refs(steps[k][1]) for k in ks]
            if fe is None:
                calls = [(_op(steps[k][0]), steps[k][1], steps[k][2]) for k in ks]
                self._groups.append((None, calls, ks, None))
            else:
                self._groups.append((fe[0], fe[1], ks, operands))

    def run(self, args: list) -> list:
        if config.cpu_autocopy_disabled() and self.arg_indices:  # its values reach the device
            raise RuntimeError(
                f"compiled graph {self.name}: input {self.arg_indices[0]} is on cpu, expected "
                "a neuron device (TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY=1 turns off "
                "copying CPU inputs)"
            )
        vals: list = [None] * self.n

        def get(r):
            return args[r.index] if r.kind == "arg" else vals[r.index]

        with torch.no_grad():
            for fe, form, ks, operands in self._groups:
                if fe is None:
                    for k, (op, a, kw) in zip(ks, form):
                        vals[k] = op(*_subst(a, get), **_subst(kw, get))
                    continue
                first = [get(o[0]) for o in operands]
                kind = form[0]
                if kind == "unary":
                    res = fe(first)
                elif kind == "list":
                    res = fe(first, [get(o[1]) for o in operands])
                elif kind == "scalar":
                    res = fe(first, form[1])
                else:  # scalar_base
                    res = fe(form[1], first)
                for k, v in zip(ks, res):
                    vals[k] = v
        for k in self._copy:  # read before any update is written
            vals[k] = vals[k].clone()
        return vals

    def write(self, args: list, vals: list) -> None:
        """The arguments the prologue updates (AdamW's step counts) take their values: CPU
        ones with one ``_foreach_copy_`` on the host (no device-to-host copy, no wait for
        the device), a device one with a queued copy."""
        dst, src = [], []
        for i, k in self.mutations:
            if args[i].device.type == "cpu":
                dst.append(args[i])
                src.append(vals[k])
            else:
                args[i].copy_(vals[k])
        if dst:
            torch._foreach_copy_(dst, src)

    @staticmethod
    def pack(vals: list, ks: tuple, device) -> torch.Tensor:
        """Values ``ks`` flattened into one tensor on ``device``: one host-to-device copy,
        ``non_blocking`` (pageable memory: the bytes are taken at the call and the host
        does not wait for the stream; a blocking copy waits for it, as CUDA's)."""
        parts = [vals[k] for k in ks]
        if all(p.dim() == 0 for p in parts):
            flat = torch.stack(parts)
        else:
            flat = torch.cat([p.reshape(-1) for p in parts])
        return flat.to(device, non_blocking=True)


def _subst(a, get):
    if type(a) is HostRef:
        return get(a)
    if isinstance(a, tuple):
        return tuple(_subst(x, get) for x in a)
    if isinstance(a, list):
        return [_subst(x, get) for x in a]
    if isinstance(a, dict):
        return {k: _subst(x, get) for k, x in a.items()}
    return a
