"""Sums over leading dimensions (bias and layer-norm weight gradients) compiled through
``neuron_cc.column_sums_2d``: the same values as the CPU's, NaN and infinities
propagated, and the module rewrite itself (which reduces it touches)."""

import pytest
import torch
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401
from torchneuron.compiler import neuron_cc

_SHAPES = [((8, 64, 512), (0, 1)), ((512, 384), (0,)), ((4, 16, 3, 128), (0, 1)), ((40, 7), (0,))]


@pytest.mark.parametrize("shape,dims", _SHAPES)
def test_column_sums_match_cpu(fresh_compile_state, shape, dims):  # noqa: F811
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    f = torch.compile(lambda a: (a.sum(dims), a.mean(dims), (a * a).sum(dims)), backend="neuron")
    got = f(x.to("neuron"))
    ref = (x.double().sum(dims), x.double().mean(dims), (x.double() * x.double()).sum(dims))
    for g, r in zip(got, ref):
        # float32 sums of up to 512 values: within a few ulps of the float64 sum's magnitude
        torch.testing.assert_close(g.cpu().double(), r, rtol=1e-5, atol=2e-5 * shape[0])


def test_column_sums_propagate_nan_and_inf(fresh_compile_state):  # noqa: F811
    x = torch.randn(8, 64, 16)
    x[3, 5, 0] = float("nan")
    x[0, 0, 1] = float("inf")
    x[7, 63, 2], x[1, 2, 2] = float("inf"), float("-inf")
    x[2, 2, 3] = float("-inf")
    got = torch.compile(lambda a: a.sum((0, 1)), backend="neuron")(x.to("neuron")).cpu()
    ref = x.sum((0, 1))
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-4, equal_nan=True)
    assert got[0].isnan() and got[2].isnan() and got[1] == float("inf") and got[3] == -float("inf")


def test_linear_layer_norm_backward_matches_cpu(fresh_compile_state):  # noqa: F811
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(128, 512), torch.nn.LayerNorm(512))
    dev = torch.nn.Sequential(torch.nn.Linear(128, 512), torch.nn.LayerNorm(512))
    dev.load_state_dict(ref.state_dict())
    dev = dev.to("neuron")
    x = torch.randn(8, 64, 128)
    w = torch.randn(8, 64, 512)

    def loss(m, a, b):
        return (m(a) * b).sum()

    loss(ref, x, w).backward()
    torch.compile(loss, backend="neuron")(dev, x.to("neuron"), w.to("neuron")).backward()
    for p, q in zip(ref.parameters(), dev.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-4, atol=1e-4)


_REDUCE = (
    "    %{res} = stablehlo.reduce(%x init: %cst) applies stablehlo.{op} across dimensions = "
    "[{dims}] : (tensor<{shape}xf32>, tensor<f32>) -> tensor<{out}xf32>"
)


def _reduce(res, op, dims, shape, out):
    return _REDUCE.format(res=res, op=op, dims=dims, shape=shape, out=out).replace(
        "tensor<xf32>", "tensor<f32>"
    )


def test_rewrite_only_touches_float32_sums_over_leading_dimensions():
    kept = [
        _reduce("1", "add", "2", "8x64x128", "8x64"),  # a row sum
        _reduce("2", "maximum", "0, 1", "8x64x128", "128"),  # not a sum
        _reduce("3", "add", "1", "8x64x128", "8x128"),  # a middle dimension
        _reduce("4", "add", "0", "8x128", "128"),  # 8 rows: XLA does not split it
        _reduce("5", "add", "0, 1", "8x64", ""),  # a full reduction
    ]
    for line in kept:
        assert neuron_cc.column_sums_2d(line) == line
    rewritten = neuron_cc.column_sums_2d(_reduce("6", "add", "0, 1", "8x64x4x32", "4x32"))
    assert rewritten.splitlines() == [
        "    %ncs1_x = stablehlo.reshape %x : (tensor<8x64x4x32xf32>) -> tensor<512x128xf32>",
        "    %ncs1_b = stablehlo.optimization_barrier %ncs1_x : tensor<512x128xf32>",
        "    %ncs1_s = stablehlo.reduce(%ncs1_b init: %cst) applies stablehlo.add across "
        "dimensions = [0] : (tensor<512x128xf32>, tensor<f32>) -> tensor<128xf32>",
        "    %6 = stablehlo.reshape %ncs1_s : (tensor<128xf32>) -> tensor<4x32xf32>",
    ]
    assert "column-sums-2d" in neuron_cc.compiler_version()  # part of the cache key
