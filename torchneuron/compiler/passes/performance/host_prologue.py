"""Small computations on CPU inputs leave the executable: the host runs them before the
launch, with ATen's CPU kernels (the plan's host prologue, ../../plan.py).

AdamW with ``capturable=False`` (Dynamo sets ``capturable=True`` for CUDA/XPU
parameters only) keeps each parameter's ``step`` count as a 0-dim CPU tensor: its
compiled step graph takes the counts as inputs, increments them and derives the bias
corrections from them (``step + 1``, ``beta ** step``, ``1 - beta ** step``, its square
root). On the device, each updated count had to come back with a device-to-host copy:
the host waited for the device once per optimizer step. Here the nodes that read only
CPU inputs (or each other) and give small CPU tensors run on the host instead, as eager
runs them: an updated count is written on the host (no copy back, no wait), a returned
value is returned as is, and the values device nodes read are copied in flattened, one
input per dtype (``("host_pack", (k, ...))`` in ``plan.inputs``).

Only graphs with a device tensor input change (a graph of CPU tensors runs on the device
as a whole, executable.py), and only nodes whose tensors all have at most ``MAX_NUMEL``
elements, that are deterministic, do not mutate, and have a static result shape.
"""

from __future__ import annotations

import torch

from ...plan import HostRef
from .._fake_mode import graph_fake_mode

aten = torch.ops.aten
MAX_NUMEL = 64
_REFUSED_TAGS = (
    torch.Tag.nondeterministic_seeded,
    torch.Tag.dynamic_output_shape,
    torch.Tag.data_dependent_output,
)


def _small_cpu(v) -> bool:
    return isinstance(v, torch.Tensor) and v.device.type == "cpu" and v.numel() <= MAX_NUMEL


def _host_op(n: torch.fx.Node) -> bool:
    t = n.target
    return (
        n.op == "call_function"
        and isinstance(t, torch._ops.OpOverload)
        and not t._schema.is_mutable
        and not any(tag in t.tags for tag in _REFUSED_TAGS)
        and _small_cpu(n.meta.get("val"))
    )


def _select(g: torch.fx.Graph, phs: list, cpu_args: dict) -> list:
    """The host nodes, in graph order: host ops whose inputs are small CPU placeholders
    (``cpu_args``) or host nodes, without constants that feed only device nodes."""
    host, reads_input = set(), {}
    for n in g.nodes:
        ins = n.all_input_nodes
        reads_input[n] = n in cpu_args or any(reads_input.get(i) for i in ins)
        if n.op != "placeholder" and _host_op(n) and all(i in host or i in cpu_args for i in ins):
            host.add(n)
    for n in reversed(g.nodes):  # a constant moved to the host would only add an input
        if n in host and not reads_input[n] and not any(u in host for u in n.users):
            host.discard(n)
    return [n for n in g.nodes if n in host]


def _ref(a, cpu_args: dict, index: dict):
    if isinstance(a, torch.fx.Node):
        return HostRef("arg", cpu_args[a]) if a in cpu_args else HostRef("host", index[a])
    if isinstance(a, tuple):
        return tuple(_ref(x, cpu_args, index) for x in a)
    if isinstance(a, list):  # FX's immutable_list too: a plain list in the plan
        return [_ref(x, cpu_args, index) for x in a]
    if isinstance(a, dict):
        return {k: _ref(v, cpu_args, index) for k, v in a.items()}
    return a


def host_prologue(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    g = gm.graph
    phs = [n for n in g.nodes if n.op == "placeholder"]
    vals = [p.meta.get("val") for p in phs]
    device = next(
        (v.device for v in vals if isinstance(v, torch.Tensor) and v.device.type != "cpu"), None
    )
    if device is None:
        return  # no device input: left as it is
    cpu_args = {
        p: plan.inputs[k][1]
        for k, p in enumerate(phs)
        if plan.inputs[k][0] == "arg" and _small_cpu(vals[k])
    }
    host = _select(g, phs, cpu_args) if cpu_args else []
    mode = graph_fake_mode(g)
    if not host or mode is None:
        return
    index = {n: k for k, n in enumerate(host)}
    plan.host = [
        (
            n.target.name(),
            _ref(tuple(n.args), cpu_args, index),
            _ref(dict(n.kwargs), cpu_args, index),
        )
        for n in host
    ]
    hs = set(host)
    out = next(n for n in g.nodes if n.op == "output")
    outs = list(out.args[0]) if isinstance(out.args[0], (tuple, list)) else [out.args[0]]
    _cut_outputs(out, outs, hs, index, plan)
    with mode:
        _feed_device(g, phs, host, hs, index, device, plan)
    for n in reversed(host):
        g.erase_node(n)
    _drop_unused_inputs(g, phs, set(cpu_args), plan)


def _cut_outputs(out, outs: list, hs: set, index: dict, plan) -> None:
    """Outputs computed on the host leave the executable: returned values become
    ("host", k), updates of inputs host_mutations."""
    kept, remap = [], {}
    for j, o in enumerate(outs):
        if o not in hs:
            remap[j] = len(kept)
            kept.append(o)
    plan.outputs = [
        (kind, remap[v])
        if kind == "out" and v in remap
        else ("host", index[outs[v]])
        if kind == "out"
        else (kind, v)
        for kind, v in plan.outputs
    ]
    plan.host_mutations = [(i, index[outs[j]]) for i, j in plan.mutations if j not in remap]
    plan.mutations = [(i, remap[j]) for i, j in plan.mutations if j in remap]
    out.args = (tuple(kept),)


def _feed_device(g, phs, host, hs: set, index: dict, device, plan) -> None:
    """Host values that device nodes read come in as one flat input per dtype (inside
    the graph's fake mode)."""
    frontier = [n for n in host if any(u not in hs and u.op != "output" for u in n.users)]
    by_dtype: dict = {}
    for n in frontier:
        by_dtype.setdefault(n.meta["val"].dtype, []).append(n)
    first = next(n for n in g.nodes if n.op != "placeholder")
    for dtype, nodes in by_dtype.items():
        with g.inserting_after(phs[-1]):
            pack = g.placeholder(f"host_pack_{str(dtype).split('.')[-1]}")
        pack.meta["val"] = torch.empty(
            sum(n.meta["val"].numel() for n in nodes), dtype=dtype, device=device
        )
        plan.inputs.append(("host_pack", tuple(index[n] for n in nodes)))
        phs.append(pack)
        off = 0
        for n in nodes:
            v, m = n.meta["val"], n.meta["val"].numel()
            with g.inserting_before(first):
                if v.dim() == 0:
                    new = g.call_function(aten.select.int, (pack, 0, off))
                else:
                    sl = g.call_function(aten.slice.Tensor, (pack, 0, off, off + m))
                    sl.meta["val"] = pack.meta["val"][off : off + m]
                    new = g.call_function(aten.view.default, (sl, list(v.shape)))
            new.meta["val"] = torch.empty(v.shape, dtype=dtype, device=device)
            n.replace_all_uses_with(new, delete_user_cb=lambda u: u not in hs and u.op != "output")
            off += m


def _drop_unused_inputs(g, phs: list, cpu: set, plan) -> None:
    """CPU inputs that only host nodes read leave the executable (plan.inputs follows)."""
    keep = []
    for k, p in enumerate(phs):
        if p in cpu and not p.users:
            g.erase_node(p)
        else:
            keep.append(plan.inputs[k])
    plan.inputs = keep
