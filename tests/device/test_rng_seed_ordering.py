"""Seeding while draws are queued (a silent wrong result found for issue 7): draws read the
generator when their kernel runs, so reseeding on the host must wait for queued draws, or
`manual_seed(7); a = randn(); manual_seed(7); b = randn()` gives a != b."""

from __future__ import annotations

import torch

import torchneuron  # noqa: F401


def _busy():
    a = torch.randn(512, 512, device="neuron")
    for _ in range(4):
        a = a @ a / 512**0.5
    return a


def test_manual_seed_after_queued_draw():
    for seed_fn in (torch.neuron.manual_seed, torch.neuron.manual_seed_all, torch.manual_seed):
        _busy()
        seed_fn(7)
        a = torch.randn(16, device="neuron")
        seed_fn(7)
        b = torch.randn(16, device="neuron")
        assert torch.equal(a.cpu(), b.cpu()), seed_fn


def test_generator_object_reseed_and_state():
    g = torch.Generator("neuron")
    _busy()
    g.manual_seed(3)
    a = torch.randn(16, device="neuron", generator=g)
    g.manual_seed(3)
    b = torch.randn(16, device="neuron", generator=g)
    assert torch.equal(a.cpu(), b.cpu())
    _busy()
    s = g.get_state()
    c = torch.rand(8, device="neuron", generator=g)
    g.set_state(s)
    d = torch.rand(8, device="neuron", generator=g)
    assert torch.equal(c.cpu(), d.cpu())
    # The CPU's numbers for the same seed.
    g.manual_seed(11)
    assert torch.equal(
        torch.randn(16, device="neuron", generator=g).cpu(),
        torch.randn(16, generator=torch.Generator().manual_seed(11)),
    )
