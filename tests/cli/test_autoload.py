"""Loading and registration: the ``torch.backends`` entry point loads the
device on a plain ``import torch``; PrivateUse1 is renamed ``neuron`` with the
generated ``tensor.neuron()``, ``module.neuron()``, storage methods and
``is_neuron`` attributes."""

import json

import pytest
import torch
from conftest import run_python_many

_PLAIN = """
import json, sys
import torch
t = torch.ones(2, device="neuron")
print(json.dumps({"device": str(t.device), "values": t.cpu().tolist(),
                  "module": torch.neuron.__name__, "loaded": "torchneuron" in sys.modules}))
"""
_OFF = """
import torch
try:
    torch.ones(2, device="neuron")
    print("created")
except RuntimeError as e:
    print("error:", e)
"""


@pytest.fixture(scope="module")
def children():
    return run_python_many(
        {
            "plain": (_PLAIN, {}),
            # PyTorch's switch for backend autoload: then nothing registers "neuron".
            "off": (_OFF, {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}),
        }
    )


def test_plain_import_torch_autoloads_the_device(children):
    proc = children["plain"]
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r == {
        "device": "neuron:0",
        "values": [1.0, 1.0],
        "module": "torchneuron.device_module",
        "loaded": True,
    }


def test_autoload_can_be_switched_off(children):
    proc = children["off"]
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("error:"), proc.stdout


def test_backend_is_named_neuron():
    assert torch._C._get_privateuse1_backend_name() == "neuron"
    assert torch.neuron is torch.get_device_module("neuron")
    assert torch.device("neuron:1").index == 1


def test_tensor_neuron_method():
    x = torch.arange(6.0).reshape(2, 3)
    d = x.neuron()
    assert d.device == torch.device("neuron", 0)
    assert d.is_neuron and not x.is_neuron
    assert torch.equal(d.cpu(), x)
    d1 = x.neuron(1)
    assert d1.device == torch.device("neuron", 1)
    d2 = x.neuron("neuron:2", non_blocking=True)
    assert d2.device.index == 2
    torch.neuron.synchronize(2)
    assert torch.equal(d2.cpu(), x)
    assert d.neuron() is d  # already there: no copy, as tensor.cuda()
    with torch.neuron.device(3):
        assert x.neuron().device.index == 3


def test_module_neuron_method():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    ref_params = {k: v.clone() for k, v in m.state_dict().items()}
    x = torch.randn(3, 4)
    ref = m(x)
    assert m.neuron() is m
    assert all(p.device == torch.device("neuron", 0) for p in m.parameters())
    for k, v in m.state_dict().items():
        assert torch.equal(v.cpu(), ref_params[k])
    out = m(x.neuron())
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), ref)
    m.neuron(1)
    assert {p.device for p in m.parameters()} == {torch.device("neuron", 1)}
    m.cpu()
    assert all(not p.is_neuron for p in m.parameters())


def test_untyped_storage():
    s = torch.UntypedStorage(16, device="neuron")
    assert s.device == torch.device("neuron", 0) and s.is_neuron and s.nbytes() == 16
    x = torch.arange(4, dtype=torch.int32)
    d = x.neuron()
    st = d.untyped_storage()
    assert st.is_neuron and st.nbytes() == 16 and st.device == d.device
    back = st.cpu()
    assert not back.is_neuron
    assert torch.equal(torch.tensor([], dtype=torch.int32).set_(back), x)
    h = x.untyped_storage().neuron()
    assert h.is_neuron and torch.equal(torch.tensor([], dtype=torch.int32).set_(h.cpu()), x)
    # A tensor over a neuron storage sees the data.
    t = torch.empty(0, dtype=torch.int32, device="neuron").set_(h)
    assert torch.equal(t.cpu(), x)


def test_storage_resize_keeps_contents():
    d = torch.arange(4, dtype=torch.float32).neuron()
    st = d.untyped_storage()
    st.resize_(32)
    assert st.nbytes() == 32
    t = torch.empty(0, device="neuron").set_(st, 0, (4,), (1,))
    assert torch.equal(t.cpu(), torch.arange(4.0))


def test_storage_slices_are_views():
    d = torch.arange(8, dtype=torch.float32).neuron()
    part = d.untyped_storage()[4:16]  # bytes of elements 1..3
    assert part.is_neuron and part.nbytes() == 12 and not part.resizable()
    as_tensor = torch.empty(0, device="neuron").set_(part, 0, (3,), (1,))
    assert torch.equal(as_tensor.cpu(), torch.tensor([1.0, 2.0, 3.0]))
    assert torch.equal(
        torch.tensor([], dtype=torch.float32).set_(part.cpu()), torch.tensor([1.0, 2.0, 3.0])
    )
    as_tensor.fill_(-1)  # writes through to d
    assert d.cpu().tolist() == [0.0, -1.0, -1.0, -1.0, 4.0, 5.0, 6.0, 7.0]
    # a view cannot grow, as on the CPU
    with pytest.raises(RuntimeError, match="not resizable"):
        part.resize_(64)
    with pytest.raises(RuntimeError, match="not resizable"):
        torch.empty(0, device="neuron").set_(part, 0, (8,), (1,))


def test_is_neuron_and_device_type_checks():
    d = torch.zeros(2, device="neuron")
    assert d.is_neuron
    assert d.device.type == "neuron"
    assert not torch.zeros(2).is_neuron
    assert d.new_ones(3).is_neuron
    assert torch.ones_like(d).device == d.device
    assert torch.empty_like(torch.zeros(2), device="neuron:1").device.index == 1
