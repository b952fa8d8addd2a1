"""``aten._batch_norm_with_update_functional`` and its gradient ``batch_norm_backward``
compiled against the CPU (decompositions_layers.py; both failed to lower naming the op)."""

import torch
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401

aten = torch.ops.aten


def _f(x, w, b, rm, rv):
    return aten._batch_norm_with_update_functional(x, w, b, rm, rv, 0.1, 1e-5)


def test_outputs_and_running_statistics():
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(4, 3, 5, generator=g), torch.randn(3, generator=g), torch.randn(3)
    rm, rv = torch.randn(3, generator=g), torch.rand(3, generator=g) + 0.5
    ref = _f(x, w, b, rm, rv)
    torch._dynamo.reset()
    got = torch.compile(_f, backend="neuron")(*(t.to("neuron") for t in (x, w, b, rm, rv)))
    assert len(got) == len(ref) == 6
    for gt, r in zip(got, ref):
        assert gt.dtype == r.dtype and gt.shape == r.shape
        torch.testing.assert_close(gt.cpu(), r)


def test_gradient():
    g = torch.Generator().manual_seed(1)
    x, w, b = (torch.randn(s, generator=g) for s in ((4, 3, 5), (3,), (3,)))
    rm, rv = torch.zeros(3), torch.ones(3)
    up = torch.randn(4, 3, 5, generator=g)
    leaves = [t.clone().requires_grad_() for t in (x, w, b)]
    ref = torch.autograd.grad((_f(*leaves, rm, rv)[0] * up).sum(), leaves)
    dev = [t.to("neuron").requires_grad_() for t in (x, w, b)]
    torch._dynamo.reset()
    out = torch.compile(lambda *a: _f(*a)[0], backend="neuron")(
        *dev, rm.to("neuron"), rv.to("neuron")
    )
    got = torch.autograd.grad((out * up.to("neuron")).sum(), dev)
    for gt, r in zip(got, ref):
        torch.testing.assert_close(gt.cpu(), r)
