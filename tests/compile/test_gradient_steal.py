"""A compiled backward's gradients are the graph's outputs themselves, however late the
launch runs (issue 22's exact gates: device-to-device copies per training step must not
depend on the worker thread's timing).

AccumulateGrad keeps a new gradient as ``.grad`` when nothing else holds it and copies it
otherwise (``torch/csrc/autograd/functions/accumulate_grad.h``). A queued launch that held
the output tensors made that copy depend on whether the device had run the launch yet."""

import torch
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401
from torchneuron.check.phases import trace


def _busy(device):
    """Queue ~50 ms of work on the device's stream: later launches run after the host
    has moved on (the window in which a held output changes AccumulateGrad's choice)."""
    a = torch.randn(768, 768, device=device)
    for _ in range(4):
        a = a @ a
        a = a / a.abs().amax()


def test_compiled_gradients_are_not_copied_when_the_launch_runs_late(fresh_compile_state):  # noqa: F811
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)
    ).to("neuron")
    x, y = torch.randn(8, 16, device="neuron"), torch.randn(8, 4, device="neuron")
    step_model = torch.compile(model, backend="neuron")

    def step():
        for p in model.parameters():
            p.grad = None
        _busy("neuron")
        torch.nn.functional.mse_loss(step_model(x), y).backward()

    step()  # compiles
    for _ in range(5):
        ks = trace.record(step, torch.neuron.synchronize)
        dtod = [k for k in ks if k.kind == "dtod"]
        assert dtod == [], [(k.name, k.op) for k in dtod]
    # and the gradients are right: the CPU's
    ref = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    ref.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    torch.nn.functional.mse_loss(ref(x.cpu()), y.cpu()).backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, atol=1e-5, rtol=1e-5)
