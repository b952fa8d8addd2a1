"""torchneuron check, version manifest: recorded in every result."""

import platform

import torch
from check_support import FAST_KW, result

import torchneuron
from torchneuron.check import manifest


def test_manifest_contents(monkeypatch):
    monkeypatch.setenv("NEURON_CHECK_TEST_MARKER", "1")
    m = manifest.collect("neuron", ["torchneuron", "check", "mlp"])
    assert m["versions"]["torch"] == torch.__version__
    assert m["versions"]["torchneuron"] == torchneuron.__version__
    assert m["versions"]["python"] == platform.python_version()
    ds = m["device_stack"]
    info = torch.neuron.runtime_info()
    assert ds["runtime"] == info["name"] and ds["runtime_version"] == info["version"]
    props = torch.neuron.get_device_properties(0)
    assert (
        ds["hbm_bytes_per_core"] == props.total_memory
        and ds["logical_nc_config"] == props.logical_nc_config
    )
    assert ds["compiler"] == "torch.compile backend 'neuron'" and ds["compiler_note"] is None
    assert m["host"]["cpu_model"] and m["host"]["cpu_count"] >= 1
    assert m["env"]["NEURON_CHECK_TEST_MARKER"] == "1"
    assert all(k.startswith(("NEURON_", "TORCHNEURON_")) for k in m["env"])
    assert m["command"] == "torchneuron check mlp"


def test_every_result_has_a_manifest():
    r = result("mlp", **FAST_KW)
    assert {"versions", "device_stack", "host", "env", "created_utc"} <= set(r.manifest)


def test_manifest_diff():
    a = {"created_utc": "x", "versions": {"torch": "2.13.0", "numpy": "2"}, "env": {}}
    b = {
        "created_utc": "y",
        "versions": {"torch": "2.14.0", "numpy": "2"},
        "env": {"NEURON_X": "1"},
    }
    d = manifest.diff(a, b)
    assert {"key": "versions.torch", "baseline": "2.13.0", "current": "2.14.0"} in d
    assert any(x["key"] == "env" or x["key"] == "env.NEURON_X" for x in d)
    assert not any(x["key"] == "created_utc" for x in d)
