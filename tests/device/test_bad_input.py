"""Bad input gets PyTorch's usual error types with clear messages, leaves the
inputs as they were, and the device usable: mixing CPU and neuron tensors
(or two cores) in one op, an invalid device index, an allocation past the
HBM capacity, a copy of a different shape, a shape error in an op."""

import gc

import pytest
import torch
from conftest import assert_device_works

N = torch.neuron
SAME_DEVICE = "Expected all tensors to be on the same device"


def _pair():
    a = torch.arange(6.0).reshape(2, 3)
    return a, a.neuron()


@pytest.mark.parametrize(
    "name,op",
    [
        ("add", lambda d, c: d + c),
        ("add reversed", lambda d, c: c + d),
        ("mul", lambda d, c: torch.mul(d, c)),
        ("mm", lambda d, c: d @ c.t()),
        ("cat", lambda d, c: torch.cat([d, c])),
        ("where", lambda d, c: torch.where(d > 2, d, c)),
        ("maximum", lambda d, c: torch.maximum(d, c)),
        ("linear", lambda d, c: torch.nn.functional.linear(d, c)),
    ],
)
def test_mixing_cpu_and_neuron_tensors(name, op):
    a, d = _pair()
    c = torch.ones(2, 3)
    with pytest.raises(RuntimeError, match=SAME_DEVICE) as info:
        op(d, c)
    assert "cpu" in str(info.value) and "neuron" in str(info.value)
    assert torch.equal(d.cpu(), a) and torch.equal(c, torch.ones(2, 3))
    assert_device_works()


def test_in_place_and_out_with_a_cpu_tensor_leave_everything_unchanged():
    a, d = _pair()
    c = torch.full((2, 3), 5.0)
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        d.add_(c)
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        c.add_(d)
    out = torch.full((2, 3), -1.0, device="neuron")
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        torch.add(d, c, out=out)
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        torch.add(d, d, out=torch.empty(2, 3))
    assert torch.equal(d.cpu(), a)
    assert torch.equal(c, torch.full((2, 3), 5.0))
    assert torch.equal(out.cpu(), torch.full((2, 3), -1.0))
    assert_device_works()


def test_error_names_the_argument_and_operator():
    _, d = _pair()
    with pytest.raises(RuntimeError, match=r"argument other in aten::sub\.Tensor"):
        d - torch.ones(2, 3)


def test_mixing_two_cores():
    a, d = _pair()
    e = a.to("neuron:1")
    with pytest.raises(RuntimeError, match=rf"{SAME_DEVICE}.*neuron:0 and neuron:1"):
        d + e
    assert torch.equal(d.cpu(), a) and torch.equal(e.cpu(), a)
    assert_device_works("neuron:0")
    assert_device_works("neuron:1")


def test_cpu_scalars_are_allowed_as_on_cuda():
    a, d = _pair()
    s = torch.tensor(2.0)  # a 0-dim CPU tensor is a scalar
    assert torch.equal((d * s).cpu(), a * 2)
    assert torch.equal(torch.where(d > 2, d, s).cpu(), torch.where(a > 2, a, s))


def test_cpu_index_tensors_are_allowed_as_on_cuda():
    a = torch.arange(12.0).reshape(3, 4)
    d = a.neuron()
    rows, cols = torch.tensor([0, 2]), torch.tensor([1, 3])
    assert torch.equal(d[rows].cpu(), a[rows])
    assert torch.equal(d[rows, cols].cpu(), a[rows, cols])
    mask = a > 5
    assert torch.equal(d[mask].cpu(), a[mask])  # a CPU bool mask
    assert torch.equal(d[d > 5].cpu(), a[mask])  # a device bool mask
    d[rows, cols] = torch.tensor(-1.0)
    ref = a.clone()
    ref[rows, cols] = -1.0
    assert torch.equal(d.cpu(), ref)
    d[d < 0] = 0.0
    ref[ref < 0] = 0.0
    assert torch.equal(d.cpu(), ref)


def test_module_on_the_device_with_a_cpu_input():
    m = torch.nn.Linear(3, 2).neuron()
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        m(torch.ones(4, 3))
    assert_device_works()


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.ones(2, device="neuron:4"),
        lambda: torch.empty(3, device=torch.device("neuron", 99)),
        lambda: torch.ones(2).to("neuron:5"),
        lambda: torch.ones(2).neuron(8),
        lambda: N.set_device(4),
        lambda: torch.Generator(device="neuron:6"),
        lambda: N.Stream(device=4),
        lambda: N.synchronize(4),
        lambda: N.memory_allocated(4),
    ],
)
def test_invalid_device_index(make):
    with pytest.raises(
        torch.AcceleratorError, match=r"invalid neuron device index \d+: 4 NeuronCore"
    ):
        make()
    assert N.current_device() == 0
    assert_device_works()


def test_out_of_memory_past_capacity_in_process():
    # 25 GiB on a 24 GiB core: refused before any memory is touched.
    # Earlier tests' tracebacks hold device tensors in reference cycles: collected first,
    # so that an automatic collection during the call cannot change the figure compared.
    gc.collect()
    before = N.memory_stats(0)["num_ooms"]
    allocated = N.memory_allocated(0)
    with pytest.raises(torch.OutOfMemoryError) as info:
        torch.empty(25 * 2**30, dtype=torch.uint8, device="neuron")
    msg = str(info.value)
    assert isinstance(info.value, RuntimeError)
    assert "NeuronCore 0 out of memory" in msg
    assert "tried to allocate 25.00 GiB" in msg and "allocated" in msg
    assert "capacity 24.00 GiB" in msg
    assert N.memory_stats(0)["num_ooms"] == before + 1
    assert N.memory_allocated(0) == allocated
    assert_device_works()
    # an op whose result cannot fit fails at the call, before anything runs
    big = torch.empty(2**30, dtype=torch.uint8, device="neuron").expand(26, 2**30)
    with pytest.raises(torch.OutOfMemoryError):
        big.contiguous()
    assert_device_works()


def test_copy_of_a_different_shape():
    a, d = _pair()
    dst = torch.zeros(3, 2, device="neuron")
    with pytest.raises(RuntimeError, match=r"cannot be broadcast"):
        dst.copy_(d)
    with pytest.raises(RuntimeError, match=r"cannot be broadcast"):
        torch.zeros(4, device="neuron:1").copy_(d)
    assert torch.equal(dst.cpu(), torch.zeros(3, 2)) and torch.equal(d.cpu(), a)
    assert_device_works()


@pytest.mark.parametrize(
    "op",
    [
        lambda d: d @ d,  # (2,3) @ (2,3)
        lambda d: d + torch.ones(4, device="neuron"),  # not broadcastable
        lambda d: d.add_(torch.ones(4, 2, 3, device="neuron")),  # in-place cannot grow
        lambda d: d.view(4),
        lambda d: torch.cat([d, torch.ones(2, 4, device="neuron")]),
        lambda d: d.sum(dim=5),
    ],
)
def test_shape_errors_raise_at_the_call(op):
    a, d = _pair()
    with pytest.raises((RuntimeError, IndexError)):
        op(d)
    assert torch.equal(d.cpu(), a)
    assert_device_works()
