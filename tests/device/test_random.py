"""Random numbers: one generator per core whose state is CPU-compatible, so a
seed gives the CPU's numbers; get/set_rng_state round trips; explicit
``torch.Generator(device="neuron")``; random operators that take the CPU
fallback draw from the same generator."""

import warnings

import pytest
import torch

N = torch.neuron

DRAWS = {
    "rand": lambda dev, g=None: torch.rand(5, 3, device=dev, generator=g),
    "randn": lambda dev, g=None: torch.randn(17, device=dev, generator=g),
    "randint": lambda dev, g=None: torch.randint(0, 1000, (9,), device=dev, generator=g),
    "normal_": lambda dev, g=None: torch.empty(8, device=dev).normal_(2.0, 3.0, generator=g),
    "uniform_": lambda dev, g=None: torch.empty(8, device=dev).uniform_(-1, 1, generator=g),
    "bernoulli": lambda dev, g=None: torch.bernoulli(
        torch.full((16,), 0.3, device=dev), generator=g
    ),
    "exponential_": lambda dev, g=None: torch.empty(6, device=dev).exponential_(generator=g),
    "multinomial": lambda dev, g=None: torch.multinomial(
        torch.ones(10, device=dev), 4, generator=g
    ),
}


def _quiet(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a draw may take the (warned) CPU fallback
        return fn(*args)


@pytest.mark.parametrize("name", list(DRAWS))
def test_manual_seed_gives_the_cpu_numbers(name):
    draw = DRAWS[name]
    torch.manual_seed(999)  # (seeds the CPU and every core)
    N.manual_seed(1234)  # the current core only: the CPU stays at 999
    got = _quiet(draw, "neuron").cpu()
    torch.manual_seed(1234)
    ref = draw("cpu")
    assert got.dtype == ref.dtype
    assert torch.equal(got, ref)


def test_dropout_draws_from_the_neuron_generator():
    x = torch.ones(64)
    torch.manual_seed(0)
    N.manual_seed(7)
    got = torch.nn.functional.dropout(x.neuron(), 0.5).cpu()
    cpu_next = torch.rand(4)  # the CPU generator was not used by the device
    torch.manual_seed(7)
    assert torch.equal(got, torch.nn.functional.dropout(x, 0.5))
    assert torch.equal(cpu_next, torch.rand(4, generator=torch.Generator().manual_seed(0)))
    # and the mask of native_dropout agrees with the output
    out, mask = torch.native_dropout(x.neuron(), 0.25, True)
    assert mask.dtype == torch.bool
    assert torch.equal(out.cpu(), mask.cpu().float() / 0.75)


def test_torch_manual_seed_seeds_every_core():
    torch.manual_seed(42)
    a = torch.randn(6, device="neuron:0").cpu()
    b = torch.randn(6, device="neuron:2").cpu()
    torch.manual_seed(42)
    ref = torch.randn(6)
    assert torch.equal(a, ref) and torch.equal(b, ref)
    assert N.initial_seed() == 42


def test_manual_seed_is_per_core():
    N.manual_seed_all(5)
    with N.device(1):
        N.manual_seed(6)
    a = torch.rand(4, device="neuron:0").cpu()
    b = torch.rand(4, device="neuron:1").cpu()
    assert torch.equal(a, torch.rand(4, generator=torch.Generator().manual_seed(5)))
    assert torch.equal(b, torch.rand(4, generator=torch.Generator().manual_seed(6)))
    assert N.initial_seed() == 5


def test_sequences_continue_like_the_cpu():
    N.manual_seed(3)
    got = [torch.randn(4, device="neuron") for _ in range(3)]
    got = torch.cat([t.cpu() for t in got])
    g = torch.Generator().manual_seed(3)
    ref = torch.cat([torch.randn(4, generator=g) for _ in range(3)])
    assert torch.equal(got, ref)


def test_get_set_rng_state_round_trip():
    N.manual_seed(11)
    torch.rand(3, device="neuron")
    state = N.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    first = torch.randn(10, device="neuron").cpu()
    torch.randn(5, device="neuron")  # move on
    N.set_rng_state(state)
    again = torch.randn(10, device="neuron").cpu()
    assert torch.equal(first, again)
    # the state is a CPU generator's: it carries over in both directions
    torch.set_rng_state(state)
    assert torch.equal(torch.randn(10), first)


def test_rng_state_per_device_and_all():
    N.manual_seed_all(0)
    torch.rand(8, device="neuron:1")
    states = N.get_rng_state_all()
    assert len(states) == N.device_count()
    assert not torch.equal(states[0], states[1])
    assert torch.equal(N.get_rng_state("neuron:1"), states[1])
    a = torch.rand(4, device="neuron:1").cpu()
    N.set_rng_state_all(states)
    assert torch.equal(torch.rand(4, device="neuron:1").cpu(), a)


def test_state_read_waits_for_queued_draws():
    N.manual_seed(21)
    x = torch.empty(200_000, device="neuron")
    for _ in range(5):
        x.normal_()  # queued; each draw advances the state
    state = N.get_rng_state()
    g = torch.Generator().manual_seed(21)
    y = torch.empty(200_000)
    for _ in range(5):
        y.normal_(generator=g)
    assert torch.equal(state, g.get_state())
    assert torch.equal(x.cpu(), y)


def test_explicit_neuron_generator():
    g = torch.Generator(device="neuron")
    assert g.device == torch.device("neuron", 0)
    g.manual_seed(77)
    assert g.initial_seed() == 77
    N.manual_seed(1)  # the default generator is a different one
    for name, draw in DRAWS.items():
        g.manual_seed(77)
        got = _quiet(draw, "neuron", g).cpu()
        ref = draw("cpu", torch.Generator().manual_seed(77))
        assert torch.equal(got, ref), name
    # state round trip of an explicit generator
    g.manual_seed(5)
    st = g.get_state()
    a = torch.rand(6, device="neuron", generator=g).cpu()
    g.set_state(st)
    assert torch.equal(torch.rand(6, device="neuron", generator=g).cpu(), a)


def test_generator_on_another_core():
    g = torch.Generator(device="neuron:2").manual_seed(9)
    assert g.device == torch.device("neuron", 2)
    got = torch.randn(5, device="neuron:2", generator=g).cpu()
    assert torch.equal(got, torch.randn(5, generator=torch.Generator().manual_seed(9)))
    with pytest.raises(torch.AcceleratorError, match="invalid neuron device index 9"):
        torch.Generator(device="neuron:9")


def test_fallback_random_ops_follow_the_neuron_generator():
    # randperm and poisson have no native kernel: the CPU fallback must still
    # draw from the neuron generator, after the draws already queued.
    def draws(dev, g=None):
        a = torch.rand(3, device=dev, generator=g)
        p = torch.randperm(12, device=dev, generator=g)
        q = torch.poisson(torch.full((6,), 4.0, device=dev), generator=g)
        return [t.cpu() for t in (a, p, q)]

    torch.manual_seed(0)
    N.manual_seed(31)
    got = _quiet(draws, "neuron")
    torch.manual_seed(1)  # the CPU default generator does not matter
    N.manual_seed(31)
    again = _quiet(draws, "neuron")
    torch.manual_seed(31)
    ref = draws("cpu")
    for x, y, z in zip(got, again, ref):
        assert torch.equal(x, z) and torch.equal(y, z)
    g = torch.Generator(device="neuron").manual_seed(8)
    explicit = _quiet(draws, "neuron", g)
    ref = draws("cpu", torch.Generator().manual_seed(8))
    for x, z in zip(explicit, ref):
        assert torch.equal(x, z)


def test_seed_gives_a_new_nondeterministic_seed():
    N.manual_seed(1)
    N.seed()
    s = N.initial_seed()
    assert s != 1
    N.seed()
    assert N.initial_seed() != s


def test_reseeding_waits_for_queued_draws():
    # A draw still queued behind slow work must not see the new seed.
    torch.randn(64, device="neuron").cpu()  # a known signature: launched asynchronously
    a = torch.randn(512, 512, device="neuron")
    for _ in range(6):
        a = a @ a
    torch.randn(64, device="neuron")  # queued behind the matmuls
    torch.neuron.manual_seed(1)
    got = torch.rand(64, device="neuron").cpu()
    assert torch.equal(got, torch.rand(64, generator=torch.Generator().manual_seed(1)))
    g = torch.Generator(device="neuron").manual_seed(3)
    for _ in range(4):
        a = a @ a
    torch.randn(64, device="neuron", generator=g)
    state = g.get_state()
    want = torch.rand(8, device="neuron", generator=g).cpu()
    g.set_state(state)
    assert torch.equal(torch.rand(8, device="neuron", generator=g).cpu(), want)
