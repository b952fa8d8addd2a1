"""Weight-gradient products ``x.T @ grad`` compiled through
``neuron_cc.transposed_lhs_dots`` (both of its forms): the CPU's gradients, and the
module rewrite itself (which dots it touches, which form it picks)."""

import pytest
import torch
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401
from torchneuron.compiler import neuron_cc


# (in, out): Linear's weight gradient grad.T @ x is [out, rows] @ [rows, in]: with 512 rows
# (512, 64) takes the barrier form, (128, 512) and (128, 1000) the transposed-product form
@pytest.mark.parametrize("fin,fout,form", [(512, 64, "_a "), (128, 512, "_t "), (128, 1000, "_t ")])
def test_linear_weight_gradients_match_cpu(fresh_compile_state, monkeypatch, fin, fout, form):  # noqa: F811
    rewritten = []
    real = neuron_cc.transposed_lhs_dots
    monkeypatch.setattr(
        neuron_cc, "transposed_lhs_dots", lambda t: rewritten.append(real(t)) or rewritten[-1]
    )
    torch.manual_seed(0)
    ref = torch.nn.Linear(fin, fout).double()
    dev = torch.nn.Linear(fin, fout).to("neuron")
    with torch.no_grad():
        dev.weight.copy_(ref.weight.float())
        dev.bias.copy_(ref.bias.float())
    x = torch.randn(8, 64, fin)
    w = torch.randn(8, 64, fout)

    def loss(m, a, b):
        return (torch.tanh(m(a)) * b).sum()

    loss(ref, x.double(), w.double()).backward()
    torch.compile(loss, backend="neuron")(dev, x.to("neuron"), w.to("neuron")).backward()
    for p, q in zip(ref.parameters(), dev.parameters()):
        torch.testing.assert_close(q.grad.cpu().double(), p.grad, rtol=1e-4, atol=1e-4)
    assert any(f"%ntd1{form}" in t for t in rewritten)  # the form under test was compiled


def test_matmul_of_transposed_operand_matches_cpu(fresh_compile_state):  # noqa: F811
    a = torch.randn(512, 96)
    b = torch.randn(512, 300)
    a[3, 5] = float("nan")
    b[7, 1] = float("inf")
    got = torch.compile(lambda x, y: x.t() @ y, backend="neuron")(a.to("neuron"), b.to("neuron"))
    ref = a.double().t() @ b.double()
    torch.testing.assert_close(got.cpu().double(), ref, rtol=1e-5, atol=1e-3, equal_nan=True)


def _module(r, m, n, lhs="%t"):
    return (
        f"    %t = stablehlo.transpose %a, dims = [1, 0] : (tensor<{r}x{m}xf32>) -> "
        f"tensor<{m}x{r}xf32>\n"
        f"    %d = stablehlo.dot_general {lhs}, %b, contracting_dims = [1] x [0] : "
        f"(tensor<{m}x{r}xf32>, tensor<{r}x{n}xf32>) -> tensor<{m}x{n}xf32>"
    )


def test_rewrite_forms():
    # lhs transposed, R*M <= R*N + M*N: the transpose kept behind a barrier
    lines = neuron_cc.transposed_lhs_dots(_module(512, 64, 512)).splitlines()
    assert lines[1:] == [
        "    %ntd1_a = stablehlo.optimization_barrier %t : tensor<64x512xf32>",
        "    %d = stablehlo.dot_general %ntd1_a, %b, contracting_dims = [1] x [0] : "
        "(tensor<64x512xf32>, tensor<512x512xf32>) -> tensor<64x512xf32>",
    ]
    # R*M > R*N + M*N: (b.T @ a).T
    lines = neuron_cc.transposed_lhs_dots(_module(512, 1000, 128)).splitlines()
    assert lines[1:] == [
        "    %ntd1_t = stablehlo.transpose %b, dims = [1, 0] : (tensor<512x128xf32>) -> "
        "tensor<128x512xf32>",
        "    %ntd1_b = stablehlo.optimization_barrier %ntd1_t : tensor<128x512xf32>",
        "    %ntd1_d = stablehlo.dot_general %ntd1_b, %a, contracting_dims = [1] x [0] : "
        "(tensor<128x512xf32>, tensor<512x1000xf32>) -> tensor<128x1000xf32>",
        "    %ntd1_e = stablehlo.optimization_barrier %ntd1_d : tensor<128x1000xf32>",
        "    %d = stablehlo.transpose %ntd1_e, dims = [1, 0] : (tensor<128x1000xf32>) -> "
        "tensor<1000x128xf32>",
    ]
    for kept in (
        _module(512, 64, 512, lhs="%a2"),  # lhs not a transpose
        _module(16, 16, 16),  # below 2^18 multiply-adds
        _module(512, 1, 512),  # a vector: not YNNPACK's
    ):
        assert neuron_cc.transposed_lhs_dots(kept) == kept
    assert "transposed-lhs-dots" in neuron_cc.compiler_version()  # part of the cache key
