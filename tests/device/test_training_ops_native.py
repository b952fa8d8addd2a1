"""The losses, selection and padding ops training and decoding programs hit run
natively on neuron (no CPU fallback) with the CPU's results, gradients included.
The reducing forwards of mse/smooth_l1/huber/binary_cross_entropy run without their out=
CPU kernel (it resizes its 0-dim out, which device memory refuses); their out= overloads
take the CPU fallback."""

import warnings

import pytest
import torch
import torch.nn.functional as F

import torchneuron  # noqa: F401

g = torch.Generator().manual_seed(0)


def _r(*shape, lo=0.0, hi=1.0):
    return torch.rand(*shape, generator=g) * (hi - lo) + lo


CASES = {
    "mse_loss": lambda x, t: F.mse_loss(x, t),
    "smooth_l1_loss": lambda x, t: F.smooth_l1_loss(x, t, beta=0.5),
    "huber_loss": lambda x, t: F.huber_loss(x, t, delta=0.5),
    "l1_loss": lambda x, t: F.l1_loss(x, t),
    "binary_cross_entropy": lambda x, t: F.binary_cross_entropy(torch.sigmoid(x), t),
    "bce_with_logits": lambda x, t: F.binary_cross_entropy_with_logits(x, t),
    "log_sigmoid": lambda x, t: F.logsigmoid(x).sum(),
    "kl_div": lambda x, t: F.kl_div(F.log_softmax(x, -1), F.softmax(t, -1), reduction="batchmean"),
    "reflection_pad1d": lambda x, t: F.pad(x, (2, 1), mode="reflect").pow(2).sum(),
    "reflection_pad2d": lambda x, t: F.pad(x[None], (2, 1, 1, 2), mode="reflect").pow(2).sum(),
    "reflection_pad3d": lambda x, t: (
        F.pad(x.reshape(1, 2, 2, 6), (1, 1, 1, 1, 1, 1), mode="reflect").pow(2).sum()
    ),
    "replication_pad1d": lambda x, t: F.pad(x, (2, 1), mode="replicate").pow(2).sum(),
    "replication_pad2d": lambda x, t: F.pad(x[None], (2, 1, 1, 2), mode="replicate").pow(2).sum(),
    "replication_pad3d": lambda x, t: (
        F.pad(x.reshape(1, 2, 2, 6), (1, 1, 1, 1, 1, 1), mode="replicate").pow(2).sum()
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_loss_and_padding_forward_backward_native(name):
    fn = CASES[name]
    x, t = _r(4, 6, lo=-2, hi=2), _r(4, 6)
    xc = x.clone().requires_grad_()
    xn = x.to("neuron").requires_grad_()
    ref = fn(xc, t)
    ref.backward()
    torch.neuron.reset_fallback_stats()
    out = fn(xn, t.to("neuron"))
    out.backward()
    torch.neuron.synchronize()
    assert torch.neuron.fallback_stats() == {}, name
    torch.testing.assert_close(out.cpu(), ref)
    torch.testing.assert_close(xn.grad.cpu(), xc.grad)


def test_topk_sort_floor_divide_native_and_exact():
    x = _r(5, 50)
    x[0, :10] = 0.5  # ties: stable sort keeps input order
    big = torch.tensor([2**40 + 3, 2**40 + 1, 5, 2**40 + 2])  # int64 beyond int32
    a, b = torch.tensor([7, -7, 9, -9]), torch.tensor([2, 2, -4, 4])
    torch.neuron.reset_fallback_stats()
    xn = x.to("neuron")
    got = {
        "topk": [t.cpu() for t in xn.topk(7, dim=-1)],
        "sort": [t.cpu() for t in xn.sort(dim=-1, stable=True)],
        "sort_desc": [t.cpu() for t in xn.sort(dim=-1, descending=True, stable=True)],
        "big": [t.cpu() for t in big.to("neuron").sort()],
        "big_topk": [t.cpu() for t in big.to("neuron").topk(2)],
        "fdiv": torch.floor_divide(a.to("neuron"), b.to("neuron")).cpu(),
        "fdiv_f": torch.floor_divide(xn, 0.3).cpu(),
    }
    assert torch.neuron.fallback_stats() == {}
    want = {
        "topk": list(x.topk(7, dim=-1)),
        "sort": list(x.sort(dim=-1, stable=True)),
        "sort_desc": list(x.sort(dim=-1, descending=True, stable=True)),
        "big": list(big.sort()),
        "big_topk": list(big.topk(2)),
        "fdiv": torch.floor_divide(a, b),
        "fdiv_f": torch.floor_divide(x, 0.3),
    }
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=0, atol=0, msg=k)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_native(mode):
    w = _r(20, 4)
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
    off = torch.tensor([0, 4])
    bag = torch.nn.EmbeddingBag.from_pretrained(w, mode=mode, freeze=False)
    ref = bag(idx, off)
    ref.pow(2).sum().backward()
    bn = torch.nn.EmbeddingBag.from_pretrained(w.clone(), mode=mode, freeze=False).to("neuron")
    torch.neuron.reset_fallback_stats()
    out = bn(idx.to("neuron"), off.to("neuron"))
    out.pow(2).sum().backward()
    torch.neuron.synchronize()
    assert torch.neuron.fallback_stats() == {}
    torch.testing.assert_close(out.cpu(), ref)
    torch.testing.assert_close(bn.weight.grad.cpu(), bag.weight.grad)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_reducing_losses_every_reduction_and_out(reduction):
    x, t = _r(3, 5, lo=-2, hi=2), _r(3, 5)
    xn, tn = x.to("neuron"), t.to("neuron")
    torch.neuron.reset_fallback_stats()
    for f in (
        lambda a, b: F.mse_loss(a, b, reduction=reduction),
        lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=0.5),
        lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=0.5),
        lambda a, b: F.binary_cross_entropy(torch.sigmoid(a), b, reduction=reduction),
    ):
        with warnings.catch_warnings():  # the fallback's resize warning (issue 23) is gone
            warnings.simplefilter("error")
            got = f(xn, tn)
        torch.testing.assert_close(got.cpu(), f(x, t))
    assert torch.neuron.fallback_stats() == {}
    # the out= overload (fallback: its CPU kernel resizes the out)
    out = torch.empty(0, device="neuron")
    torch._C._nn.mse_loss(xn, tn, 1, out=out)
    torch.testing.assert_close(out.cpu(), F.mse_loss(x, t))


@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "strided"])
def test_zero_gradients_of_sgn_as_on_cpu(strided):
    # sgn's gradient of a real input is autograd's ZeroTensor; the CPU fallback
    # had copied the CPU one's bytes from a null pointer (a crash; issue 23 sweep).
    base = torch.randn(6, 8)
    grads = []
    for dev in ("cpu", "neuron"):
        b = base.to(dev)
        x = (b[:, ::2] if strided else b).detach().requires_grad_()
        y = torch.sgn(x)
        (g,) = torch.autograd.grad(y, x, torch.ones_like(y))
        grads.append(g.cpu())
    torch.testing.assert_close(grads[1], grads[0])
    z = torch._efficientzerotensor((3,), device="neuron")
    assert z.device.type == "neuron"
    torch.testing.assert_close((z + torch.ones(3, device="neuron")).cpu(), torch.ones(3))
