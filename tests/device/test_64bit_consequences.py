"""The 64-bit policy's consequences, as docs/device.md states them (issue 7, section 5), and
the device-safe way of writing the same code."""

from __future__ import annotations

import warnings

import torch

import torchneuron  # noqa: F401


def _quiet(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn()


MASK = torch.tensor([[True, True, True], [False, True, True]])


def test_float64_finfo_min_mask_gives_nan_rows():
    s = torch.zeros(2, 3, dtype=torch.float64).masked_fill(MASK, torch.finfo(torch.float64).min)
    ref = torch.softmax(s, -1)
    got = _quiet(lambda: torch.softmax(s.to("neuron"), -1).cpu())
    assert not ref.isnan().any()
    assert got[0].isnan().all() and torch.equal(got[1], ref[1])  # the fully masked row
    assert _quiet(lambda: s.to("neuron") * 1).cpu()[0, 0].item() == float("-inf")
    # Device-safe: the compute dtype's own minimum gives the CPU's answer.
    safe = torch.zeros(2, 3, device="neuron").masked_fill(
        MASK.to("neuron"), torch.finfo(torch.float32).min
    )
    torch.testing.assert_close(torch.softmax(safe, -1).cpu(), ref.float())


def test_int64_arithmetic_wraps_at_32_bits_indices_do_not():
    a = torch.tensor([2**31 - 1, 3_000_000_000], dtype=torch.int64)
    d = a.to("neuron")
    assert torch.equal(d.cpu(), a)  # storage and copies are full width
    got = _quiet(lambda: (d + 1).cpu())
    assert got.tolist() == [-(2**31), 3_000_000_001 - 2**32]
    assert got.dtype == torch.int64
    # Indices are never narrowed: gather at an int64 index, values moved at full width.
    big = torch.arange(5, dtype=torch.int64) + 2**40
    idx = torch.tensor([4, 0])
    assert torch.equal(big.to("neuron")[idx.to("neuron")].cpu(), big[idx])
