"""The `torch_neuronx` import name: TorchNeuron's names work with its meanings or raise
NotImplementedError naming them; transformers and accelerate detect the device by it."""

import importlib
import importlib.util

import pytest
import torch
from conftest import assert_device_works, run_python

import torch_neuronx


def test_found_by_find_spec_and_detected_by_hf():
    assert importlib.util.find_spec("torch_neuronx") is not None
    from accelerate.utils import is_neuron_available
    from transformers.utils import is_torch_neuron_available

    assert is_torch_neuron_available() and is_neuron_available()
    assert torch_neuronx.neuron is torch.neuron
    assert importlib.import_module("torch_neuronx.neuron") is torch.neuron
    assert importlib.import_module("torch_neuronx.memory") is torch.neuron.memory


def test_device_functions_have_torchneuron_meanings():
    n = torch.neuron.device_count()
    assert torch_neuronx.device_count() == n
    assert torch_neuronx.is_neuron_runtime_initialized()
    prev = torch_neuronx.current_device()
    torch_neuronx.set_device(1)
    assert torch.neuron.current_device() == 1 == torch_neuronx.current_device()
    torch_neuronx.set_device(prev)
    for bad in (-1, n):
        with pytest.raises(ValueError, match="Invalid device id"):
            torch_neuronx.set_device(bad)
    assert torch_neuronx.current_device() == prev
    p = torch_neuronx.get_device_properties("neuron:1")
    assert p.total_memory == torch.neuron.get_device_properties(1).total_memory
    with pytest.raises(ValueError, match="Expected neuron device"):
        torch_neuronx.get_device_properties("cpu")
    with pytest.raises(ValueError, match="Invalid device id"):
        torch_neuronx.get_device_properties(n)
    x = torch.ones(1000, device="neuron:0")
    torch_neuronx.synchronize()
    assert torch_neuronx.memory_allocated(0) == torch.neuron.memory_allocated(0) >= 4000
    s = torch_neuronx.Stream(device=0)
    with torch_neuronx.stream(s):
        assert torch_neuronx.current_stream(0) == s
    del x
    assert_device_works()


def test_fallback_op_tracking():
    torch_neuronx.clear_op_tracking()
    a = torch.ones(3, 3, device="neuron")
    torch.linalg.matrix_exp(a)  # no native kernel
    assert torch_neuronx.get_fallback_ops() == sorted(torch.neuron.fallback_stats())
    assert any("matrix_exp" in op for op in torch_neuronx.get_fallback_ops())
    torch_neuronx.clear_op_tracking()
    assert torch_neuronx.get_fallback_ops() == []


@pytest.mark.parametrize(
    "expr",
    [
        "torch_neuronx.nki_op",
        "torch_neuronx.wrap_nki",
        "torch_neuronx.python_ops",
        "torch_neuronx.get_executed_ops()",
        "torch_neuronx.profiling.NeuronProfiler()",
        "torch_neuronx.neuron_dynamo_backend.save_mlir",
        "torch_neuronx.distributed.tensor",
    ],
)
def test_not_emulated_names_raise_naming_them(expr):
    name = expr.removesuffix("()")
    with pytest.raises(NotImplementedError, match=name.replace(".", r"\.")):
        eval(expr, {"torch_neuronx": torch_neuronx})
    with pytest.raises(AttributeError):
        torch_neuronx.no_such_name  # noqa: B018


def test_set_model_name_names_compiled_graphs():
    code = r"""
import torch, torch_neuronx
from torch_neuronx import neuron_dynamo_backend as nb
assert nb.get_model_name() == "model"
nb.set_model_name("bert_tiny")
f = torch.compile(lambda x: x * 2 + 1, backend="neuron")
y = f(torch.ones(4, device="neuron"))
torch_neuronx.synchronize()
names = {m["model_name"] for m in torch_neuronx.get_dynamo_metrics()}
print("NAMES", sorted(names), y.cpu().tolist(), nb.get_rank())
try:
    nb.set_model_name("")
except ValueError:
    print("BAD-NAME ValueError")
"""
    out = run_python(code, timeout=240).stdout
    assert "NAMES ['bert_tiny'] [3.0, 3.0, 3.0, 3.0] 0" in out
    assert "BAD-NAME ValueError" in out
