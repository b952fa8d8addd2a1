"""Hugging Face Trainer finds the neuron device through ``torch_neuronx`` and trains on
it, eagerly and with ``torch_compile=True``, with the CPU run's losses (no dropout: the
same computation on both devices). The scripts import neither torchneuron nor
torch_neuronx."""

import math

import pytest
from conftest import run_python_many
from hf_jobs import TRAINER, result

pytestmark = pytest.mark.slow


def _job(tmp_path, name, **kw):
    spec = dict(
        use_cpu=False,
        compile=False,
        out=str(tmp_path / name),
        max_steps=4,
        resume=None,
        save_steps=100,
        dropout=0.0,
    )
    spec.update(kw)
    return TRAINER % spec, {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def _close(a: dict, b: dict, rtol: float) -> None:
    assert a.keys() == b.keys() and len(a) == 4
    for k in a:
        assert math.isclose(a[k], b[k], rel_tol=rtol), (k, a[k], b[k])


def test_trainer_eager_and_compiled_match_cpu(tmp_path):
    procs = run_python_many(
        {
            "cpu": _job(tmp_path, "cpu", use_cpu=True),
            "eager": _job(tmp_path, "eager"),
            "compiled": _job(tmp_path, "compiled", compile=True),
        },
        timeout=400,
    )
    for k, p in procs.items():
        assert p.returncode == 0, f"{k}:\n{p.stderr[-4000:]}"
    cpu, eager, comp = (result(procs[k].stdout) for k in ("cpu", "eager", "compiled"))
    assert cpu["device"] == "cpu"
    # Default TrainingArguments pick the device: neuron:0, parameters moved there.
    assert eager["device"] == eager["param_device"] == "neuron:0"
    assert comp["device"] == comp["param_device"] == "neuron:0"
    # torch_compile=True picks the neuron backend, which compiled the step's graphs.
    assert comp["backend"] == "neuron" and comp["graphs"] > 0
    assert eager["fallbacks"] == [] and comp["fallbacks"] == []
    _close(eager["losses"], cpu["losses"], 1e-5)
    _close(comp["losses"], cpu["losses"], 1e-4)
