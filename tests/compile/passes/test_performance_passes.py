"""Unit tests of passes/performance/: each pass alone on a small FX graph; the rewrite is
asserted on the graph, and the rewritten graph's values against the CPU's (these passes
change only speed, so the values are ATen's own)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from pass_graphs import assert_meta_matches, assert_same, nodes_of, run_pass, targets, trace

from torchneuron.compiler.host_prologue import HostPrologue
from torchneuron.compiler.passes.performance.channels_last_max_pool import channels_last_max_pool
from torchneuron.compiler.passes.performance.host_prologue import host_prologue
from torchneuron.compiler.passes.performance.pad_small_conv_inputs import pad_small_conv_inputs
from torchneuron.compiler.passes.performance.return_inputs_as_is import return_inputs_as_is
from torchneuron.compiler.plan import GraphPlan

aten = torch.ops.aten


def test_pad_small_conv_inputs_pads_explicitly():
    def f(x, w, w1):
        # 3x3 kernel over 2x2 maps (padded: explicit); 1x1 kernel (left as it is)
        return F.conv2d(x, w, padding=1), F.conv2d(x, w1, padding=1)

    torch.manual_seed(0)
    ins = (torch.randn(2, 4, 2, 2), torch.randn(5, 4, 3, 3), torch.randn(5, 4, 1, 1))
    gm = trace(f, *ins)
    run_pass(pad_small_conv_inputs, gm, ins)
    (pad,) = nodes_of(gm, aten.constant_pad_nd.default)
    assert pad.args[1:] == ([1, 1, 1, 1], 0.0)
    c3, c1 = nodes_of(gm, aten.convolution.default)
    assert c3.args[0] is pad and list(c3.args[4]) == [0, 0]
    assert list(c1.args[4]) == [1, 1]
    assert_meta_matches(gm, ins)
    got, expected = gm(*ins), f(*ins)
    torch.testing.assert_close(got[0], expected[0], rtol=1e-6, atol=1e-6)
    assert_same(got[1], expected[1])


def test_channels_last_max_pool_as_strided_slices():
    def f(x):
        return F.max_pool2d(x, 3, 2, padding=1), F.max_pool2d(x, 2)

    torch.manual_seed(0)
    x = torch.randn(2, 3, 7, 6)
    x[0, 1, 2, 3] = math.nan
    x[1, 2, 0, 0] = -math.inf
    ins = (x,)
    gm = trace(f, *ins)
    run_pass(channels_last_max_pool, gm, ins)
    assert aten.max_pool2d_with_indices.default not in targets(gm)
    assert len(nodes_of(gm, aten.maximum.default)) == (9 - 1) + (4 - 1)
    perms = [n.args[1] for n in nodes_of(gm, aten.permute.default)]
    assert perms == [[0, 2, 3, 1], [0, 3, 1, 2]] * 2  # NHWC and back, per pool
    assert aten.constant_pad_nd.default in targets(gm)  # the padded one: -inf padding
    assert_meta_matches(gm, ins)
    assert_same(gm(*ins), f(*ins))  # max is exact; NaN propagated as ATen's pool does


def test_channels_last_max_pool_leaves_pools_whose_indices_are_used():
    def f(x):
        return F.max_pool2d(x, 2, return_indices=True)

    ins = (torch.randn(1, 2, 4, 4),)
    gm = trace(f, *ins)
    run_pass(channels_last_max_pool, gm, ins)
    assert aten.max_pool2d_with_indices.default in targets(gm)
    assert_same(gm(*ins), f(*ins))


def test_return_inputs_as_is_returns_the_arguments():
    def f(x, w, b):
        return x, (x @ w).sin(), w, b

    torch.manual_seed(0)
    ins = (torch.randn(4, 3), torch.randn(3, 2), torch.randn(2))
    gm = trace(f, *ins)
    plan = GraphPlan.identity(gm)
    plan.mutations = [(2, 4)]  # b is updated in place (output 4): its value stays an output
    out = next(n for n in gm.graph.nodes if n.op == "output")
    out.args = (tuple(out.args[0]) + (out.args[0][1],),)
    return_inputs_as_is(gm, plan, list(ins))
    gm.graph.lint()
    gm.recompile()
    assert plan.outputs == [("arg", 0), ("out", 0), ("arg", 1), ("out", 1)]
    assert plan.mutations == [(2, 2)]
    got = gm(*ins)
    assert len(got) == 3
    torch.testing.assert_close(got[0], (ins[0] @ ins[1]).sin())
    assert_same(got[1], ins[2])


def _bias_correction(x, step):
    # AdamW's capturable=False form: CPU 0-dim counts, the update on the device
    new = step + 1
    corr = (1 - 0.999**new).sqrt()
    return x / corr, new, corr * 2


def test_host_prologue_moves_cpu_scalar_work_to_the_host():
    ins = (torch.randn(3, device="neuron"), torch.tensor(4.0))
    gm = trace(_bias_correction, *ins)
    plan = run_pass(host_prologue, gm, ins)
    # the CPU count is read on the host only; the device reads the correction, packed
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert [p.meta["val"].device.type for p in phs] == ["neuron", "neuron"]
    assert [name for name, *_ in plan.host] == [
        "aten::add.Tensor",
        "aten::pow.Scalar",
        "aten::rsub.Scalar",
        "aten::sqrt",
        "aten::mul.Tensor",
    ]
    assert plan.inputs == [("arg", 0), ("host_pack", (3,))]  # sqrt's value
    assert plan.outputs == [("out", 0), ("host", 0), ("host", 4)]
    assert all(n.meta["val"].device.type == "neuron" for n in gm.graph.nodes if "val" in n.meta)
    x, step = torch.randn(3), torch.tensor(4.0)
    vals = HostPrologue("g", plan).run([x, step])
    got = gm(x, vals[3].reshape(1))
    expected = _bias_correction(x, step)
    assert_same(got[0], expected[0])
    assert_same(vals[0], expected[1])
    assert_same(vals[-1], expected[2])


def test_host_prologue_leaves_graphs_without_a_cpu_input_or_without_a_device_input():
    for dev in ("neuron", "cpu"):
        ins = (torch.randn(3, device=dev), torch.tensor(4.0, device=dev))
        gm = trace(_bias_correction, *ins)
        before = gm.print_readable(print_output=False)
        plan = run_pass(host_prologue, gm, ins)
        assert plan.host == [] and gm.print_readable(print_output=False) == before
