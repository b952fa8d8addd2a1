"""Unit tests of passes/legalize/: each pass alone on a small FX graph; the rewrite is
asserted on the graph, and the rewritten graph's values against the CPU's."""

from __future__ import annotations

import torch
from pass_graphs import assert_meta_matches, assert_same, nodes_of, run_pass, targets, trace

from torchneuron.compiler.passes.legalize.bitwise_before_truncation import (
    bitwise_before_truncation,
)
from torchneuron.compiler.passes.legalize.clamp_slice_bounds import clamp_slice_bounds
from torchneuron.compiler.passes.legalize.decompose_cumprod import decompose_cumprod
from torchneuron.compiler.passes.legalize.drop_device_arguments import drop_device_arguments
from torchneuron.compiler.passes.legalize.empty_results import empty_results
from torchneuron.compiler.passes.legalize.functionalize_input_mutations import (
    functionalize_input_mutations,
)
from torchneuron.compiler.passes.legalize.remove_none_outputs import remove_none_outputs
from torchneuron.compiler.passes.legalize.uint8_constants import uint8_constants
from torchneuron.compiler.passes.legalize.zero_dim_reductions import zero_dim_reductions

aten = torch.ops.aten


def _outputs(gm) -> list:
    out = next(n for n in gm.graph.nodes if n.op == "output")
    return list(out.args[0]) if isinstance(out.args[0], (tuple, list)) else [out.args[0]]


def test_functionalize_input_mutations_returns_the_new_value():
    def f(x, y):
        x.copy_(y * 2)  # broadcast and cast into x
        return (y + 1,)

    ins = (torch.zeros(2, 3, dtype=torch.float64), torch.tensor([1.5, -2.0, 3.0]))
    gm = trace(f, *ins)
    plan = run_pass(functionalize_input_mutations, gm, ins)
    assert aten.copy_.default not in targets(gm)
    assert plan.mutations == [(0, 1)]  # argument 0 takes output 1
    x = ins[0].clone()
    user, new = gm(x, ins[1])
    assert torch.equal(x, ins[0])  # the graph itself no longer writes its input
    expected_x = ins[0].clone()
    assert_same(user, f(expected_x, ins[1])[0])
    assert_same(new, expected_x)  # the value eager wrote, in x's shape and dtype


def test_remove_none_outputs_records_them_in_the_plan():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = g.call_function(aten.neg.default, (x,))
    g.output((None, y, None))
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    ins = (torch.tensor([1.0, -2.0]),)
    plan = run_pass(remove_none_outputs, gm, ins)
    assert _outputs(gm) == [y]
    assert plan.outputs == [("const", None), ("out", 0), ("const", None)]
    assert_same(gm(*ins), (-ins[0],))


def test_drop_device_arguments():
    def f(x):
        return x + torch.ones(3, device=x.device), x.to(dtype=torch.float64, device=x.device)

    ins = (torch.tensor([1.0, 2.0, 3.0]),)
    gm = trace(f, *ins)
    assert any("device" in n.kwargs for n in gm.graph.nodes if n.op == "call_function")
    run_pass(drop_device_arguments, gm, ins)
    assert not any("device" in n.kwargs for n in gm.graph.nodes if n.op == "call_function")
    assert torch.ops.prims.device_put.default not in targets(gm)
    assert_same(gm(*ins), f(*ins))


def test_empty_results_become_constants():
    def f(x, i):
        return torch.sort(x, 1)[0], torch.gather(x, 1, i), x.sum(0)

    ins = (torch.ones(0, 5), torch.zeros(0, 5, dtype=torch.int64))
    gm = trace(f, *ins)
    run_pass(empty_results, gm, ins)
    assert aten.sort.default not in targets(gm) and aten.gather.default not in targets(gm)
    out = _outputs(gm)
    assert [o.target for o in out[:2]] == [aten.full.default] * 2
    assert [list(o.args[0]) for o in out[:2]] == [[0, 5], [0, 5]]
    assert aten.sum.dim_IntList in targets(gm)  # a non-empty result (zeros of 5) is kept
    assert_meta_matches(gm, ins)
    assert_same(gm(*ins), f(*ins))


