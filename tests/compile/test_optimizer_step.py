"""``torch.compile(optimizer.step)`` with torch.optim's foreach implementations
(decompositions._foreach: torch-mlir lowers no ``_foreach_`` op), and a whole compiled
training step with its optimizer step; parameters after three steps against the CPU."""

import copy

import pytest
import torch
import torch.nn as nn

import torchneuron  # noqa: F401

_OPTIMIZERS = {
    "AdamW": lambda p: torch.optim.AdamW(p, lr=0.1, foreach=True),
    "Adam amsgrad": lambda p: torch.optim.Adam(p, lr=0.1, amsgrad=True, foreach=True),
    "SGD nesterov": lambda p: torch.optim.SGD(
        p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01, foreach=True
    ),
    "RMSprop": lambda p: torch.optim.RMSprop(p, lr=0.01, foreach=True),
    "Adagrad": lambda p: torch.optim.Adagrad(p, lr=0.1, foreach=True),
    # single-tensor forms: Dynamo traces their addcmul_/addcdiv_ as prims.fma (failed to compile)
    "AdamW single": lambda p: torch.optim.AdamW(p, lr=0.1, foreach=False),
    "Adam single": lambda p: torch.optim.Adam(p, lr=0.1, weight_decay=0.01, foreach=False),
    "NAdam single": lambda p: torch.optim.NAdam(p, lr=0.1, foreach=False),
    "RAdam single": lambda p: torch.optim.RAdam(p, lr=0.1, foreach=False),
    "Adagrad single": lambda p: torch.optim.Adagrad(p, lr=0.1, foreach=False),
    "RMSprop single": lambda p: torch.optim.RMSprop(p, lr=0.01, foreach=False),
}


def _pair():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))
    return m, copy.deepcopy(m).to("neuron")


@pytest.mark.parametrize("name", list(_OPTIMIZERS))
def test_compiled_optimizer_step_matches_cpu(name):
    m, mn = _pair()
    opt, optn = _OPTIMIZERS[name](m.parameters()), _OPTIMIZERS[name](mn.parameters())
    torch._dynamo.reset()
    step = torch.compile(optn.step, backend="neuron")
    for _ in range(3):
        x = torch.randn(5, 4)
        m(x).pow(2).sum().backward()
        mn(x.to("neuron")).pow(2).sum().backward()
        opt.step()
        step()
        opt.zero_grad()
        optn.zero_grad()
    for p, q in zip(m.parameters(), mn.parameters()):
        torch.testing.assert_close(q.cpu(), p, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_addcmul_and_addcdiv_with_a_value_match_cpu(dtype):
    # Dynamo traces both as prims.fma(t1 * t2 (or t1 / t2), value, self)
    def f(x, a, b):
        x.addcmul_(a, b, value=0.3)
        x.addcdiv_(a, b, value=-0.7)
        return x * 2

    torch.manual_seed(0)
    x, a = torch.randn(6, 5, dtype=dtype), torch.randn(6, 5, dtype=dtype)
    b = torch.rand(5, dtype=dtype) + 0.5  # broadcast
    xn = x.to("neuron")
    torch._dynamo.reset()
    out = torch.compile(f, backend="neuron")(xn, a.to("neuron"), b.to("neuron"))
    ref = f(x, a, b)
    tol = {"atol": 1e-5, "rtol": 1e-5} if dtype == torch.float32 else {}
    torch.testing.assert_close(out.cpu(), ref, **tol)
    torch.testing.assert_close(xn.cpu(), x, **tol)


def test_compiled_training_step_with_optimizer_matches_cpu():
    m, mn = _pair()
    opt = torch.optim.AdamW(m.parameters(), lr=0.05, foreach=True)
    optn = torch.optim.AdamW(mn.parameters(), lr=0.05, foreach=True)

    def train_step(model, optimizer, x):
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    torch._dynamo.reset()
    compiled = torch.compile(train_step, backend="neuron")
    for _ in range(3):
        x = torch.randn(6, 4)
        ref = train_step(m, opt, x)
        got = compiled(mn, optn, x.to("neuron"))
        torch.testing.assert_close(got.detach().cpu(), ref.detach(), atol=1e-5, rtol=1e-5)
    for p, q in zip(m.parameters(), mn.parameters()):
        torch.testing.assert_close(q.cpu(), p, atol=1e-5, rtol=1e-5)
