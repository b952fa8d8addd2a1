"""Unit tests of passes/semantics/: each pass alone on a small FX graph; the rewrite is
asserted on the graph, and the rewritten graph's values against the CPU's (ATen)."""

from __future__ import annotations

import math

import torch
from pass_graphs import (
    assert_meta_matches,
    assert_same,
    nodes_of,
    run_lowered,
    run_pass,
    targets,
    trace,
)

from torchneuron.compiler.passes.semantics.compare_in_result_type import compare_in_result_type
from torchneuron.compiler.passes.semantics.exact_fmod import exact_fmod
from torchneuron.compiler.passes.semantics.float_scalar_operands import float_scalar_operands
from torchneuron.compiler.passes.semantics.nan_aware_arg_reductions import (
    nan_aware_arg_reductions,
)
from torchneuron.compiler.passes.semantics.nan_aware_sort import nan_aware_sort
from torchneuron.compiler.passes.semantics.self_equality import self_equality
from torchneuron.compiler.passes.semantics.upcast_low_precision_reductions import (
    upcast_low_precision_reductions,
)
from torchneuron.compiler.passes.semantics.wrap_negative_indices import wrap_negative_indices

aten = torch.ops.aten
NAN = math.nan


def test_compare_in_result_type_converts_operands():
    def f(x, t, b):
        return x < t, b < 2

    ins = (
        torch.tensor([0, 1, 250, 252, 255], dtype=torch.uint8),
        torch.tensor(-5, dtype=torch.int32),  # 251 as uint8: ATen's result type
        torch.tensor([True, False]),
    )
    gm = trace(f, *ins)
    run_pass(compare_in_result_type, gm, ins)
    (lt_t,) = nodes_of(gm, aten.lt.Tensor)
    assert [a.meta["val"].dtype for a in lt_t.args] == [torch.uint8, torch.uint8]
    (lt_s,) = nodes_of(gm, aten.lt.Scalar)
    assert lt_s.args[0].meta["val"].dtype == torch.int64  # bool < 2 compares as int64
    assert_meta_matches(gm, ins)
    assert_same(gm(*ins), f(*ins))


def test_exact_fmod_retargets_and_lowers_exactly():
    def f(a, b):
        return torch.fmod(a, b)

    ins = (torch.tensor([5.0, -8.0, 8.0, -7.5, 1e7]), torch.tensor([0.1, 4.0, -3.0, 2.0, 3.3]))
    gm = trace(f, *ins)
    plan = run_pass(exact_fmod, gm, ins)
    assert aten.fmod.Tensor not in targets(gm)
    assert len(nodes_of(gm, aten.remainder.Tensor)) == 1
    # here remainder.Tensor means stablehlo.remainder (C's fmod): only the lowering
    # gives it that meaning, so the values are checked through it
    (got,) = run_lowered(gm, plan, ins)
    assert_same(got, f(*ins))
    assert math.copysign(1.0, got[1].item()) == -1.0  # fmod(-8, 4) is -0.0


def test_float_scalar_operands_make_int_operands_float():
    def f(x):
        return x + -1, x * 2, x < 0, x + 2**60

    ins = (torch.tensor([3.0, -3.0, 0.5]),)
    gm = trace(f, *ins)
    run_pass(float_scalar_operands, gm, ins)
    add, big = nodes_of(gm, aten.add.Tensor)
    assert type(add.args[1]) is float and add.args[1] == -1.0
    assert type(big.args[1]) is int  # past 2**53: float() would round it
    (mul,) = nodes_of(gm, aten.mul.Tensor)
    assert type(mul.args[1]) is float
    (lt,) = nodes_of(gm, aten.lt.Scalar)
    assert type(lt.args[1]) is float
    assert_same(gm(*ins), f(*ins))


