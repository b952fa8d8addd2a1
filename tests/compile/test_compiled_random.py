"""Random ops in compiled graphs: generated inside the graph by Threefry-2x32 from a key
drawn from the neuron generator at each launch (passes/policy/random_ops_to_inputs.py)."""

import math

import torch
from compile_support import fresh_compile_state  # noqa: F401
from conftest import run_python

import torchneuron  # noqa: F401
from torchneuron.compiler.threefry import threefry2x32

T = lambda *v: torch.tensor(v, dtype=torch.int64)  # noqa: E731


def test_threefry_known_answers():
    # Random123's threefry2x32_20 known-answer vectors (kat_vectors), also JAX's test.
    cases = [
        ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
        ((2**32 - 1,) * 2, (2**32 - 1,) * 2, (0x1CB996FC, 0xBB002BE7)),
        ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
    ]
    for key, ctr, want in cases:
        y = threefry2x32(T(key[0]), T(key[1]), T(ctr[0]), T(ctr[1]))
        assert (y[0].item(), y[1].item()) == want


def _key_after_seed(seed):
    torch.neuron.manual_seed(seed)
    return torch.randint(0, 2**32, (2,), dtype=torch.int64, device="neuron").cpu()


def _reference_words(key, numel, number):
    return threefry2x32(key[0], key[1], torch.arange(numel, dtype=torch.int64), number)


