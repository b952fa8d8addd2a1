"""Python int and float arguments that change between calls of a compiled function.

After a second distinct value Dynamo passes the scalar as a symbolic input (an int) or a
0-dim tensor read with .item() (a float); the backend specializes each value into its own
static graph. It used to reuse the graph of the second value for every later one (wrong
values, shapes and gradients, no error), and to fail on an int and a float changing
together."""

import pytest
import torch
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401

VALUES = [(2, 1.5), (3, 2.5), (4, 3.5), (2, 1.5), (5, -0.25), (3, 2.5)]

CASES = {
    "mul": lambda x, n, s: x * n + x.sum() * n,
    "slice": lambda x, n, s: x[:, :n] * 2,
    "roll": lambda x, n, s: x.roll(n),
    "topk": lambda x, n, s: x.topk(n, dim=-1).values,
    "pow": lambda x, n, s: x.pow(n),
    "int_and_float": lambda x, n, s: x * n * s,
    "float_to_python": lambda x, n, s: (x * n, x.shape[0] * s),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_changing_python_scalars_match_cpu_every_call(name):
    f = CASES[name]
    torch.manual_seed(0)
    x = torch.randn(4, 6)
    cf = torch.compile(f, backend="neuron")
    for n, s in VALUES:
        got, want = cf(x.to("neuron"), n, s), f(x, n, s)
        got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
        for g, w in zip(got, want):
            if isinstance(w, torch.Tensor):
                assert g.shape == w.shape and torch.allclose(g.cpu(), w, atol=1e-5), (name, n, s)
            else:
                assert g == w, (name, n, s)


def test_changing_int_and_new_shape_together():
    f = CASES["int_and_float"]
    cf = torch.compile(f, backend="neuron")
    for rows, n, s in [
        (4, 2, 1.5),
        (4, 3, 2.5),
        (5, 4, 3.5),
        (6, 3, 1.5),
        (4, 2, 1.5),
        (7, 9, -0.25),
    ]:
        x = torch.randn(rows, 3)
        assert torch.allclose(cf(x.to("neuron"), n, s).cpu(), f(x, n, s), atol=1e-5), (rows, n, s)


def test_step_counter_in_training_gives_cpu_losses_and_gradients():
    torch.manual_seed(0)
    lin = torch.nn.Linear(6, 3)
    dev = torch.nn.Linear(6, 3).to("neuron")
    dev.load_state_dict(lin.state_dict())
    x = torch.randn(5, 6)

    def loss(m, x, step):
        return (m(x) * step).pow(2).mean()

    closs = torch.compile(loss, backend="neuron")
    for step in range(1, 6):
        want = loss(lin, x, step)
        want.backward()
        got = closs(dev, x.to("neuron"), step)
        got.backward()
        assert torch.allclose(got.cpu(), want, rtol=1e-5), step
        for p, q in zip(dev.parameters(), lin.parameters()):
            assert torch.allclose(p.grad.cpu(), q.grad, rtol=1e-5, atol=1e-6), step
            p.grad = q.grad = None


def test_scalar_recompile_is_counted_with_the_value_change():
    cf = torch.compile(lambda x, n: x * n, backend="neuron")
    x = torch.ones(3, device="neuron")
    for n in (2, 3, 4):
        assert cf(x, n).cpu().tolist() == [float(n)] * 3
    reasons = [r["recompile_reason"] for r in torch.neuron.get_dynamo_metrics()]
    assert len(reasons) == 3 and reasons[0] is None
    assert reasons[2] == "Python scalar inputs changed: input 1: 3 -> 4", reasons
