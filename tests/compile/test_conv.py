"""Convolutions whose kernel is larger than their input (the last ResNet stage's 3x3
over 2x2 maps): the compile path pads the input explicitly (passes/performance/
pad_small_conv_inputs.py) so that XLA does not swap the operands. Values: the same
convolution on CPU; structure: the graph as lowered (debug artifacts)."""

import pathlib

import pytest
import torch
import torch.nn.functional as F
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401

CASES = [  # (input shape, weight shape, kwargs, pass applies)
    ((8, 16, 2, 2), (32, 16, 3, 3), {"padding": 1}, True),
    ((2, 4, 2, 3), (6, 4, 3, 3), {"padding": (1, 2), "bias": True}, True),
    ((2, 4, 2, 3), (5, 4, 3, 3), {"padding": 1, "stride": 2}, True),
    ((2, 4, 3, 3), (5, 4, 3, 3), {"padding": 1}, False),  # kernel as large as input
    ((2, 4, 2, 2), (5, 4, 3, 3), {"padding": 2, "dilation": 2}, True),
    ((2, 4, 3), (5, 4, 5), {"padding": 2}, True),  # conv1d
    ((2, 4, 8, 8), (5, 4, 3, 3), {"padding": 1}, False),  # input larger: unchanged
    ((2, 4, 2, 2), (4, 1, 3, 3), {"padding": 1, "groups": 4}, False),  # grouped: unchanged
]


@pytest.mark.parametrize("xs, ws, kw, applies", CASES)
def test_small_input_conv_matches_cpu(xs, ws, kw, applies, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DEBUG_DIR", str(tmp_path / "dbg"))
    monkeypatch.setenv("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", "1")
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(xs, generator=g), torch.randn(ws, generator=g)
    kw = dict(kw)
    b = torch.randn(ws[0], generator=g) if kw.pop("bias", False) else None
    conv = F.conv1d if len(xs) == 3 else F.conv2d
    f = lambda x, w, b: conv(x, w, b, **kw)  # noqa: E731
    got = torch.compile(f, backend="neuron")(
        x.to("neuron"), w.to("neuron"), None if b is None else b.to("neuron")
    )
    want = f(x, w, b)
    assert got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    fx = "".join(p.read_text() for p in pathlib.Path(tmp_path / "dbg").rglob("fx_graph.txt"))
    assert ("constant_pad_nd" in fx) == applies, fx


def test_small_input_conv_training_matches_cpu():
    torch.manual_seed(0)
    ref = torch.nn.Conv2d(8, 8, 3, padding=1)
    mod = torch.nn.Conv2d(8, 8, 3, padding=1)
    mod.load_state_dict(ref.state_dict())
    mod.to("neuron")
    x = torch.randn(4, 8, 2, 2)
    xn = x.to("neuron").requires_grad_()
    x.requires_grad_()
    out = torch.compile(mod, backend="neuron")(xn)
    want = ref(x)
    torch.testing.assert_close(out.cpu(), want, rtol=1e-5, atol=1e-5)
    out.square().sum().backward()
    want.square().sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), x.grad, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(mod.weight.grad.cpu(), ref.weight.grad, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(
    "n, kw",
    [
        (2, dict(stride=(3, 2), padding=(1, 2), output_padding=(2, 3), groups=2, dilation=(4, 4))),
        (2, dict(stride=(2, 3), padding=(0, 1), output_padding=(1, 0))),
        (3, dict(stride=(2, 2, 3), padding=1, output_padding=(0, 1, 2))),
    ],
)
def test_transposed_convolution_with_uneven_output_padding_matches_cpu(n, kw):
    # torch-mlir applied an output_padding that differs between dims to the wrong dims
    # (22x22 inferred as 23x21: the compile failed); decompositions_conv.py
    torch.manual_seed(0)
    groups = kw.get("groups", 1)
    x = torch.randn(2, 2 * groups, *([5] * n))
    w = torch.randn(2 * groups, 3, *([3] * n))
    b = torch.randn(3 * groups)
    f = getattr(torch.nn.functional, f"conv_transpose{n}d")
    got = torch.compile(lambda *a: f(*a, **kw), backend="neuron")(
        x.to("neuron"), w.to("neuron"), b.to("neuron")
    )
    torch.testing.assert_close(got.cpu(), f(x, w, b, **kw), rtol=1e-5, atol=1e-4)
