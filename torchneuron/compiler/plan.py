"""How a lowered graph's executable maps onto the call the backend receives.

The FX passes change a graph's signature (random ops take a key input, scalar inputs
become constants, in-place updates of inputs become outputs, None outputs go);
each records here what it changed, and executable.py follows the record at run time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import torch


class HostRef(NamedTuple):
    """An operand of a host prologue step: the call's argument ``index`` ("arg") or the
    value of step ``index`` ("host")."""

    kind: str
    index: int


@dataclass
class GraphPlan:
    """``inputs``: per executable input, ("arg", i) = the call's i-th argument,
    ("rng_key", None) = a Threefry key drawn from the device's generator at each launch
    (passes/policy/random_ops_to_inputs.py), or ("host_pack", (k, ...)) = the host
    prologue's values k flattened into one tensor and copied to the device
    (passes/performance/host_prologue.py). ``outputs``: per value the call returns,
    ("out", j) = the executable's j-th output, ("arg", i) = the call's i-th argument
    itself (an input returned unchanged: passes/performance/return_inputs_as_is.py),
    ("const", v) (None outputs), or ("host", k) = the host prologue's value k.
    ``mutations``: (i, j): after the run, the call's argument i takes the executable's
    output j (in place, as the eager program mutated it)."""

    n_args: int
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    mutations: list = field(default_factory=list)
    scalar_args: dict = field(default_factory=dict)  # arg index -> value baked in
    # ((eager op name, ops in the graph), ...): added to torch.neuron.narrowing_stats()
    # / full_width_stats() at each launch (passes/policy/narrow_64bit.py)
    narrowed: tuple = ()
    full_width: tuple = ()
    # outputs that share memory in eager (y and y[0] of an intermediate y): per group,
    # (storage bytes, ((executable output j, stride, storage offset), ...)); the
    # executable returns them as views of one buffer (output_alias_groups)
    out_aliases: list = field(default_factory=list)
    # executable outputs whose eager value is on the CPU (every input was): returned
    # there, as eager (cpu_outputs)
    cpu_outputs: tuple = ()
    # the host prologue (passes/performance/host_prologue.py): small computations on CPU
    # inputs, run on the host with ATen's CPU kernels before the launch, in order; per
    # step (op name "ns::op.overload", args, kwargs), operands as HostRef.
    # host_mutations: (i, k): the call's argument i takes the value of step k, on the
    # host (AdamW's step counts: no device-to-host copy)
    host: list = field(default_factory=list)
    host_mutations: list = field(default_factory=list)

    @classmethod
    def identity(cls, gm: torch.fx.GraphModule) -> GraphPlan:
        phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
        out = next(n for n in gm.graph.nodes if n.op == "output")
        n_out = len(out.args[0]) if isinstance(out.args[0], (tuple, list)) else 1
        return cls(
            len(phs), [("arg", i) for i in range(len(phs))], [("out", j) for j in range(n_out)]
        )


def output_alias_groups(gm: torch.fx.GraphModule, plan: GraphPlan) -> list:
    """The call's outputs that are views of one storage other than an input's (an
    intermediate ``y`` returned with ``y[0]``, ``y.t()``, ...), from the AOT graph's
    values, as ``GraphPlan.out_aliases``. AOTAutograd regenerates such aliases itself
    only when they require grad; otherwise eager's aliasing is the graph's to keep
    (an in-place change through one output shows in the others)."""
    from torch.multiprocessing.reductions import StorageWeakRef

    def val(n):
        v = n.meta.get("val") if isinstance(n, torch.fx.Node) else None
        return v if isinstance(v, torch.Tensor) else None

    inputs = {
        StorageWeakRef(v.untyped_storage())
        for n in gm.graph.nodes
        if n.op == "placeholder" and (v := val(n)) is not None
    }
    out = next(n for n in gm.graph.nodes if n.op == "output")
    outs = list(out.args[0]) if isinstance(out.args[0], (tuple, list)) else [out.args[0]]
    groups: dict = {}
    for k, o in enumerate(outs[: len(plan.outputs)]):
        v = val(o)
        if v is None or plan.outputs[k][0] != "out":
            continue
        ref = StorageWeakRef(v.untyped_storage())
        if ref in inputs:
            continue  # AOTAutograd regenerates aliases of inputs from the input
        g = groups.setdefault(ref, (v.untyped_storage().nbytes(), {}))
        g[1][plan.outputs[k][1]] = (tuple(v.stride()), v.storage_offset())
    return [
        (nbytes, tuple((j, st, off) for j, (st, off) in m.items()))
        for nbytes, m in groups.values()
        if len(m) > 1
    ]


def cpu_outputs(gm: torch.fx.GraphModule, plan: GraphPlan) -> tuple:
    """The executable outputs (j) whose value in the AOT graph is on the CPU: a graph
    whose tensors are all on the CPU (a model left there) runs on neuron, and these
    come back to the CPU, where eager leaves them (and the backward's gradients then
    reach CPU parameters)."""
    out = next(n for n in gm.graph.nodes if n.op == "output")
    outs = list(out.args[0]) if isinstance(out.args[0], (tuple, list)) else [out.args[0]]
    js = []
    for k, o in enumerate(outs[: len(plan.outputs)]):
        v = o.meta.get("val") if isinstance(o, torch.fx.Node) else None
        if isinstance(v, torch.Tensor) and v.device.type == "cpu" and plan.outputs[k][0] == "out":
            js.append(plan.outputs[k][1])
    return tuple(sorted(set(js)))
