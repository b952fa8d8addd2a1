"""Devices: availability, count, current device, the device context manager,
names and properties, and the environment that shapes the emulated chip
(NEURON_RT_VISIBLE_CORES, NEURON_LOGICAL_NC_CONFIG, TORCHNEURON_HBM_GIB)."""

import json
import os
import threading

import pytest
import torch
from conftest import assert_device_works, run_python_many

GiB = 2**30


def test_available_with_four_logical_cores_by_default():
    assert torch.neuron.is_available()
    # One Trainium2 chip at NEURON_LOGICAL_NC_CONFIG=2 (the default): 4 logical cores.
    assert torch.neuron.device_count() == 4
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("neuron")
    assert torch.accelerator.device_count() == 4
    assert torch.device("neuron").type == "neuron"


def test_current_and_set_device():
    assert torch.neuron.current_device() == 0
    torch.neuron.set_device(2)
    assert torch.neuron.current_device() == 2
    assert torch.accelerator.current_device_index() == 2
    # A tensor without an index goes to the current device.
    t = torch.ones(3, device="neuron")
    assert t.device == torch.device("neuron", 2)
    torch.neuron.set_device("neuron:1")
    assert torch.neuron.current_device() == 1
    torch.neuron.set_device(torch.device("neuron", 3))
    assert torch.neuron.current_device() == 3
    assert torch.equal(t.cpu(), torch.ones(3))


def test_device_context_manager_restores_previous_device():
    torch.neuron.set_device(1)
    with torch.neuron.device(3):
        assert torch.neuron.current_device() == 3
        assert torch.zeros(2, device="neuron").device.index == 3
        with torch.neuron.device("neuron:0"):
            assert torch.neuron.current_device() == 0
        assert torch.neuron.current_device() == 3
    assert torch.neuron.current_device() == 1
    with torch.neuron.device(None):  # no change, as torch.cuda.device(None)
        assert torch.neuron.current_device() == 1
    # Restored also when the block raises.
    with pytest.raises(ZeroDivisionError):
        with torch.neuron.device(2):
            1 / 0
    assert torch.neuron.current_device() == 1


def test_current_device_is_per_thread():
    seen = {}

    def worker():
        seen["start"] = torch.neuron.current_device()
        torch.neuron.set_device(2)
        seen["after"] = torch.neuron.current_device()
        seen["tensor"] = (torch.ones(2, device="neuron") * 3).cpu().tolist()
        seen["where"] = torch.ones(1, device="neuron").device.index

    torch.neuron.set_device(1)
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == {"start": 0, "after": 2, "tensor": [3.0, 3.0], "where": 2}
    assert torch.neuron.current_device() == 1  # as CUDA: each thread has its own


def test_torch_device_guard_on_tensor_device():
    # PyTorch's own guard (used by ops on a tensor of another core) switches back.
    x = torch.arange(4.0, device="neuron:2")
    y = x * 3
    assert y.device.index == 2
    assert torch.neuron.current_device() == 0
    assert torch.equal(y.cpu(), torch.arange(4.0) * 3)


@pytest.mark.parametrize("bad", [4, 17, "neuron:4", torch.device("neuron", 9)])
def test_invalid_device_index_errors_name_index_and_count(bad):
    with pytest.raises(
        torch.AcceleratorError, match=r"invalid neuron device index \d+: 4 NeuronCore"
    ):
        torch.neuron.set_device(bad)
    assert torch.neuron.current_device() == 0
    with pytest.raises(torch.AcceleratorError, match="4 NeuronCore"):
        torch.neuron.get_device_properties(bad)
    with pytest.raises(torch.AcceleratorError):
        with torch.neuron.device(bad):
            pass
    assert_device_works()


def test_invalid_device_index_for_tensors():
    with pytest.raises(
        torch.AcceleratorError, match=r"invalid neuron device index 4: 4 NeuronCore"
    ):
        torch.ones(2, device="neuron:4")
    with pytest.raises(torch.AcceleratorError, match="invalid neuron device index 7"):
        torch.ones(2).to("neuron:7")
    with pytest.raises(RuntimeError):
        torch.device("neuron:-2")
    assert_device_works()


def test_wrong_device_type_is_rejected():
    with pytest.raises(ValueError, match="expected a neuron device"):
        torch.neuron.set_device("cpu")
    with pytest.raises(ValueError, match="expected a neuron device"):
        torch.neuron.get_device_properties(torch.device("cpu"))


def test_device_name_and_properties():
    name = torch.neuron.get_device_name()
    assert "Trainium2" in name and "LNC=2" in name
    assert torch.neuron.get_device_name(3) == name
    props = torch.neuron.get_device_properties(0)
    assert props.name == name
    assert props.total_memory == 24 * GiB
    assert props.logical_nc_config == 2
    assert [torch.neuron.get_device_properties(i).logical_id for i in range(4)] == [0, 1, 2, 3]
    assert "total_memory=24576MB" in repr(props)
    free, total = torch.neuron.mem_get_info(0)
    assert total == 24 * GiB and 0 < free <= total