def test_compiled_values_are_threefry_of_the_drawn_key():
    f = torch.compile(
        lambda x: (torch.rand(1000, device=x.device) + x, torch.randn(1000, device=x.device)),
        backend="neuron",
    )
    x = torch.zeros(1000, device="neuron")
    key = _key_after_seed(7)
    torch.neuron.manual_seed(7)
    u, z = (t.cpu() for t in f(x))
    y0, _ = _reference_words(key, 1000, 0)
    assert torch.equal(u, (y0 // 256).float() * 2.0**-24)  # exact: top 24 bits
    a0, a1 = _reference_words(key, 1000, 1)  # second op: counter word 1
    u1 = 1.0 - (a0 // 256).double() * 2.0**-24
    u2 = (a1 // 256).double() * 2.0**-24
    ref = torch.sqrt(-2 * torch.log(u1)) * torch.cos(2 * math.pi * u2)
    assert torch.allclose(z.double(), ref, rtol=0, atol=2e-5)  # float32 Box-Muller


def test_same_seed_same_numbers_in_another_process():
    code = """
        import torch, torchneuron
        f = torch.compile(lambda x: torch.nn.functional.dropout(x, 0.3, True) + torch.randn_like(x),
                          backend="neuron")
        torch.neuron.manual_seed(2024)
        x = torch.ones(64, device="neuron")
        print(f(x).cpu().tolist(), f(x).cpu().tolist())
    """
    a, b = run_python(code).stdout, run_python(code).stdout
    assert a == b and a.strip()
    first, second = eval(a.replace("] [", "], ["))
    assert first != second


def test_successive_calls_differ_and_eager_draws_follow():
    f = torch.compile(lambda x: torch.rand_like(x), backend="neuron")
    x = torch.zeros(4096, device="neuron")
    torch.neuron.manual_seed(5)
    a, b = f(x).cpu(), f(x).cpu()
    after = torch.rand(4096, device="neuron").cpu()
    assert not torch.equal(a, b)
    for prev in (a, b):  # the eager draw does not repeat a call's sequence
        assert (after == prev).float().mean() < 0.01
    # the generator advanced by exactly one key draw per launch
    torch.neuron.manual_seed(5)
    torch.randint(0, 2**32, (2,), dtype=torch.int64, device="neuron")
    torch.randint(0, 2**32, (2,), dtype=torch.int64, device="neuron")
    assert torch.equal(torch.rand(4096, device="neuron").cpu(), after)


def _ks(sample, cdf):
    s, _ = torch.sort(sample.double())
    n = s.numel()
    c = cdf(s)
    i = torch.arange(1, n + 1, dtype=torch.float64)
    return max((i / n - c).max().item(), (c - (i - 1) / n).max().item())


def test_uniform_and_normal_statistics():
    n = 1 << 20
    f = torch.compile(
        lambda x: (
            torch.rand_like(x),
            torch.randn_like(x),
            torch.rand(n, device=x.device, dtype=torch.bfloat16),
        ),
        backend="neuron",
    )
    torch.neuron.manual_seed(11)
    u, z, ub = (t.cpu() for t in f(torch.zeros(n, device="neuron")))
    bound = 1.95 / math.sqrt(n)  # Kolmogorov-Smirnov critical value, alpha = 0.001
    assert 0 <= u.min() and u.max() < 1 and 0 <= ub.min() and ub.max() < 1
    assert abs(u.double().mean().item() - 0.5) < 4 * math.sqrt(1 / 12 / n)
    assert abs(u.double().var().item() - 1 / 12) < 1e-3
    assert _ks(u, lambda s: s) < bound
    assert abs(z.double().mean().item()) < 4 / math.sqrt(n)
    assert abs(z.double().var().item() - 1) < 6e-3
    assert _ks(z, lambda s: 0.5 * (1 + torch.erf(s / math.sqrt(2)))) < bound
    # bfloat16: 8-bit grid, each of the 256 values about equally often
    counts = torch.bincount((ub.float() * 256).long(), minlength=256)
    assert counts.numel() == 256 and (counts - n / 256).abs().max() < 6 * math.sqrt(n / 256)


def test_bernoulli_with_tensor_probabilities():
    n = 1 << 16
    p = torch.linspace(0, 1, 8).repeat_interleave(n // 8)
    f = torch.compile(lambda p: torch.bernoulli(p), backend="neuron")
    torch.neuron.manual_seed(3)
    b = f(p.to("neuron")).cpu()
    means = b.view(8, -1).mean(1)
    assert torch.allclose(means, torch.linspace(0, 1, 8), atol=0.02)
    assert means[0] == 0 and means[-1] == 1


def test_dropout_forward_backward_use_one_mask():
    w = torch.linspace(0.5, 2.0, 512, device="neuron")

    def f(x):
        return (torch.nn.functional.dropout(x * w, 0.4, training=True) ** 2).sum()

    c = torch.compile(f, backend="neuron")
    torch.neuron.manual_seed(9)
    x = torch.linspace(1, 2, 512, device="neuron").requires_grad_()
    loss = c(x)
    loss.backward()
    # the mask the forward used: recomputed from the same key (rng_key of the forward)
    key = _key_after_seed(9)
    y0, _ = _reference_words(key, 512, 0)
    keep = ((y0 // 256).float() * 2.0**-24 >= 0.4).float()
    xc, wc = torch.linspace(1, 2, 512), torch.linspace(0.5, 2.0, 512)
    h = xc * wc * keep / 0.6
    assert torch.allclose(loss.detach().cpu(), (h**2).sum(), rtol=1e-5)
    assert torch.allclose(x.grad.cpu(), 2 * h * keep / 0.6 * wc, rtol=1e-5)
    assert 0.35 < 1 - keep.mean().item() < 0.45


def test_rng_state_restore_and_fork_rng_reproduce_a_call():
    f = torch.compile(lambda x: torch.randn_like(x) * x, backend="neuron")
    x = torch.ones(256, device="neuron")
    torch.neuron.manual_seed(1)
    state = torch.neuron.get_rng_state()
    a = f(x).cpu()
    torch.neuron.set_rng_state(state)
    assert torch.equal(f(x).cpu(), a)
    with torch.random.fork_rng(devices=[0], device_type="neuron"):
        inside = f(x).cpu()
    assert torch.equal(f(x).cpu(), inside)  # fork_rng restored the state it found


def test_randint_follows_manual_seed():
    f = torch.compile(
        lambda x: x + torch.randint(3, 1003, (4096,), device=x.device), backend="neuron"
    )
    x = torch.zeros(4096, dtype=torch.int64, device="neuron")
    key = _key_after_seed(4)
    torch.neuron.manual_seed(4)
    a, b = f(x).cpu(), f(x).cpu()
    y0, _ = _reference_words(key, 4096, 0)
    assert torch.equal(a, 3 + y0 % 1000) and not torch.equal(a, b)
    assert a.min() >= 3 and a.max() < 1003


def test_rng_state_calls_inside_a_compiled_function_run_eagerly():
    # PyTorch's freeze_rng_state() (OpInfo's wrapper_set_seed) saves and restores the
    # accelerator's state inside the function: traced, set_rng_state under no_dispatch
    # failed to compile (a graph break now, as torch.cuda's calls are)
    from torch.testing._utils import freeze_rng_state

    def f(x):
        with freeze_rng_state():
            torch.neuron.manual_seed(3)
            y = torch.rand(4, device="neuron") + x
        return y, torch.rand(4, device="neuron")

    x = torch.zeros(4, device="neuron")
    torch.neuron.manual_seed(0)
    want = [t.cpu() for t in f(x)]
    torch.neuron.manual_seed(0)
    got = [t.cpu() for t in torch.compile(f, backend="neuron")(x)]
    torch.testing.assert_close(got[0], want[0])
    torch.testing.assert_close(got[1], want[1])  # the state was restored, as in eager
