"""Unit tests of passes/policy/: each pass alone on a small FX graph; the rewrite is
asserted on the graph, and the rewritten graph's values against the CPU's."""

from __future__ import annotations

import numpy as np
import torch
from pass_graphs import assert_meta_matches, assert_same, nodes_of, run_pass, targets, trace
from torch._subclasses.fake_tensor import FakeTensorMode

from torchneuron.compiler.passes.policy.narrow_64bit import compiling_with, narrow_64bit
from torchneuron.compiler.passes.policy.random_ops_to_inputs import random_ops_to_inputs
from torchneuron.compiler.passes.policy.specialize_scalar_inputs import specialize_scalar_inputs

aten = torch.ops.aten


def test_narrow_64bit_computes_in_32_bits_and_restores_the_dtype():
    def f(a, b, x, i):
        return a + b, x * 3.0, x.index_select(0, i)

    ins = (
        torch.tensor([2**31 - 1, -5, 7]),
        torch.tensor([1, 2**32 + 3, 2]),
        torch.tensor([0.1, 1e-300, 1.0 / 3.0], dtype=torch.float64),
        torch.tensor([2, 0]),
    )
    gm = trace(f, *ins)
    with compiling_with(True):
        plan = run_pass(narrow_64bit, gm, ins)
    (add,) = nodes_of(gm, aten.add.Tensor)
    assert [a.meta["val"].dtype for a in add.args] == [torch.int32, torch.int32]
    (mul,) = nodes_of(gm, aten.mul.Tensor)
    assert mul.args[0].meta["val"].dtype == torch.float32
    (sel,) = nodes_of(gm, aten.index_select.default)  # data movement: full width
    assert sel.args[0].meta["val"].dtype == torch.float64
    assert sel.args[2].meta["val"].dtype == torch.int64
    assert dict(plan.narrowed) == {"aten::add.Tensor": 1, "aten::mul.Tensor": 1}
    assert_meta_matches(gm, ins)
    a, b, x, i = ins
    expected = (
        (a.int() + b.int()).long(),  # wraps at 32 bits: 2**31 - 1 + 1 is -2**31
        (x.float() * 3.0).double(),  # rounded to float32 (1e-300 to 0)
        x.index_select(0, i),
    )
    assert_same(gm(*ins), expected)
    # as eager computes it on the device
    assert_same(gm(*ins), tuple(r.cpu() for r in f(*(t.to("neuron") for t in ins))))


def test_narrow_64bit_off_leaves_the_graph():
    ins = (torch.tensor([2**31 - 1]), torch.tensor([1]))
    gm = trace(torch.add, *ins)
    before = targets(gm)
    with compiling_with(False):
        plan = run_pass(narrow_64bit, gm, ins)
    assert targets(gm) == before and plan.narrowed == ()
    assert_same(gm(*ins), torch.tensor([2**31]))


def test_random_ops_to_inputs_draws_threefry_of_the_key_input():
    from jax.extend.random import threefry_2x32  # an independent Threefry-2x32-20

    def f(x):
        return x + torch.rand_like(x), torch.randint(3, 10, (4,))

    ins = (torch.zeros(5),)
    gm = trace(f, *ins)
    plan = run_pass(random_ops_to_inputs, gm, ins)
    assert aten.rand_like.default not in targets(gm)
    assert aten.randint.low not in targets(gm)
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert phs[-1].name == "rng_key" and plan.inputs[-1] == ("rng_key", None)
    assert_meta_matches(gm, ins + (torch.zeros(2, dtype=torch.int64),))

    key = np.array([0x243F6A88, 0x85A308D3], dtype=np.uint32)
    u, r = gm(ins[0], torch.tensor(key.astype(np.int64)))

    def words(n, number):  # element i of random op `number`: counter (i, number)
        ctr = np.concatenate([np.arange(n, dtype=np.uint32), np.full(n, number, np.uint32)])
        y = np.asarray(threefry_2x32(key, ctr)).astype(np.int64)
        return y[:n], y[n:]

    y0, _ = words(5, 0)
    assert_same(u, torch.tensor((y0 >> 8) * 2.0**-24, dtype=torch.float32))  # top 24 bits
    y0, _ = words(4, 1)
    assert_same(r, torch.tensor(3 + y0 % 7))


def test_specialize_scalar_inputs_bakes_the_value_in():
    g = torch.fx.Graph()
    x, n = g.placeholder("x"), g.placeholder("n")
    y = g.call_function(aten.mul.Tensor, (x, n))
    g.output((y,))
    with FakeTensorMode():
        x.meta["val"] = torch.empty(3)
        y.meta["val"] = torch.empty(3)
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    ins = (torch.tensor([1.0, -2.0, 0.5]), 3)
    plan = run_pass(specialize_scalar_inputs, gm, ins)
    assert [p.name for p in gm.graph.nodes if p.op == "placeholder"] == ["x"]
    (mul,) = nodes_of(gm, aten.mul.Tensor)
    assert mul.args == (x, 3)
    assert plan.inputs == [("arg", 0)] and plan.scalar_args == {1: 3}
    assert_same(gm(ins[0]), (ins[0] * 3,))
