"""The host prologue (passes/performance/host_prologue.py, compiler/host_prologue.py): a
graph's small computations on CPU inputs run on the host. A compiled AdamW step
(``capturable=False``: its ``step`` counts are 0-dim CPU tensors) no longer waits for the
device (its counts were written back with a device-to-host copy), and gives eager's
parameters and counts; a graph mixing CPU scalars and device tensors gives the CPU's
values, with its CPU results on the CPU; steps grouped into foreach calls give each
step's own value bit for bit; a warm start from the graph index runs the same plan."""

import copy

import pytest
import torch
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401
from torchneuron.compiler import cache
from torchneuron.compiler.host_prologue import HostPrologue, _op
from torchneuron.compiler.plan import GraphPlan, HostRef


def _models():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2))
    return m, copy.deepcopy(m).to("neuron"), copy.deepcopy(m).to("neuron")


def _adamw(m):
    return torch.optim.AdamW(m.parameters(), lr=0.1, foreach=True)


def _grads(models, x):
    for m in models:
        m(x.to(next(m.parameters()).device)).pow(2).sum().backward()


def _long_device_work():
    """~10 GFLOP queued on the current stream: the host returns long before it is done."""
    a = torch.randn(1024, 1024, device="neuron") / 32
    b = a
    for _ in range(5):
        b = b @ a
    return b


def test_compiled_adamw_step_matches_eager_and_does_not_wait_for_the_device():
    cpu, eager, comp = _models()
    opts = [_adamw(m) for m in (cpu, eager, comp)]
    step = torch.compile(opts[2].step, backend="neuron")
    for _ in range(3):
        _grads((cpu, eager, comp), torch.randn(5, 4))
        opts[0].step(), opts[1].step(), step()
        for o in opts:
            o.zero_grad(set_to_none=False)
    for p, q, r in zip(cpu.parameters(), eager.parameters(), comp.parameters()):
        torch.testing.assert_close(r.detach().cpu(), q.detach().cpu(), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(r.detach().cpu(), p.detach(), atol=1e-5, rtol=1e-5)
    for o in opts:
        counts = [s["step"] for s in o.state.values()]
        assert all(c.device.type == "cpu" and c.item() == 3.0 for c in counts), counts
    # The fourth step, queued behind long device work: the call returns before the
    # device is done (the updated counts were copied back from the device before,
    # a wait for everything queued), and the counts are already updated on the host.
    _grads((comp,), torch.randn(5, 4))
    torch.neuron.synchronize()
    pending = _long_device_work()
    step()
    assert not torch.neuron.current_stream().query(), "the compiled step waited for the device"
    assert all(s["step"].item() == 4.0 for s in opts[2].state.values())
    torch.neuron.synchronize()
    del pending


def _mixed(x, s, c, n):
    c.add_(1)
    n.add_(2)
    t = (s * 2).sqrt()
    return x * t + c, t, n * 3


def _mixed_inputs():
    return torch.randn(3, 4), torch.tensor(0.5), torch.tensor(1.0), torch.tensor(7)


def test_graph_mixing_cpu_scalars_and_device_tensors_matches_cpu():
    x, s, c, n = _mixed_inputs()
    rc, rn = c.clone(), n.clone()
    ref = _mixed(x, s, rc, rn)
    f = torch.compile(_mixed, backend="neuron")
    got = f(x.to("neuron"), s, c, n)
    assert [g.device.type for g in got] == ["neuron", "cpu", "cpu"]  # as eager's
    for g, r in zip(got, ref):
        torch.testing.assert_close(g.cpu(), r)
        assert g.dtype == r.dtype
    assert torch.equal(c, rc) and torch.equal(n, rn) and n.dtype == torch.int64
    got = f(x.to("neuron"), s, c, n)  # again: the counters go on from their new values
    ref = _mixed(x, s, rc, rn)
    torch.testing.assert_close(got[0].cpu(), ref[0])
    assert torch.equal(c, rc) and torch.equal(n, rn)


def test_warm_start_from_the_index_runs_the_same_plan():
    f = torch.compile(_mixed, backend="neuron")
    x, s, c, n = _mixed_inputs()
    first = f(x.to("neuron"), s, c.clone(), n.clone())
    cache.clear_memory_cache()  # the plan (its host steps) comes back from the disk index
    torch._dynamo.reset()
    torch.neuron.reset_dynamo_metrics()
    again = torch.compile(_mixed, backend="neuron")(x.to("neuron"), s, c.clone(), n.clone())
    assert [r["cache"] for r in torch.neuron.get_dynamo_metrics()] == ["disk"]
    for a, b in zip(first, again):
        assert torch.equal(a.cpu(), b.cpu())


def test_cpu_autocopy_disabled_raises_for_a_host_prologue(monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY", "1")
    x, s, c, n = _mixed_inputs()
    with pytest.raises(RuntimeError, match="is on cpu.*AUTOCOPY"):
        torch.compile(_mixed, backend="neuron")(x.to("neuron"), s, c, n)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_foreach_groups_give_each_steps_own_value(dtype):
    # AdamW's bias corrections for 24 parameters: a vectorized pow over the stacked counts
    # differs from the 0-dim pow in the last bit for some counts; the foreach op does not
    n = 24
    steps = [("aten::add.Tensor", (HostRef("arg", i), 1), {}) for i in range(n)]
    for beta in (0.9, 0.999):
        base = len(steps)
        steps += [("aten::pow.Scalar", (beta, HostRef("host", i)), {}) for i in range(n)]
        steps += [("aten::sub.Tensor", (HostRef("host", base + i), 1), {}) for i in range(n)]
    k = len(steps)
    steps += [("aten::neg", (HostRef("host", k - n + i),), {}) for i in range(n)]
    steps += [("aten::sqrt", (HostRef("host", k + i),), {}) for i in range(n)]
    steps += [("aten::clone", (HostRef("host", i),), {}) for i in range(n)]  # lone one below
    steps += [("aten::mul.Tensor", (HostRef("host", 0), HostRef("arg", 1)), {})]
    plan = GraphPlan(n_args=n, host=steps)
    prologue = HostPrologue("g", plan)
    assert len(prologue._groups) < len(steps) // 8  # grouped
    torch.manual_seed(0)
    for _ in range(20):
        args = [torch.randint(1, 100_000, ()).to(dtype) for _ in range(n)]
        vals, one_by_one = prologue.run(args), []
        for name, a, _ in steps:
            ops = [
                args[r.index] if r.kind == "arg" else one_by_one[r.index]
                for r in a[:2]
                if type(r) is HostRef
            ]
            full = [ops.pop(0) if type(r) is HostRef else r for r in a]
            one_by_one.append(_op(name)(*full))
        for v, w in zip(vals, one_by_one):
            assert v.dtype == w.dtype and v.shape == w.shape
            assert torch.equal(v, w)
