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


# (module, name, how it is used): TorchNeuron's names that are not emulated.
NOT_EMULATED = [
    ("torch_neuronx", "nki_op", "call"),
    ("torch_neuronx", "wrap_nki", "call"),
    ("torch_neuronx", "get_executed_ops", "call"),
    ("torch_neuronx", "NeuronProfiler", "call"),
    ("torch_neuronx.profiling", "NeuronProfiler", "call"),
    ("torch_neuronx.nki_hop", "set_wrap_nki_enabled", "call"),
    ("torch_neuronx.nki_hop", "NKIKernelWrapper", "subclass"),
    ("torch_neuronx.nki_kernel", "TorchNeuronNKIKernel", "subclass"),
    ("torch_neuronx.kernels", "BaseNeuronKernel", "subclass"),
    ("torch_neuronx.python_ops", "register_python_operations", "call"),
    ("torch_neuronx.neuron_dynamo_backend", "save_mlir", "call"),
    ("torch_neuronx.distributed.ops", "all_gather_op", "call"),
    ("torch_neuronx.distributed.ops", "AllReduceOp", "call"),
    ("torch_neuronx.distributed.backend", "ProcessGroupNeuron", "call"),
    ("torch_neuronx.distributed.utils", "get_reduce_scatter_inputs_outputs", "call"),
]


@pytest.mark.parametrize("module,name,use", NOT_EMULATED)
def test_not_emulated_names_exist_and_raise_when_used(module, name, use):
    """Feature detection (hasattr, getattr with a default) finds them; using one raises
    NotImplementedError naming it and saying it is not emulated."""
    mod = importlib.import_module(module)
    assert hasattr(mod, name) and getattr(mod, name, None) is not None
    obj = getattr(mod, name)
    if use == "subclass":  # TorchNeuron's classes can be subclassed; instances fail
        obj = type("Sub", (obj,), {})
    with pytest.raises(NotImplementedError, match=rf"{name} is not emulated"):
        obj()
    assert not hasattr(torch_neuronx, "no_such_name")
    assert getattr(torch_neuronx, "no_such_name", 7) == 7


@pytest.mark.parametrize(
    "module",
    [
        "torch_neuronx.metrics",
        "torch_neuronx.streams",
        "torch_neuronx.nki_hop",
        "torch_neuronx.nki_kernel",
        "torch_neuronx.kernels",
        "torch_neuronx.python_ops",
        "torch_neuronx.distributed.tensor",
        "torch_neuronx.distributed.ops",
        "torch_neuronx.distributed.utils",
        "torch_neuronx.distributed.backend",
    ],
)
def test_torchneuron_submodules_import(module):
    importlib.import_module(module)


def test_working_names_of_the_submodules():
    import torch.distributed as dist

    import torch_neuronx.distributed.utils as du
    import torch_neuronx.streams as st

    assert st.Stream is torch.neuron.Stream and st.Event is torch.neuron.Event
    assert torch_neuronx.NeuronProfiler is torch_neuronx.profiling.NeuronProfiler
    assert torch_neuronx.distributed.backend.BACKEND_NAME == "neuron"
    assert du.get_reduce_type(dist.ReduceOp.MAX) == "MAX"
    assert 0 < int(du.get_free_port()) < 65536
    assert torch_neuronx.nki_kernel.IS_NKI_V2_AVAILABLE is False


def test_is_in_bad_fork_is_a_bool_set_in_a_forked_child():
    import os

    assert torch_neuronx._is_in_bad_fork is False  # a bool, as TorchNeuron's
    torch.ones(2, device="neuron").sum().item()  # the device is in use
    pid = os.fork()
    if pid == 0:
        os._exit(0 if torch_neuronx._is_in_bad_fork is True else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert torch_neuronx._is_in_bad_fork is False


def test_torch_neuron_current_stream_functions():
    """TorchNeuron's torch.neuron.wait_stream/wait_event/record_event/query/_sleep act on
    the current stream (values checked against the CPU)."""
    x = torch.randn(256, 256)
    s = torch.neuron.Stream()
    xd = x.to("neuron")
    torch.neuron.synchronize()
    with torch.neuron.stream(s):
        y = xd @ xd
        e = s.record_event()
    torch.neuron.wait_stream(s)
    z = y + 1
    torch.neuron.wait_event(e)
    ev = torch.neuron.record_event()
    assert isinstance(ev, torch.neuron.Event)
    ev.synchronize()
    assert torch.neuron.query() is True
    torch.neuron._sleep(10)
    torch.testing.assert_close(z.cpu(), x @ x + 1, rtol=1e-4, atol=1e-3)


def test_metrics_module(tmp_path):
    code = r"""
import torch, torch_neuronx.metrics as met
assert met.is_enabled() is False and met.get_counter_names() == [] and met.report() == ""
met.set_enabled(True)
met.clear_all()
a = torch.ones(3, 3, device="neuron")
for _ in range(2):
    torch.linalg.matrix_exp(a)  # no native kernel: 2 CPU fallback calls
f = torch.compile(lambda x: x * 3 - 1, backend="neuron")
f(torch.ones(5, device="neuron")).cpu()
fb = [n for n in met.get_counter_names() if n.startswith("CpuFallback.") and "matrix_exp" in n]
print("FALLBACK", [met.get_counter_value(n) for n in fb])
print("COMPILES", met.get_counter_value("CompilationCache.TotalCompilations") >= 1)
d = met.get_metric_data("CompilationCache.CompilationTime")
print("TIME", d["total_samples"], d["accumulator"] > 0, "Counter: CpuFallback." in met.report())
met.clear_all()
print("CLEARED", met.get_counter_names(), met.get_metric_names())
"""
    # an empty NEFF cache: a graph cached by an earlier run records no compile time
    env = {"TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path / "neff")}
    out = run_python(code, env=env, timeout=240).stdout
    assert "FALLBACK [2]" in out and "COMPILES True" in out, out
    assert "TIME 1 True True" in out and "CLEARED [] []" in out, out


def test_set_model_name_names_compiled_graphs():
    code = r"""
import torch, torch_neuronx
from torch_neuronx import neuron_dynamo_backend as nb
assert nb.get_model_name() == "model_default"  # TorchNeuron's default
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