def test_nan_aware_arg_reductions_give_first_nan():
    def f(x):
        return torch.argmax(x, 1), torch.argmin(x, 1), torch.max(x, 1), torch.min(x, 0)

    ins = (torch.tensor([[1.0, NAN, 3.0, NAN], [2.0, 9.0, -1.0, 0.0], [NAN, 1.0, 2.0, 3.0]]),)
    gm = trace(f, *ins)
    run_pass(nan_aware_arg_reductions, gm, ins)
    assert len(nodes_of(gm, aten.isnan.default)) == 4  # one NaN test per reduction
    assert len(nodes_of(gm, aten.where.self)) >= 4
    assert_meta_matches(gm, ins)
    assert_same(gm(*ins), f(*ins))


def test_nan_aware_sort_sorts_on_an_ordered_key():
    def f(x, d):
        return (
            torch.sort(x, stable=True),
            torch.sort(x, descending=True),
            torch.topk(x, 2),  # no tie among the top 2 (ATen leaves ties unordered)
            torch.sort(d),
        )

    x = torch.tensor([[1.0, NAN, -3.0, 0.0, 9.0, -0.0, 0.0, 1.0]])
    ins = (x, torch.tensor([2.0, NAN, -1.0, 2.0, -0.0], dtype=torch.float64))
    gm = trace(f, *ins)
    run_pass(nan_aware_sort, gm, ins)
    assert aten.topk.default not in targets(gm)
    for s in nodes_of(gm, aten.sort.default) + nodes_of(gm, aten.sort.stable):
        assert s.args[0].meta["val"].dtype == torch.int64  # the ordered key, not the floats
    assert_meta_matches(gm, ins)
    assert_same(gm(*ins), f(*ins))


def test_self_equality_as_not_not_equal():
    def f(x, i):
        return x == x, i == i

    ins = (torch.tensor([1.0, NAN, -math.inf]), torch.tensor([1, 2]))
    gm = trace(f, *ins)
    run_pass(self_equality, gm, ins)
    (eq,) = nodes_of(gm, aten.eq.Tensor)  # the integer one is left
    assert eq.args[0].meta["val"].dtype == torch.int64
    (ne,) = nodes_of(gm, aten.ne.Tensor)
    assert nodes_of(gm, aten.logical_not.default)[0].args[0] is ne
    assert_same(gm(*ins), f(*ins))


def test_upcast_low_precision_reductions_accumulate_in_float32():
    def f(x):
        return x.sum(-1), x.mean(), torch.cumsum(x, 0), torch.linalg.vector_norm(x)

    torch.manual_seed(0)
    ins = (torch.randn(64, 7).to(torch.bfloat16),)
    gm = trace(f, *ins)
    run_pass(upcast_low_precision_reductions, gm, ins)
    for t in (aten.sum.dim_IntList, aten.mean.default, aten.cumsum.default):
        (n,) = nodes_of(gm, t)
        assert n.meta["val"].dtype == torch.float32
        (back,) = n.users
        assert back.target is aten._to_copy.default and back.kwargs["dtype"] == torch.bfloat16
    assert_meta_matches(gm, ins)
    assert_same(gm(*ins), f(*ins))  # ATen's CPU kernels accumulate in float32 too


def test_wrap_negative_indices_wraps_once():
    def f(x, i, j):
        return x[i], x[:, j], torch.ops.aten.index_put(x, [i], torch.tensor(-1.0))

    ins = (
        torch.arange(12.0).reshape(3, 4),
        torch.tensor([-1, 0, -3, 2]),
        torch.tensor([[-4], [3]]),
    )
    gm = trace(f, *ins)
    run_pass(wrap_negative_indices, gm, ins)
    wheres = nodes_of(gm, aten.where.self)
    assert len(wheres) == 3  # one per index tensor (i twice)
    for n in nodes_of(gm, aten.index.Tensor) + nodes_of(gm, aten.index_put.default):
        assert any(a in wheres for a in n.args[1] if a is not None)
    assert_meta_matches(gm, ins)
    assert_same(gm(*ins), f(*ins))
