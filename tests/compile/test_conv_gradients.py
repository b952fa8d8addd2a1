"""Convolution gradients in compiled graphs that torch-mlir's lowering of
``convolution_backward`` did not take (decompositions.convolution_backward): 1-d,
grouped/depthwise, and strides leaving input rows/columns past the last window; each
gradient against the CPU."""

import pytest
import torch
import torch.nn.functional as F
from compile_support import assert_compiled_gradients_match_cpu

import torchneuron  # noqa: F401

_CASES = {
    "1d": ((2, 4, 9), (6, 4, 3), dict()),
    "1d stride 2 padding 2": ((2, 4, 9), (6, 4, 3), dict(stride=2, padding=2)),
    "1d grouped": ((2, 4, 9), (4, 2, 3), dict(groups=2, padding=1)),
    "1d depthwise stride 2": ((2, 4, 10), (4, 1, 5), dict(groups=4, stride=2)),
    "2d grouped": ((2, 4, 8, 8), (4, 2, 3, 3), dict(groups=2, padding=1)),
    "2d depthwise stride 2": ((2, 4, 8, 8), (4, 1, 3, 3), dict(groups=4, stride=2)),
    "2d stride 2 on 8x7": ((2, 3, 8, 7), (4, 3, 3, 3), dict(stride=2, padding=1)),
    "2d stride (1, 2) on 10x10": ((1, 2, 10, 10), (3, 2, 5, 5), dict(stride=(1, 2))),
    "2d stride (3, 2)": ((1, 2, 11, 10), (3, 2, 2, 3), dict(stride=(3, 2), padding=(1, 0))),
    "2d depthwise stride 2 on 7x8": (
        (1, 4, 7, 8),
        (4, 1, 3, 3),
        dict(stride=2, padding=1, groups=4),
    ),
}


@pytest.mark.parametrize("name", list(_CASES))
def test_gradients_match_cpu(name):
    xs, ws, kw = _CASES[name]
    conv = F.conv1d if len(xs) == 3 else F.conv2d

    def f(x, w, b):
        return (conv(x, w, b, **kw) ** 2).sum()

    torch.manual_seed(0)
    cpu = [torch.randn(xs), torch.randn(ws) * 0.3, torch.randn(ws[0])]
    assert_compiled_gradients_match_cpu(f, cpu)


def test_conv1d_module_without_bias_weight_gradient_matches_cpu():
    torch.manual_seed(0)
    m = torch.nn.Conv1d(3, 4, 3, bias=False)
    mn = torch.nn.Conv1d(3, 4, 3, bias=False).to("neuron")
    mn.load_state_dict(m.state_dict())
    x = torch.randn(2, 3, 8)
    torch._dynamo.reset()
    torch.compile(mn, backend="neuron")(x.to("neuron")).sum().backward()
    m(x).sum().backward()
    torch.testing.assert_close(mn.weight.grad.cpu(), m.weight.grad, atol=1e-4, rtol=1e-4)
