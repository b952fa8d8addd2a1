"""Printing a neuron tensor: the CPU's text plus device='neuron:N', values
after all queued work, no warnings (no narrowing, no fallback) and nothing
counted in the statistics."""

import warnings

import pytest
import torch

N = torch.neuron

SAMPLES = {
    "float32": torch.tensor([[1.5, -2.25], [3.0, 4.125]]),
    "float64": torch.tensor([1.0 + 1e-12, 2.5], dtype=torch.float64),
    "int64": torch.tensor([2**40, -3]),
    "int32": torch.tensor([7, 8], dtype=torch.int32),
    "bool": torch.tensor([True, False]),
    "float16": torch.tensor([0.5, 1.5], dtype=torch.float16),
    "bfloat16": torch.tensor([0.5, 1.5], dtype=torch.bfloat16),
    "complex64": torch.tensor([1 + 2j, -0.5j], dtype=torch.complex64),
    "scalar": torch.tensor(3.5),
    "empty": torch.empty(0, 3),
    "special": torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0]),
    "large": torch.arange(3000.0).reshape(60, 50),  # summarized with "..."
    "transposed": torch.arange(6.0).reshape(2, 3).t(),
    "requires_grad": torch.tensor([1.0, 2.0], requires_grad=True),
}


def _no_warnings(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    assert [str(w.message) for w in caught] == []
    return out


@pytest.mark.parametrize("name", list(SAMPLES))
def test_repr_shows_device_and_values_without_warnings(name):
    x = SAMPLES[name]
    d = x.detach().neuron().requires_grad_(x.requires_grad) if x.requires_grad else x.neuron()
    N.reset_narrowing_stats()
    N.reset_fallback_stats()
    text = _no_warnings(lambda: repr(d))
    assert "device='neuron:0'" in text
    # The rest is exactly the CPU's text.
    assert text.replace(", device='neuron:0'", "") == repr(x)
    assert _no_warnings(lambda: str(d)) == text
    assert N.narrowing_stats() == {} and N.fallback_stats() == {}


def test_repr_on_another_core():
    d = torch.tensor([1.0, 2.0]).to("neuron:3")
    assert repr(d) == "tensor([1., 2.], device='neuron:3')"


def test_print_waits_for_queued_work(capsys):
    a = torch.randn(200, 200, generator=torch.Generator().manual_seed(0))
    d = a.neuron()
    for _ in range(3):
        d = torch.tanh(d @ d / 200)
    ref = a
    for _ in range(3):
        ref = torch.tanh(ref @ ref / 200)
    print(d[:2, :3])  # a sync point: no synchronize() before it
    printed = capsys.readouterr().out
    assert printed.startswith("tensor([[") and "device='neuron:0'" in printed
    shown = torch.tensor(eval(printed[len("tensor(") : printed.index(", device")]))
    torch.testing.assert_close(shown, ref[:2, :3], rtol=0, atol=1e-4)  # 4 printed decimals


def test_formatting_and_item():
    d = torch.tensor([3.14159, 2.71828], dtype=torch.float64).neuron()
    assert _no_warnings(lambda: f"{d[0].item():.3f}") == "3.142"
    assert _no_warnings(lambda: d.tolist()) == [3.14159, 2.71828]
    assert _no_warnings(lambda: format(d[1], ".2f")) == "2.72"
    with torch.no_grad():
        assert "grad_fn" not in repr(torch.ones(2, requires_grad=True).neuron() * 2)
