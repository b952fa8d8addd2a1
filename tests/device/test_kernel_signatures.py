"""Kernel signatures: on Trainium each new (op, shapes, dtypes, static attributes) of an
eager op compiles a kernel; torch.neuron.kernel_signature_stats() counts them."""

import torch


def _loop(shapes, dtype=torch.float32):
    for n in shapes:
        x = torch.ones(n, 8, dtype=dtype, device="neuron")
        (x * 2.0 + x).sum(dim=1)
    torch.neuron.synchronize()


def test_fixed_shapes_compile_once():
    _loop([16])  # warm-up: whatever is new is counted here
    torch.neuron.reset_kernel_signature_stats()
    _loop([16] * 5)
    assert torch.neuron.kernel_signature_stats() == {}


def test_changing_shapes_count_one_signature_per_op_and_shape():
    torch.neuron.reset_kernel_signature_stats()
    _loop([1001, 1002, 1003, 1002])  # three new shapes, one repeated
    stats = torch.neuron.kernel_signature_stats()
    for op in ("aten::mul.Tensor", "aten::add.Tensor", "aten::sum.dim_IntList"):
        assert stats.get(op) == 3, stats


def test_static_attributes_count_float_operands_do_not():
    x = torch.ones(37, 5, device="neuron")
    torch.neuron.reset_kernel_signature_stats()
    for d in (0, 1, 0):
        x.sum(dim=d)
    for s in (2.0, 3.0, 4.5):
        x * s  # a runtime operand: one kernel
    torch.neuron.synchronize()
    stats = torch.neuron.kernel_signature_stats()
    assert stats["aten::sum.dim_IntList"] == 2 and stats["aten::mul.Tensor"] == 1


def test_dtype_is_part_of_the_signature():
    torch.neuron.reset_kernel_signature_stats()
    for dt in (torch.float32, torch.bfloat16, torch.float32):
        torch.ones(3, 41, dtype=dt, device="neuron").neg()
    torch.neuron.synchronize()
    assert torch.neuron.kernel_signature_stats()["aten::neg"] == 2
