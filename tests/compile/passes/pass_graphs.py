"""Helpers of the passes' unit tests: a small FX graph traced on fake CPU tensors (as
AOTAutograd hands the backend one: every node carries a fake ``meta["val"]``), one pass
run on it alone, and the rewritten graph evaluated on the CPU (ATen's kernels) or lowered
and run through the compiler (for a rewrite whose meaning is the lowering's)."""

from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from torchneuron.compiler.plan import GraphPlan

aten = torch.ops.aten


def trace(fn, *inputs) -> torch.fx.GraphModule:
    """``fn`` traced to an ATen-level graph on fake copies of ``inputs``, unused nodes
    removed (as in AOTAutograd's graphs: ``max_pool2d``'s unused indices getter)."""
    gm = make_fx(fn, tracing_mode="fake")(*inputs)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def run_pass(p, gm: torch.fx.GraphModule, inputs) -> GraphPlan:
    """Runs pass ``p`` alone on ``gm`` (edited in place, linted, recompiled); returns
    the plan it edited."""
    plan = GraphPlan.identity(gm)
    p(gm, plan, list(inputs))
    gm.graph.lint()
    gm.recompile()
    return plan


def targets(gm: torch.fx.GraphModule) -> list:
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def nodes_of(gm: torch.fx.GraphModule, target) -> list:
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target is target]


def assert_meta_matches(gm: torch.fx.GraphModule, inputs) -> None:
    """Every node's ``meta["val"]`` has the shape and dtype its value has when the graph
    runs on ``inputs`` (the lowering reads them: a pass must keep them true)."""
    seen = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            r = super().run_node(n)
            seen[n] = r
            return r

    Recorder(gm).run(*inputs)
    for n, r in seen.items():
        v = n.meta.get("val")
        if isinstance(v, torch.Tensor) and isinstance(r, torch.Tensor):
            assert (tuple(v.shape), v.dtype) == (tuple(r.shape), r.dtype), n.format_node()


def assert_same(actual, expected) -> None:
    """Equal values, dtypes and shapes (NaN equal to NaN); exact."""
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_same(a, e)
        return
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)


def run_lowered(gm: torch.fx.GraphModule, plan: GraphPlan, inputs) -> list:
    """The rewritten graph lowered to StableHLO, compiled and run on the neuron device
    over ``inputs`` (copied there); its outputs, back on the CPU."""
    from torchneuron.compiler import neuron_cc
    from torchneuron.compiler.executable import CompiledGraph
    from torchneuron.compiler.lowering import lower_to_stablehlo

    out = next(n for n in gm.graph.nodes if n.op == "output")
    if not isinstance(out.args[0], (tuple, list)):
        out.args = ((out.args[0],),)
        gm.recompile()
    neuron_cc.start()
    _, shlo = lower_to_stablehlo(gm, "pass_unit_test")
    exe = neuron_cc.compile(shlo, "trn2", 2, 2, [], "pass_unit_test")
    specs = [(tuple(o.meta["val"].shape), o.meta["val"].dtype) for o in out.args[0]]
    res = CompiledGraph("pass_unit_test", exe, plan, specs)([x.to("neuron") for x in inputs])
    return [r.cpu() for r in res]
