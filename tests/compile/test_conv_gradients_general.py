"""Convolution gradients that torch-mlir's ``convolution_backward`` lowering refused
(dilation, transposed convolutions, 3-d), now forward convolutions
(decompositions_conv._as_convolutions): input, weight and bias gradients against the
CPU, 1-d/2-d/3-d with dilation, stride, groups, padding and output_padding."""

import pytest
import torch
import torch.nn.functional as F
from compile_support import assert_compiled_gradients_match_cpu

import torchneuron  # noqa: F401

_CONV = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}
_CONV_T = {3: F.conv_transpose1d, 4: F.conv_transpose2d, 5: F.conv_transpose3d}

_CASES = {  # name: (input shape, weight shape, transposed, kwargs)
    "1d dilation 2": ((2, 4, 11), (6, 4, 3), False, dict(dilation=2, padding=1)),
    "1d dilation 3 stride 2 grouped": (
        (2, 4, 13),
        (6, 2, 3),
        False,
        dict(dilation=3, stride=2, groups=2),
    ),
    "2d dilation 2": ((2, 3, 9, 9), (4, 3, 3, 3), False, dict(dilation=2, padding=2)),
    "2d dilation (2, 1) stride (1, 2) on 10x9": (
        (1, 2, 10, 9),
        (3, 2, 3, 2),
        False,
        dict(dilation=(2, 1), stride=(1, 2), padding=(1, 0)),
    ),
    "2d depthwise dilation 2 stride 2": (
        (2, 4, 11, 12),
        (4, 1, 3, 3),
        False,
        dict(dilation=2, stride=2, padding=1, groups=4),
    ),
    "3d": ((2, 3, 5, 6, 5), (4, 3, 3, 2, 3), False, dict(padding=1)),
    "3d dilation 2 stride 2 grouped": (
        (1, 4, 7, 8, 7),
        (6, 2, 2, 3, 2),
        False,
        dict(dilation=2, stride=(2, 1, 2), padding=(1, 0, 1), groups=2),
    ),
    "transposed 1d": ((2, 4, 7), (4, 3, 3), True, dict()),
    "transposed 1d stride 2 output_padding 1": (
        (2, 4, 7),
        (4, 3, 3),
        True,
        dict(stride=2, padding=1, output_padding=1),
    ),
    "transposed 1d grouped dilation 2": (
        (2, 4, 6),
        (4, 2, 3),
        True,
        dict(groups=2, dilation=2, stride=3, output_padding=1),
    ),
    "transposed 2d stride 2": ((2, 4, 5, 5), (4, 3, 3, 3), True, dict(stride=2, padding=1)),
    "transposed 2d output_padding (1, 0)": (
        (2, 4, 5, 6),
        (4, 3, 3, 2),
        True,
        dict(stride=(2, 3), padding=(1, 0), output_padding=(1, 0)),
    ),
    "transposed 2d output_padding (2, 3) dilation": (
        (1, 2, 4, 4),
        (2, 3, 3, 3),
        True,
        dict(stride=(3, 4), dilation=(1, 2), output_padding=(2, 3)),
    ),
    "transposed 2d depthwise": ((2, 4, 5, 5), (4, 1, 3, 3), True, dict(groups=4, stride=2)),
    "transposed 3d stride 2 output_padding 1": (
        (1, 4, 3, 4, 3),
        (4, 2, 3, 3, 2),
        True,
        dict(stride=2, padding=1, output_padding=1, groups=2),
    ),
}


@pytest.mark.parametrize("name", list(_CASES))
def test_gradients_match_cpu(name):
    xs, ws, transposed, kw = _CASES[name]
    conv = (_CONV_T if transposed else _CONV)[len(xs)]
    bias = ws[1] * kw.get("groups", 1) if transposed else ws[0]

    def f(x, w, b):
        return (conv(x, w, b, **kw) ** 2).sum()

    g = torch.Generator().manual_seed(0)
    cpu = [
        torch.randn(xs, generator=g),
        torch.randn(ws, generator=g) * 0.3,
        torch.randn(bias, generator=g),
    ]
    assert_compiled_gradients_match_cpu(f, cpu)


def test_input_gradient_only_matches_cpu():
    """A frozen transposed convolution's weight: only the input gradient is asked for."""
    g = torch.Generator().manual_seed(1)
    x, w = torch.randn(2, 3, 6, 6, generator=g), torch.randn(3, 2, 3, 3, generator=g)

    def f(x, w):
        return F.conv_transpose2d(x, w, stride=2, dilation=2, output_padding=1).sin().sum()

    xn = x.to("neuron").requires_grad_()
    torch._dynamo.reset()
    torch.compile(f, backend="neuron")(xn, w.to("neuron")).backward()
    x.requires_grad_()
    f(x, w).backward()
    torch.testing.assert_close(xn.grad.cpu(), x.grad, atol=1e-4, rtol=1e-4)
