"""Float arguments of elementwise arithmetic are operands, not part of a kernel's
result geometry: a loop whose step size changes every step (AdamW with
capturable=False, a learning-rate schedule) probes each signature once, computes what
the CPU computes for every value, and still raises an overflowing value's error at
the call, as the CPU does."""

import os

import pytest
import torch

from torchneuron import _C

DEV = "neuron"
# make test-fused: runs of these ops are one XLA executable, rounded once per graph
FUSED = os.environ.get("TORCHNEURON_CONCATENATION_FUSE") == "1"


def _probes_during(fn) -> int:
    torch.neuron.synchronize()
    before = _C._geometry_probes()
    fn()
    torch.neuron.synchronize()
    return _C._geometry_probes() - before


def _ops(x, t1, t2, v):
    x.addcdiv_(t1, t2, value=-v)
    x.div_(1.0 + v)
    x.add_(t1, alpha=v)
    x.mul_(1.0 - v / 3)
    x.lerp_(t2, v / 2)
    return x


def test_new_values_probe_no_new_signature():
    g = torch.Generator().manual_seed(0)
    t1, t2 = torch.randn(257, generator=g), torch.rand(257, generator=g) + 0.5
    d1, d2 = t1.to(DEV), t2.to(DEV)
    x = torch.randn(257, generator=g).to(DEV)
    _ops(x, d1, d2, 0.01)  # the first sight of each signature probes
    n = _probes_during(lambda: [_ops(x, d1, d2, 0.01 * (k + 2)) for k in range(10)])
    assert n == 0, f"{n} probes for 10 new step sizes (keyed by value: 50)"


def test_every_value_computes_as_the_cpu():
    g = torch.Generator().manual_seed(1)
    t1, t2 = torch.randn(4, 33, generator=g), torch.rand(4, 33, generator=g) + 0.5
    x = torch.randn(4, 33, generator=g)
    xd, d1, d2 = x.to(DEV), t1.to(DEV), t2.to(DEV)
    for k in range(12):
        v = 0.013 * (k + 1) ** 1.5
        _ops(x, t1, t2, v)
        _ops(xd, d1, d2, v)
    if FUSED:
        torch.testing.assert_close(xd.cpu(), x, rtol=1e-5, atol=1e-6)
    else:  # the same ATen kernels with the same float operands: equal bit for bit
        assert torch.equal(xd.cpu(), x)


def test_adamw_steps_match_the_cpu_and_probe_once():
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    dev = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    dev.load_state_dict(cpu.state_dict())
    dev.to(DEV)
    x = torch.randn(8, 16)
    xd = x.to(DEV)
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2, foreach=True) for m in (cpu, dev)]

    def step(model, opt, inp):
        model(inp).square().mean().backward()
        opt.step()
        opt.zero_grad()

    for _ in range(2):  # the first steps see every signature
        step(cpu, opts[0], x)
        step(dev, opts[1], xd)
    probes = _probes_during(lambda: [step(dev, opts[1], xd) for _ in range(5)])
    for _ in range(5):
        step(cpu, opts[0], x)
    assert probes == 0, f"{probes} probes in 5 warmed-up AdamW steps"
    for pc, pd in zip(cpu.parameters(), dev.parameters()):
        torch.testing.assert_close(pd.detach().cpu(), pc.detach(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(
    "dtype, fits, overflows",
    [
        (torch.float16, 6e4, 7e4),
        (torch.bfloat16, 3e38, 3.5e38),
        (torch.float32, 1e38, 1e39),
        (torch.uint8, 255.0, 300.0),
        (torch.int16, 3e4, 4e4),
        (torch.uint16, 4e4, 7e4),
        (torch.uint32, 3e9, 5e9),
        (torch.int64, 1e18, 1e19),
        (torch.float8_e4m3fn, 400.0, 500.0),
        (torch.float8_e8m0fnu, 1e20, 2e38),
        (torch.float8_e8m0fnu, 0.5, 1e-40),  # e8m0 has no zero: below 2^-127 overflows
    ],
)
def test_overflowing_fill_value_raises_at_the_call(dtype, fits, overflows):
    x = torch.zeros(3, dtype=dtype, device=DEV)
    x.fill_(fits)  # caches the signature's geometry
    with pytest.raises(RuntimeError, match="without overflow"):
        x.fill_(overflows)
    with pytest.raises(RuntimeError, match="without overflow"):
        torch.zeros(3, dtype=dtype).fill_(overflows)
    torch.neuron.synchronize()  # nothing deferred: the stream has no error to report
    assert x.cpu().to(torch.float64).tolist() == [float(torch.tensor(fits, dtype=dtype))] * 3


def test_overflowing_alpha_raises_at_the_call():
    a = torch.ones(4, dtype=torch.float16, device=DEV)
    a.add(a, alpha=2.0)
    with pytest.raises(RuntimeError, match="without overflow"):
        a.add(a, alpha=1e40)
    x = torch.ones(4, device=DEV)
    x.addcdiv(x, x, value=0.5)
    with pytest.raises(RuntimeError, match="without overflow"):
        x.addcdiv(x, x, value=1e300)
    torch.neuron.synchronize()
    assert a.cpu().tolist() == [1.0] * 4 and x.cpu().tolist() == [1.0] * 4


def test_nan_inf_and_zero_operands_match_the_cpu():
    base = torch.tensor([1.0, -2.0, 0.0, 3.5])
    for v in (0.5, float("nan"), float("inf"), -float("inf"), 0.0, -0.0):
        c = base.clone().div_(v).lerp_(base, 0.25).mul_(v)
        d = base.to(DEV).div_(v).lerp_(base.to(DEV), 0.25).mul_(v)
        assert torch.equal(d.cpu().isnan(), c.isnan())
        assert torch.equal(d.cpu().nan_to_num(), c.nan_to_num())
    i = torch.arange(4)
    for v in (2.0, 0.0):
        torch.testing.assert_close(i.to(DEV).div(v).cpu(), i.div(v), equal_nan=True)


@pytest.mark.parametrize(
    "make",
    [
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, foreach=False),
        lambda p: torch.optim.Adam(p, lr=1e-2, foreach=False),
        lambda p: torch.optim.Adagrad(p, lr=1e-2, foreach=True),
        lambda p: torch.optim.AdamW(p, lr=1e-2, fused=True),
    ],
    ids=["sgd", "adam_for_loop", "adagrad_foreach", "adamw_fused"],
)
def test_scheduled_learning_rate_probes_once(make):
    # a schedule changes the float learning rate every step
    torch.manual_seed(0)
    cpu = torch.nn.Linear(24, 8)
    dev = torch.nn.Linear(24, 8)
    dev.load_state_dict(cpu.state_dict())
    dev.to(DEV)
    x = torch.randn(5, 24)
    runs = []
    for model, inp in ((cpu, x), (dev, x.to(DEV))):
        opt = make(model.parameters())
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
        runs.append((model, inp, opt, sched))

    def step(model, inp, opt, sched):
        model(inp).square().mean().backward()
        opt.step()
        opt.zero_grad()
        sched.step()

    for _ in range(2):
        for r in runs:
            step(*r)
    probes = _probes_during(lambda: [step(*runs[1]) for _ in range(4)])
    for _ in range(4):
        step(*runs[0])
    assert probes == 0, f"{probes} probes in 4 warmed-up steps"
    for pc, pd in zip(cpu.parameters(), dev.parameters()):
        torch.testing.assert_close(pd.detach().cpu(), pc.detach(), rtol=1e-5, atol=1e-6)
