"""Storage resize on neuron frees old bytes in stream order.

FSDP2 frees unsharded parameters with ``untyped_storage().resize_(0)`` while
kernels reading them may still be queued; the freed bytes must not be handed
to another stream before those kernels ran (found by the FSDP2 test of
tests/distributed/test_distributed.py: parameters silently off by ~0.1).
"""

import torch


def test_resize_to_zero_keeps_bytes_until_queued_readers_ran():
    torch.manual_seed(0)
    a = torch.randn(384, 384, device="neuron")
    x = torch.full((256, 256), 3.0, device="neuron")
    torch.neuron.synchronize()
    for _ in range(6):  # keep the default stream busy
        a = torch.tanh(a @ a / 384)
    z = x * 1  # queued reader of x's bytes
    x.untyped_storage().resize_(0)
    side = torch.neuron.Stream()
    with torch.neuron.stream(side):
        # Same size: the allocator's best fit is x's old block, if it was freed.
        y = torch.full((256, 256), -7.0, device="neuron")
    side.synchronize()
    assert torch.equal(z.cpu(), torch.full((256, 256), 3.0))
    assert torch.equal(y.cpu(), torch.full((256, 256), -7.0))


def test_resize_storage_round_trip():
    x = torch.arange(16.0, device="neuron")
    st = x.untyped_storage()
    st.resize_(0)
    assert st.nbytes() == 0
    st.resize_(16 * 4)
    x.copy_(torch.arange(16.0) * 2)
    assert torch.equal(x.cpu(), torch.arange(16.0) * 2)