def test_misc_module_functions():
    assert torch.neuron.is_bf16_supported()
    assert torch.neuron.get_amp_supported_dtype() == [torch.bfloat16, torch.float16]
    assert torch.neuron.is_initialized()
    info = torch.neuron.runtime_info()
    assert info["name"] == "emulator"
    assert info["logical_nc_config"] == 2 and info["visible"] == [0, 1, 2, 3]
    # the suite's second run sets TORCHNEURON_PROTECT_MEMORY=1: it must take effect
    assert info["protect_memory"] == (os.environ.get("TORCHNEURON_PROTECT_MEMORY") == "1")


_REPORT = """
import json, torch
n = torch.neuron.device_count()
out = {"count": n, "available": torch.neuron.is_available()}
if n:
    out["ids"] = [torch.neuron.get_device_properties(i).logical_id for i in range(n)]
    out["mem"] = [torch.neuron.get_device_properties(i).total_memory for i in range(n)]
    out["name"] = torch.neuron.get_device_name(0)
    out["last"] = (torch.arange(3.0, device=f"neuron:{n - 1}") + 1).cpu().tolist()
else:
    try:
        torch.ones(1, device="neuron")
    except RuntimeError as e:
        out["error"] = str(e)
print(json.dumps(out))
"""

# One child process per environment, all started together (module fixture).
_ENVS = {
    "visible 0": {"NEURON_RT_VISIBLE_CORES": "0"},
    "visible 0-1": {"NEURON_RT_VISIBLE_CORES": "0-1"},
    "visible 0,2": {"NEURON_RT_VISIBLE_CORES": "0,2", "TORCHNEURON_HBM_GIB": "0.5"},
    "lnc 1": {"NEURON_LOGICAL_NC_CONFIG": "1"},
    "bad visible": {"NEURON_RT_VISIBLE_CORES": "7"},  # only 0-3 exist at LNC=2
    "bad hbm": {"TORCHNEURON_HBM_GIB": "lots"},
}


@pytest.fixture(scope="module")
def reports():
    procs = run_python_many({k: (_REPORT, env) for k, env in _ENVS.items()})
    out = {}
    for key, proc in procs.items():
        assert proc.returncode == 0, f"{key}: {proc.stderr}"
        out[key] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.parametrize("visible,ids", [("0", [0]), ("0-1", [0, 1]), ("0,2", [0, 2])])
def test_visible_cores(reports, visible, ids):
    r = reports[f"visible {visible}"]
    assert r["count"] == len(ids)
    assert r["ids"] == ids  # renumbered 0..n-1 in the order listed
    assert r["last"] == [1.0, 2.0, 3.0]


def test_logical_nc_config_1_gives_8_cores_of_12_gib(reports):
    r = reports["lnc 1"]
    assert r["count"] == 8
    assert r["ids"] == list(range(8))
    assert r["mem"] == [12 * GiB] * 8
    assert "LNC=1" in r["name"]


def test_hbm_capacity_override(reports):
    assert reports["visible 0,2"]["mem"] == [GiB // 2, GiB // 2]


def test_bad_environment_shows_as_no_device_and_names_the_variable(reports):
    r = reports["bad visible"]
    assert r["count"] == 0 and not r["available"]
    assert "NEURON_RT_VISIBLE_CORES='7'" in r["error"] and "out of range" in r["error"]
    r = reports["bad hbm"]
    assert r["count"] == 0 and "TORCHNEURON_HBM_GIB='lots'" in r["error"]


def test_forked_child_cannot_use_an_initialized_device(run_py):
    # As CUDA: the stream workers do not survive fork(), so the child gets a
    # clear error instead of a hang; the parent keeps working.
    r = run_py(
        """
        import os, torch
        torch.ones(2, device="neuron").sum().item()
        pid = os.fork()
        if pid == 0:
            try:
                torch.ones(2, device="neuron").sum().item()
                os._exit(3)
            except RuntimeError as e:
                os._exit(0 if "forked subprocess" in str(e) and torch.neuron._is_in_bad_fork() else 4)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        assert not torch.neuron._is_in_bad_fork()
        assert torch.ones(3, device="neuron").sum().item() == 3
        print("ok")
    """,
        timeout=60,
    )
    assert "ok" in r.stdout


def test_bad_environment_is_named_at_first_device_use(run_py):
    # import torch still works (CPU programs are unaffected); the device
    # reports why it is unusable.
    r = run_py(
        """
        import torch
        assert torch.ones(2).sum().item() == 2
        assert not torch.neuron.is_available()
        try:
            torch.ones(2, device="neuron")
        except RuntimeError as e:
            print("ERR", e)
    """,
        env={"NEURON_LOGICAL_NC_CONFIG": "3"},
    )
    assert "ERR" in r.stdout and "NEURON_LOGICAL_NC_CONFIG" in r.stdout, r.stdout


def test_bad_fallback_mode_does_not_break_import(run_py):
    r = run_py(
        """
        import torch
        x = torch.arange(5.0, device="neuron")
        assert (x + 1).sum().item() == 15          # native ops are unaffected
        try:
            torch.median(x)  # no native kernel: reaches the fallback
        except RuntimeError as e:
            print("ERR", e)
    """,
        env={"TORCHNEURON_FALLBACK": "maybe"},
    )
    assert "ERR" in r.stdout and "TORCHNEURON_FALLBACK" in r.stdout and "maybe" in r.stdout, (
        r.stdout
    )
