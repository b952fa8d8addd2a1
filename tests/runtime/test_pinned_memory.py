"""Pinned host memory: pin_memory(), pin_memory=True factories and DataLoader give pinned
tensors from the pinned host allocator; non_blocking copies from/to pinned memory are
queued on the stream (unstaged) and stay ordered and correct (issue 7, section 2)."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import torchneuron


def _busy(device="neuron"):
    """Queue a few hundred ms of work on the current stream, so that what is queued after
    it is still pending when the host looks (no timing is asserted)."""
    a = torch.randn(768, 768, device=device)
    for _ in range(6):
        a = a @ a / 768**0.5
    return a


def test_pin_memory_gives_pinned_tensors():
    x = torch.randn(5, 7)
    p = x.pin_memory()
    assert p.is_pinned() and not x.is_pinned()
    assert torch.equal(p, x) and p.data_ptr() != x.data_ptr()
    assert p.pin_memory().data_ptr() == p.data_ptr()  # already pinned: itself, as CUDA
    e = torch.empty(3, 4, pin_memory=True)
    assert e.is_pinned() and e.device.type == "cpu"
    assert torch.empty_strided((2, 3), (1, 2), pin_memory=True).is_pinned()
    # A view or slice of pinned memory is pinned (the pointer lies in a pinned block).
    assert p[2:, 1:].is_pinned()
    stats = torchneuron._C._pinned_host_stats()
    assert stats["mapped_bytes"] >= 4096


def test_pin_memory_of_a_device_tensor_raises():
    with pytest.raises(RuntimeError, match="only dense CPU tensors can be pinned"):
        torch.ones(3, device="neuron").pin_memory()
    assert not torch.ones(3, device="neuron").is_pinned()


def test_dataloader_pin_memory():
    ds = TensorDataset(torch.arange(24.0).reshape(12, 2), torch.arange(12))
    batches = list(DataLoader(ds, batch_size=5, pin_memory=True))
    assert len(batches) == 3
    for xb, yb in batches:
        assert xb.is_pinned() and yb.is_pinned()
    assert torch.equal(torch.cat([b[0] for b in batches]), ds.tensors[0])


def test_non_blocking_h2d_from_pinned_is_ordered():
    _busy()
    outs = []
    for i in range(4):
        p = torch.full((1000,), float(i)).pin_memory()
        d = p.to("neuron", non_blocking=True)  # queued behind the busy work
        outs.append(d * 2 + 1)
    for i, o in enumerate(outs):
        assert torch.equal(o.cpu(), torch.full((1000,), 2.0 * i + 1))


def test_pinned_block_not_reused_while_a_copy_is_queued():
    _busy()
    p = torch.full((4096,), 7.0).pin_memory()
    ptr = p.data_ptr()
    d = p.to("neuron", non_blocking=True)
    del p  # the queued copy still holds the block
    q = torch.empty(4096, pin_memory=True)
    assert q.data_ptr() != ptr
    q.fill_(-1.0)
    assert torch.equal(d.cpu(), torch.full((4096,), 7.0))


def test_non_blocking_d2h_into_pinned_and_pageable():
    _busy()
    d = torch.arange(5000.0, device="neuron") * 3
    pageable = torch.zeros(5000)
    pageable.copy_(d, non_blocking=True)
    # As CUDA: into pageable memory the copy is synchronous, the values are there now.
    assert torch.equal(pageable, torch.arange(5000.0) * 3)
    _busy()
    d2 = torch.arange(5000.0, device="neuron") + 1
    pinned = torch.zeros(5000, pin_memory=True)
    pinned.copy_(d2, non_blocking=True)
    torch.neuron.synchronize()
    assert torch.equal(pinned, torch.arange(5000.0) + 1)


def test_copy_on_side_stream_with_event_ordering():
    side = torch.neuron.Stream()
    host = torch.randn(256, 256).pin_memory()
    w = torch.randn(256, 256, device="neuron")
    _busy()
    with torch.neuron.stream(side):
        x = host.to("neuron", non_blocking=True)
        done = torch.neuron.Event()
        done.record(side)
    torch.neuron.current_stream().wait_event(done)
    x.record_stream(torch.neuron.current_stream())
    y = x @ w
    torch.testing.assert_close(y.cpu(), host @ w.cpu())
