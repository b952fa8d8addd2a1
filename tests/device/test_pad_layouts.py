"""Padding keeps the input's memory format as the CPU does (issue 23:
ReflectionPad3d / ReplicationPad3d returned contiguous results for
channels_last_3d inputs): values, strides and gradients against the CPU."""

import warnings

import pytest
import torch

PADS = {
    "reflection3d": (torch.nn.ReflectionPad3d((1, 2, 0, 1, 2, 0)), 5, torch.channels_last_3d),
    "replication3d": (torch.nn.ReplicationPad3d((1, 2, 0, 1, 2, 0)), 5, torch.channels_last_3d),
    "constant3d": (torch.nn.ConstantPad3d(1, 0.5), 5, torch.channels_last_3d),
    "circular3d": (torch.nn.CircularPad3d(1), 5, torch.channels_last_3d),
    "reflection2d": (torch.nn.ReflectionPad2d((1, 2, 2, 0)), 4, torch.channels_last),
    "replication2d": (torch.nn.ReplicationPad2d((1, 2, 2, 0)), 4, torch.channels_last),
    "zero2d": (torch.nn.ZeroPad2d(1), 4, torch.channels_last),
    "circular2d": (torch.nn.CircularPad2d(1), 4, torch.channels_last),
}


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("name", sorted(PADS))
def test_pad_keeps_memory_format_values_and_gradients(name, batch):
    pad, rank, fmt = PADS[name]
    shape = (batch, 3, 4, 5, 6)[:rank]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=g).to(memory_format=fmt).requires_grad_()
    d = x.detach().neuron().requires_grad_()
    assert d.stride() == x.stride()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref, got = pad(x), pad(d)
        assert got.stride() == ref.stride()
        assert got.is_contiguous(memory_format=fmt) == ref.is_contiguous(memory_format=fmt)
        torch.testing.assert_close(got.cpu(), ref)
        w = torch.randn(ref.shape, generator=g)
        (gx,) = torch.autograd.grad((ref * w).sum(), x)
        (gd,) = torch.autograd.grad((got * w.neuron()).sum(), d)
    assert gd.stride() == gx.stride()
    torch.testing.assert_close(gd.cpu(), gx)
