"""A model left on the CPU and compiled with backend="neuron": the graphs run on neuron,
and their outputs come back to the CPU, where eager leaves them, so training works
(gradients on the CPU parameters). Before, outputs came back on neuron and backward()
failed ("returned an invalid gradient ... expected device cpu but got neuron:0")."""

import warnings

import torch
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def test_cpu_model_trains_with_outputs_and_gradients_on_cpu(monkeypatch):
    from torchneuron.compiler import executable

    monkeypatch.setattr(executable, "_cpu_warned", False)  # warned once per process
    ref_m, m = _model(), _model()
    x = torch.randn(5, 4)
    cm = torch.compile(m, backend="neuron")
    opt_ref = torch.optim.SGD(ref_m.parameters(), lr=0.1)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(2):
            ref = ref_m(x)
            out = cm(x)
            assert out.device.type == "cpu" and out.requires_grad
            torch.testing.assert_close(out.detach(), ref.detach(), rtol=1e-5, atol=1e-6)
            ref.square().sum().backward()
            out.square().sum().backward()
            for p_ref, p in zip(ref_m.parameters(), m.parameters()):
                assert p.grad.device.type == "cpu"
                torch.testing.assert_close(p.grad, p_ref.grad, rtol=1e-5, atol=1e-6)
            opt_ref.step(), opt.step()
            opt_ref.zero_grad(), opt.zero_grad()
    assert any("on the CPU" in str(x.message) and "model.to('neuron')" in str(x.message) for x in w)
    assert torch.neuron.get_dynamo_metrics()  # compiled for neuron, not run eagerly
    assert (out.detach() + torch.ones(5, 2)).device.type == "cpu"


def test_cpu_inference_outputs_stay_aliases_and_cpu_input_mutation_written_back():
    def f(x, buf):
        buf.add_(1)
        y = x * 2
        return y, y[0]

    x, buf = torch.arange(6.0).reshape(2, 3), torch.zeros(3)
    ref_buf = buf.clone()
    ref = f(x, ref_buf)
    got = torch.compile(f, backend="neuron")(x, buf)
    assert all(o.device.type == "cpu" for o in got)
    assert torch.equal(buf, ref_buf)
    ref[0].add_(100)
    got[0].add_(100)
    assert torch.equal(got[1], ref[1])


def test_neuron_inputs_with_cpu_scalar_stay_on_neuron():
    f = torch.compile(lambda x, s: x * s, backend="neuron")
    out = f(torch.ones(3, device="neuron"), torch.tensor(2.0))
    assert out.device.type == "neuron" and out.cpu().tolist() == [2.0, 2.0, 2.0]