def test_decompose_cumprod_as_a_scan_with_int64_accumulation():
    def f(x, y):
        return torch.cumprod(x, 0), torch.cumprod(y, 1)

    ins = (torch.tensor([2**20, 2**20, 3, -1, 5], dtype=torch.int32), torch.randn(2, 7))
    gm = trace(f, *ins)
    run_pass(decompose_cumprod, gm, ins)
    assert aten.cumprod.default not in targets(gm)
    assert len(nodes_of(gm, aten.mul.Tensor)) == 3 + 3  # ceil(log2(5)) + ceil(log2(7))
    assert_meta_matches(gm, ins)
    ints, floats = gm(*ins)
    assert_same(ints, torch.cumprod(ins[0], 0))  # int64, exact past 2**31
    torch.testing.assert_close(floats, torch.cumprod(ins[1], 1))  # rounding order differs


def test_clamp_slice_bounds_to_the_dimension():
    def f(x):
        return x[..., 1:], x[-2:], x[:, -100:2]

    ins = (torch.arange(12).reshape(3, 4),)
    gm = trace(f, *ins)
    run_pass(clamp_slice_bounds, gm, ins)
    bounds = [n.args[2:4] for n in nodes_of(gm, aten.slice.Tensor)]
    assert (1, 4) in bounds and (1, 3) in bounds and (0, 2) in bounds
    assert all(0 <= s <= e <= 4 for s, e in bounds)
    assert_same(gm(*ins), f(*ins))


def test_bitwise_before_truncation_computes_in_the_wide_type():
    def f(x, y):
        return x.int() & y.int(), x.int() | y.int()

    ins = (torch.tensor([2**40 + 5, -1, 7]), torch.tensor([3, 2**33 - 1, -8]))
    gm = trace(f, *ins)
    run_pass(bitwise_before_truncation, gm, ins)
    for t in (aten.bitwise_and.Tensor, aten.bitwise_or.Tensor):
        (n,) = nodes_of(gm, t)
        assert n.meta["val"].dtype == torch.int64
        assert [a.meta["val"].dtype for a in n.args] == [torch.int64, torch.int64]
    assert_meta_matches(gm, ins)
    assert_same(gm(*ins), f(*ins))


def test_uint8_constants_as_int8_bits():
    def f(x):
        return x + torch.full_like(x, 255), torch.zeros_like(x), torch.tensor(200.0).to(torch.uint8)

    ins = (torch.tensor([1, 2, 250], dtype=torch.uint8),)
    gm = trace(f, *ins)
    run_pass(uint8_constants, gm, ins)
    views = nodes_of(gm, aten.view.dtype)
    assert len(views) == 3 and all(v.args[1] == torch.uint8 for v in views)
    assert all(v.args[0].meta["val"].dtype == torch.int8 for v in views)
    fills = [n.args[1] for n in nodes_of(gm, aten.full.default)]
    assert -1 in fills and 0 in fills  # 255 as int8 bits
    assert_meta_matches(gm, ins)
    assert_same(gm(*ins), f(*ins))


def test_zero_dim_reductions_run_on_a_one_element_view():
    def f(x):
        return (
            x.sum(0, keepdim=True),
            x.amax(-1, keepdim=True),
            x.argmax(0, keepdim=True),
            x.cumsum(0),
            x.max(0, keepdim=True)[0],
            x.sum(),  # a full reduction without keepdim: left alone
        )

    ins = (torch.tensor(-2.5),)
    gm = trace(f, *ins)
    run_pass(zero_dim_reductions, gm, ins)
    for t in (aten.sum.dim_IntList, aten.amax.default, aten.argmax.default, aten.cumsum.default):
        (n,) = nodes_of(gm, t)
        assert n.args[0].meta["val"].shape == (1,), n.format_node()
    (full,) = [n for n in nodes_of(gm, aten.sum.default)]
    assert full.args[0].meta["val"].dim() == 0
    assert_meta_matches(gm, ins)
    assert_same(gm(*ins), f(*ins))  # every result 0-dim again, as ATen's
