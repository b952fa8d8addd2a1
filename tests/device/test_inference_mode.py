"""torch.inference_mode on neuron, as on the CPU: tensors made inside it are inference
tensors, and the device's kernels (which run on the stream's worker thread, outside the
mode) still write them. `x.cpu()` inside the mode had failed with "Inplace update to
inference tensor outside InferenceMode" in any `with torch.inference_mode():` block that
read a result on the host."""

import pytest
import torch


def _inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(4, 6, generator=g), torch.randn(6, 3, generator=g)


def test_eager_results_leave_the_device_inside_inference_mode():
    a, b = _inputs()
    with torch.inference_mode():
        ad, bd = a.to("neuron"), b.to("neuron")
        out = torch.relu(ad @ bd + 1)
        assert out.is_inference()
        got = out.cpu()
        host = torch.empty(4, 3)
        host.copy_(out)  # into a host tensor made inside the mode
        total = out.sum().item()
        rows = out.tolist()
        ad.mul_(2)  # an in-place update of an inference tensor inside the mode
        doubled = ad.cpu()
    ref = torch.relu(a @ b + 1)
    torch.testing.assert_close(got, ref)
    torch.testing.assert_close(host, ref)
    assert total == pytest.approx(ref.sum().item(), rel=1e-5)
    torch.testing.assert_close(torch.tensor(rows), ref)
    torch.testing.assert_close(doubled, a * 2)
    assert got.is_inference() and not torch.is_inference_mode_enabled()


def test_a_module_forward_and_its_results_outside_the_mode():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.GELU(), torch.nn.LayerNorm(8))
    x = torch.randn(5, 6)
    ref = m(x).detach()
    md = m.to("neuron")
    with torch.inference_mode():
        out = md(x.to("neuron"))
    # read after the mode ends, as a user's code does
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.to("cpu", torch.float64), ref.double(), rtol=1e-5, atol=1e-5)


def test_a_compiled_graph_inside_inference_mode():
    a, b = _inputs()
    f = torch.compile(lambda x, y: torch.tanh(x @ y) * 2, backend="neuron")
    with torch.inference_mode():
        out = f(a.to("neuron"), b.to("neuron"))
        got = out.cpu()
    torch.testing.assert_close(got, torch.tanh(a @ b) * 2, rtol=1e-5, atol=1e-5)
