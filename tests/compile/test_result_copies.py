"""How a compiled graph's results reach device memory (executable.py): outputs copied
out of XLA's buffers through numpy, and outputs that only update a mutated input written
straight into that input. Values against the CPU, for dtypes numpy holds differently
(bfloat16, bool, 0-dim) and for mutations whose new value reads other mutated inputs."""

import pytest
import torch

import torchneuron  # noqa: F401


def _compiled(fn):
    torch._dynamo.reset()
    return torch.compile(fn, backend="neuron", dynamic=False)


def _inputs(dtype):
    g = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        return [torch.rand(5, 3, generator=g) > 0.5, torch.rand(5, 3, generator=g) > 0.5]
    if dtype == torch.int64:
        return [torch.randint(-9, 9, (5, 3), generator=g) for _ in range(2)]
    return [torch.randn(5, 3, generator=g).to(dtype) for _ in range(2)]


def _check(fn, cpu_args):
    dev_args = [a.to("neuron") for a in cpu_args]
    ref_args = [a.clone() for a in cpu_args]
    want = fn(*ref_args)
    got = _compiled(fn)(*dev_args)
    for r, d in zip(ref_args, dev_args):
        torch.testing.assert_close(d.cpu(), r)
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    for w, o in zip(want, got):
        if w is None:
            assert o is None
        else:
            torch.testing.assert_close(o.cpu(), w)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_outputs_and_mutated_inputs_match_cpu(dtype):
    if dtype == torch.bool:

        def fn(a, b):
            a.logical_xor_(b)
            return a & b, b.any()
    else:

        def fn(a, b):
            a.mul_(2).add_(b)
            b.sub_(1)
            return a * b, b.sum()

    _check(fn, _inputs(dtype))


def test_mutated_input_also_returned_matches_cpu():
    def fn(a, b):
        a.add_(b)
        return a, b * 3

    _check(fn, _inputs(torch.float32))


def test_swapped_inputs_match_cpu():
    # each new value is the other input's old one: every write must follow every read
    def fn(a, b):
        t = a.clone()
        a.copy_(b)
        b.copy_(t)

    _check(fn, _inputs(torch.float32))


def test_zero_dim_and_staged_cpu_mutations_match_cpu():
    # AdamW's step counts: 0-dim CPU tensors next to device parameters
    def fn(p, s1, s2):
        s1.add_(1)
        s2.add_(1)
        p.mul_(s1)
        return p + s2

    p = torch.randn(4, 2)
    s1, s2 = torch.tensor(2.0), torch.tensor(5.0)
    ref = [p.clone(), s1.clone(), s2.clone()]
    want = fn(*ref)
    dp, ds1, ds2 = p.to("neuron"), s1.clone(), s2.clone()
    got = _compiled(fn)(dp, ds1, ds2)
    torch.testing.assert_close(got.cpu(), want)
    torch.testing.assert_close(dp.cpu(), ref[0])
    assert ds1.device.type == "cpu" and torch.equal(ds1, ref[1]) and torch.equal(ds2, ref[2])


def test_inputs_saved_for_backward_match_cpu():
    # the forward graph returns its inputs (saved for the backward) as the arguments
    # themselves (passes/performance/return_inputs_as_is.py), including a mutated buffer
    def fn(x, w, buf):
        buf.add_(1)
        return ((x @ w).sin() * buf).sum() + (w * w).sum()

    g = torch.Generator().manual_seed(0)
    x, w, buf = torch.randn(4, 3, generator=g), torch.randn(3, 2, generator=g), torch.ones(2)
    w.requires_grad_(True)
    wd = w.detach().to("neuron").requires_grad_(True)
    xd, bufd = x.to("neuron"), buf.to("neuron")
    step = _compiled(fn)
    for _ in range(2):
        fn(x, w, buf).backward()
        step(xd, wd, bufd).backward()
    torch.testing.assert_close(wd.grad.cpu(), w.grad)
    torch.testing.assert_close(bufd.cpu(), buf)


def test_input_returned_with_mutated_input_matches_cpu():
    def fn(a, b, n):
        b.add_(a)
        return a, b * 2, n

    g = torch.Generator().manual_seed(0)
    args = [torch.randn(3, 2, generator=g), torch.randn(3, 2, generator=g), torch.arange(4)]
    _check(fn, args)
