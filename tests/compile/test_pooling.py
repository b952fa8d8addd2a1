"""max_pool2d and its gradient in compiled graphs (decompositions.py), against the CPU."""

import pytest
import torch
import torch.nn.functional as F

import torchneuron  # noqa: F401


@pytest.mark.parametrize(
    "shape,kw",
    [
        ((2, 3, 9, 9), dict(kernel_size=3, stride=2)),
        ((2, 3, 9, 9), dict(kernel_size=3, stride=2, ceil_mode=True)),
        ((2, 3, 8, 7), dict(kernel_size=3, stride=1, padding=1, dilation=2)),
        ((1, 3, 6, 10), dict(kernel_size=(2, 3), stride=(2, 1))),
        ((1, 2, 5, 5), dict(kernel_size=3, stride=1)),  # overlapping windows add up
    ],
)
def test_max_pool2d_gradient_matches_cpu(shape, kw):
    def f(x):
        y = F.max_pool2d(x, **kw)
        return (y * torch.arange(y.numel(), device=y.device).reshape(y.shape)).sum()

    torch.manual_seed(0)
    x = torch.randn(shape).round(decimals=1)  # ties: the first maximum, as ATen
    x.requires_grad_()
    xn = x.detach().to("neuron").requires_grad_()
    torch.compile(f, backend="neuron")(xn).backward()
    f(x).backward()
    assert torch.equal(xn.grad.cpu(), x.grad)


def test_cnn_training_step_matches_cpu():
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(3, 2, padding=1),
        torch.nn.Flatten(),
        torch.nn.Linear(4 * 4 * 4, 2),
    )
    torch.manual_seed(0)
    x, y = torch.randn(2, 3, 8, 8), torch.tensor([0, 1])
    ref = torch.nn.functional.cross_entropy(net(x), y)
    ref.backward()
    grads = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    net.to("neuron")
    out = torch.nn.functional.cross_entropy(
        torch.compile(net, backend="neuron")(x.to("neuron")), y.to("neuron")
    )
    out.backward()
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)
    for p, g in zip(net.parameters(), grads):
        torch.testing.assert_close(p.grad.cpu(), g, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "shape,kw",
    [
        ((1, 1, 1, 5), dict(kernel_size=(1, 2), ceil_mode=True)),  # gave [0, 2, 4], not [1, 3, 4]
        ((1, 2, 5, 7), dict(kernel_size=2, ceil_mode=True)),
        ((1, 2, 4, 6), dict(kernel_size=2)),  # stride left empty
        ((1, 2, 5, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
        ((2, 5, 7), dict(kernel_size=2, stride=2, dilation=2, ceil_mode=True)),
        ((1, 2, 5, 7), dict(kernel_size=(3, 2), stride=(2, 3), ceil_mode=True)),
    ],
)
def test_max_pool2d_values_and_indices_match_cpu(shape, kw):
    torch.manual_seed(0)
    x = torch.randn(shape)
    f = torch.compile(lambda a: F.max_pool2d(a, return_indices=True, **kw), backend="neuron")
    values, indices = f(x.to("neuron"))
    ref_values, ref_indices = F.max_pool2d(x, return_indices=True, **kw)
    assert torch.equal(values.cpu(), ref_values)
    assert torch.equal(indices.cpu(), ref_indices)


def test_max_pool1d_ceil_mode_gradient_matches_cpu():
    def f(x):
        y = torch.nn.functional.max_pool1d(x, 2, ceil_mode=True)
        return (y * torch.arange(y.numel(), device=y.device).reshape(y.shape)).sum()

    x = torch.randn(2, 3, 7).requires_grad_()
    xn = x.detach().to("neuron").requires_grad_()
    torch.compile(f, backend="neuron")(xn).backward()
    f(x).backward()
    assert torch.equal(xn.grad.cpu(), x.grad)


@pytest.mark.parametrize(
    "kw",
    [
        dict(kernel_size=3, stride=2, padding=1),
        dict(kernel_size=2),
        dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0)),
        dict(kernel_size=3, stride=2, ceil_mode=True),
        dict(kernel_size=3, stride=1, padding=1, dilation=2),  # not rewritten (dilation)
    ],
)
def test_inference_max_pool2d_channels_last_matches_cpu(kw):
    """Inference pools are spelled channels-last (passes/performance/channels_last_max_pool.py):
    the same values and NaN as ATen's NCHW pool."""
    x = torch.randn(2, 16, 13, 11, generator=torch.Generator().manual_seed(0))
    x[0, 3, 4, 5] = float("nan")
    f = lambda x: F.max_pool2d(torch.relu(x), **kw) * 2  # noqa: E731
    out = torch.compile(f, backend="neuron")(x.to("neuron")).cpu()
    torch.testing.assert_close(out, f(x), rtol=0, atol=0, equal_nan=True)


def test_max_pool2d_with_indices_keeps_indices():
    x = torch.randn(2, 16, 8, 8, generator=torch.Generator().manual_seed(1))
    f = lambda x: F.max_pool2d(x, 2, return_indices=True)  # noqa: E731
    out = torch.compile(f, backend="neuron")(x.to("neuron"))
    for o, r in zip(out, f(x)):
        assert torch.equal(o.cpu(), r)
