"""Copies: host to device, device to host, device to device on one core and
between cores, non_blocking, dtype conversion, non-contiguous layouts,
broadcasting, and the error for a shape that does not fit."""

import pytest
import torch
from conftest import assert_device_works

DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int64,
    torch.int32,
    torch.int8,
    torch.uint8,
    torch.bool,
    torch.complex64,
]


def _sample(dtype, shape=(3, 5)):
    g = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype, generator=g)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 100).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(max(info.min, -1000), min(info.max, 1000), shape, generator=g, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_round_trip_is_bit_exact(dtype):
    x = _sample(dtype)
    d = x.to("neuron")
    assert d.device.type == "neuron" and d.dtype == dtype and d.shape == x.shape
    assert torch.equal(d.cpu(), x)


def test_64bit_values_survive_copies():
    # Copies move bytes: the 64-bit policy applies to compute, never to storage.
    x = torch.tensor([1.0 + 1e-12, 2.0**60 + 1.0], dtype=torch.float64)
    i = torch.tensor([2**62 + 7, -(2**40) - 3], dtype=torch.int64)
    assert torch.equal(x.neuron().cpu(), x)
    assert torch.equal(i.neuron().cpu(), i)
    assert torch.equal(x.neuron().to("neuron:1").clone().cpu(), x)


def test_copy_into_existing_tensors():
    x = torch.randn(4, 4)
    d = torch.empty(4, 4, device="neuron")
    assert d.copy_(x) is d
    host = torch.empty(4, 4)
    host.copy_(d)
    assert torch.equal(host, x)


def test_device_to_device_same_core():
    x = torch.randn(8, 3)
    a = x.neuron()
    b = a.clone()
    c = torch.empty_like(a).copy_(a)
    a.zero_()  # the copies are independent storage
    assert torch.equal(b.cpu(), x) and torch.equal(c.cpu(), x)
    assert torch.equal(a.cpu(), torch.zeros(8, 3))


@pytest.mark.parametrize("src,dst", [(0, 1), (1, 0), (2, 3)])
def test_between_cores(src, dst):
    x = torch.randn(5, 7)
    a = x.to(f"neuron:{src}")
    b = a.to(f"neuron:{dst}")
    assert b.device == torch.device("neuron", dst)
    assert torch.equal(b.cpu(), x)
    # into an existing tensor, from work still queued on the source core
    y = a * 2
    out = torch.empty(5, 7, device=f"neuron:{dst}")
    out.copy_(y)
    assert torch.equal(out.cpu(), x * 2)
    # a strided source and a dtype change across cores
    z = torch.empty(7, 5, dtype=torch.float64, device=f"neuron:{dst}")
    z.copy_(a.t())
    assert torch.equal(z.cpu(), x.t().double())


def test_non_blocking_copies_then_synchronize():
    x = torch.randn(256, 256)
    d = x.to("neuron", non_blocking=True)
    y = (d * 2).to("cpu", non_blocking=True)
    torch.neuron.synchronize()
    assert torch.equal(y, x * 2)
    # an explicit host destination
    host = torch.empty(256, 256)
    host.copy_(d + 1, non_blocking=True)
    torch.neuron.current_stream().synchronize()
    assert torch.equal(host, x + 1)


def test_blocking_copy_to_host_waits_for_queued_work():
    a = torch.randn(300, 300)
    d = a.neuron()
    for _ in range(5):
        d = d @ d.t() / 300.0
    ref = a
    for _ in range(5):
        ref = ref @ ref.t() / 300.0
    # .cpu() is a sync point: no synchronize() needed.
    torch.testing.assert_close(d.cpu(), ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "src_dtype,dst_dtype",
    [
        (torch.float32, torch.float16),
        (torch.float32, torch.int32),
        (torch.int64, torch.float32),
        (torch.float64, torch.float32),
        (torch.bfloat16, torch.float64),
        (torch.int32, torch.bool),
        (torch.float32, torch.complex64),
    ],
)
def test_dtype_converting_copies(src_dtype, dst_dtype):
    x = _sample(src_dtype)
    ref = x.to(dst_dtype)
    # host to device, device to device, device to host
    assert torch.equal(x.to("neuron", dtype=dst_dtype).cpu(), ref)
    assert torch.equal(x.neuron().to(dst_dtype).cpu(), ref)
    host = torch.empty(x.shape, dtype=dst_dtype)
    host.copy_(x.neuron())
    assert torch.equal(host, ref)
    dev = torch.empty(x.shape, dtype=dst_dtype, device="neuron")
    dev.copy_(x)
    assert torch.equal(dev.cpu(), ref)


def test_non_contiguous_sources_and_destinations():
    x = torch.arange(60.0).reshape(3, 4, 5)
    d = x.neuron()
    for view in (
        lambda t: t.transpose(0, 2),
        lambda t: t[:, ::2, 1:],
        lambda t: t.permute(1, 2, 0),
        lambda t: t[1],
        lambda t: t.unsqueeze(1).expand(3, 2, 4, 5),
    ):
        assert torch.equal(view(d).cpu(), view(x))  # d2h of a view
        assert torch.equal(view(x).neuron().cpu(), view(x))  # h2d of a view
        assert torch.equal(view(d).contiguous().cpu(), view(x))  # d2d into contiguous
    # into a strided destination on the device
    dst = torch.zeros(5, 4, 3, device="neuron").transpose(0, 2)
    dst.copy_(x)
    assert torch.equal(dst.cpu(), x)
    # a view of a device tensor written from the host leaves the rest alone
    d2 = torch.zeros(4, 6, device="neuron")
    d2[:, 1::2].copy_(torch.ones(4, 3))
    ref = torch.zeros(4, 6)
    ref[:, 1::2] = 1
    assert torch.equal(d2.cpu(), ref)


def test_broadcast_copies():
    row = torch.tensor([1.0, 2.0, 3.0])
    dst = torch.empty(4, 3, device="neuron")
    dst.copy_(row)  # host to device
    assert torch.equal(dst.cpu(), row.expand(4, 3))
    dst.copy_(row.neuron() * 2)  # device to device
    assert torch.equal(dst.cpu(), row.expand(4, 3) * 2)
    host = torch.empty(2, 3)
    host.copy_(row.neuron())  # device to host
    assert torch.equal(host, row.expand(2, 3))
    col = torch.empty(3, 4, device="neuron:1")
    col.copy_(torch.tensor([[7.0], [8.0], [9.0]]).neuron(0))  # between cores
    assert torch.equal(col.cpu(), torch.tensor([[7.0], [8.0], [9.0]]).expand(3, 4))
    scalar = torch.empty(2, 2, device="neuron")
    scalar.copy_(torch.tensor(5.0))
    assert torch.equal(scalar.cpu(), torch.full((2, 2), 5.0))


def test_empty_and_scalar_copies():
    e = torch.empty(0, 3).neuron()
    assert e.shape == (0, 3) and e.cpu().shape == (0, 3)
    s = torch.tensor(3.5).neuron()
    assert s.dim() == 0 and s.item() == 3.5


def test_zero_dim_device_to_host_copies_write_the_destination():
    # A 0-dim host destination is written by the queued copy, not a snapshot of it.
    s = torch.tensor(3.5).neuron()
    assert torch.equal(s.cpu(), torch.tensor(3.5))
    assert torch.equal(torch.ones(4, device="neuron").sum().cpu(), torch.tensor(4.0))
    dst = torch.zeros(())
    dst.copy_(s)
    assert dst.item() == 3.5
    pinned = torch.zeros(()).pin_memory()
    pinned.copy_(s, non_blocking=True)
    torch.neuron.synchronize()
    assert pinned.item() == 3.5


@pytest.mark.parametrize("kind", ["h2d", "d2h", "d2d", "core to core"])
def test_shape_mismatch_raises_and_leaves_device_usable(kind):
    src_cpu = torch.arange(6.0).reshape(2, 3)
    if kind == "h2d":
        src, dst = src_cpu, torch.full((3, 3), -1.0, device="neuron")
    elif kind == "d2h":
        src, dst = src_cpu.neuron(), torch.full((3, 3), -1.0)
    elif kind == "d2d":
        src, dst = src_cpu.neuron(), torch.full((3, 3), -1.0, device="neuron")
    else:
        src, dst = src_cpu.neuron(0), torch.full((3, 3), -1.0, device="neuron:1")
    with pytest.raises(RuntimeError, match=r"\[2, 3\].*\[3, 3\]"):
        dst.copy_(src)
    # Nothing was written, and both tensors and the device still work.
    assert torch.equal(dst.cpu(), torch.full((3, 3), -1.0))
    assert torch.equal(src.cpu(), src_cpu)
    assert_device_works()
    assert_device_works("neuron:1")


def test_non_blocking_copy_takes_the_host_bytes_at_once():
    # Pageable host memory is staged (as CUDA does): reusing the source
    # buffer right after a non_blocking copy must not change the device data.
    x = torch.arange(100_000, dtype=torch.float32)
    y = x.to("neuron", non_blocking=True)
    x.fill_(-1)
    assert torch.equal(y.cpu(), torch.arange(100_000, dtype=torch.float32))
