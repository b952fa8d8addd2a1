"""Outputs of a compiled graph that alias each other in eager (an intermediate ``y``
returned with ``y[0]``, ``y.t()``, ...) stay aliases: an in-place change through one
shows in the others, as on the CPU. AOTAutograd regenerates such aliases itself only
when they require grad; without grad they were separate copies on neuron."""

import pytest
import torch
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401

PATTERNS = {
    "y,y[0]": lambda y: (y, y[0]),
    "y,y.view(-1)": lambda y: (y, y.view(-1)),
    "y,y.t()": lambda y: (y, y.t()),
    "y,y[1:]": lambda y: (y, y[1:]),
    "y[0],y.view(-1)": lambda y: (y[0], y.view(-1)),  # the base is not returned
    "y[:,1],y.t(),y[0]": lambda y: (y[:, 1], y.t(), y[0]),
    "y[0].expand,y": lambda y: (y[0].expand(4, 3), y),  # an output overlapping itself
    "y,y.view(int32)": lambda y: (y, y.view(torch.int32)),  # another dtype over the bytes
}
DTYPES = (torch.float32, torch.int64, torch.float64)  # 64-bit under the narrowing policy


def _after_add(fn, x, k):
    outs = fn(x)
    outs[k].add_(100)
    return [o.cpu() for o in outs]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(PATTERNS))
def test_aliased_outputs_see_in_place_changes_as_on_cpu(name, dtype):
    pattern = PATTERNS[name]

    def f(x):
        return pattern(x * 2 + 1)

    x = torch.arange(6).reshape(2, 3).to(dtype)
    g = torch.compile(f, backend="neuron")
    xn = x.to("neuron")
    n_out = len(f(x))
    for k in range(n_out):  # the change through each output in turn
        try:
            ref = _after_add(f, x.clone(), k)
        except RuntimeError as e:  # an expanded output: eager refuses the write
            with pytest.raises(RuntimeError, match="single memory location"):
                _after_add(g, xn, k)
            assert "single memory location" in str(e)
            continue
        got = _after_add(g, xn, k)
        for r, o in zip(ref, got):
            assert o.dtype == r.dtype and o.shape == r.shape
            assert torch.equal(o, r), (name, k, o, r)
    assert torch.equal(xn.cpu(), x)  # the input is not an alias of any of them


def test_outputs_that_require_grad_stay_aliases():
    # AOTAutograd's own regeneration (the base is a user output): checked beside ours
    def f(w):
        y = w * 2
        return y, y[0]

    w = torch.arange(6.0).reshape(2, 3).requires_grad_()
    ref = f(w)
    wn = w.detach().to("neuron").requires_grad_()
    got = torch.compile(f, backend="neuron")(wn)
    ref[0].add_(100)
    got[0].add_(100)
    assert torch.equal(got[1].detach().cpu(), ref[1].detach())
    (ref[1].sum() + ref[0].sum()).backward()
    (got[1].sum() + got[0].sum()).backward()
    assert torch.equal(wn.grad.cpu(), w.grad)


def test_separate_outputs_stay_separate():
    # outputs of different intermediates share nothing: a change shows in one only
    g = torch.compile(lambda x: (x * 2, x + 1), backend="neuron")
    a, b = g(torch.ones(3, device="neuron"))
    a.add_(100)
    assert b.cpu().tolist() == [2.0, 2.0, 2.0]
