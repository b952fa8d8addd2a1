"""Operands are taken at the call, not when the queued kernel runs.

A CPU 0-dim tensor mixed into a device op is a scalar operand: CUDA reads its
value when the op is called. The emulator queues kernels behind a slow one, so
a later in-place change of that scalar must not reach the queued kernel.
"""

import pytest
import torch


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_cpu_scalar_operand_is_read_at_the_call(dtype):
    # A large matmul keeps the queue busy, so `y * s` is still pending when s changes.
    x_cpu = (torch.arange(256 * 256) % 7).reshape(256, 256).to(dtype)
    x = x_cpu.to("neuron")
    s, s_ref = torch.tensor(2, dtype=dtype), torch.tensor(2, dtype=dtype)
    got, want = [], []
    for _ in range(6):
        got.append(torch.mm(x, x) * s)
        s.add_(1)
        want.append(torch.mm(x_cpu, x_cpu) * s_ref)
        s_ref.add_(1)
    for g, w in zip(got, want):
        assert torch.equal(g.cpu(), w)


def test_cpu_scalar_operand_of_an_inplace_op_is_read_at_the_call():
    x_cpu = torch.rand(512, 512)
    x = x_cpu.to("neuron")
    acc, acc_ref = torch.zeros(512, 512, device="neuron"), torch.zeros(512, 512)
    alpha = torch.tensor(1.0)
    for i in range(4):
        y = torch.mm(x, x)
        acc.add_(y * alpha)
        acc_ref.add_(torch.mm(x_cpu, x_cpu) * (i + 1.0))
        alpha.fill_(i + 2.0)
    torch.testing.assert_close(acc.cpu(), acc_ref)


def test_cpu_scalar_operand_that_is_conjugated_or_negated():
    z = torch.tensor(1 + 2j)
    x = torch.ones(3, dtype=torch.complex64, device="neuron")
    assert torch.equal((x * z.conj()).cpu(), torch.ones(3, dtype=torch.complex64) * (1 - 2j))
    assert torch.equal((x * torch.neg(z)).cpu(), torch.ones(3, dtype=torch.complex64) * (-1 - 2j))


@pytest.mark.parametrize("non_blocking", [False, True])
def test_zero_dim_tensors_cross_both_ways(non_blocking):
    # A 0-dim CPU tensor as a copy's destination is written, not snapshot.
    for v in (torch.tensor(3.5), torch.tensor(-7), torch.tensor(True)):
        d = v.to("neuron", non_blocking=non_blocking)
        back = torch.empty_like(v)
        back.copy_(d, non_blocking=non_blocking)
        torch.neuron.synchronize()
        assert torch.equal(back, v) and torch.equal(d.cpu(), v)
    x = torch.tensor([1.0, 2.0, 4.0], device="neuron")
    assert x.sum().cpu().item() == 7.0 and (x.sum() * 3).item() == 21.0
