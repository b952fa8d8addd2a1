"""Checkpoints on neuron: Trainer resumes from a checkpoint with the uninterrupted run's
losses, and accelerate's save_state/load_state restore the neuron generators.

Found (transformers 5.24): Trainer's rng_state.pth holds the python, numpy and CPU
states only (it saves CUDA/NPU/HPU/MLU/MUSA generators, not neuron's), so a resumed
run with dropout on neuron draws other masks than the uninterrupted run; the Trainer
check therefore runs without dropout, and the neuron generator's round trip is
checked through accelerate, which saves torch.neuron.get_rng_state_all()."""

import pytest
from conftest import run_python
from hf_jobs import ACCELERATE_RNG, TRAINER, result

pytestmark = pytest.mark.slow
ENV = {"HF_HUB_OFFLINE": "1"}


def test_trainer_resume_matches_uninterrupted_run(tmp_path):
    spec = dict(use_cpu=False, compile=False, out=str(tmp_path / "run"), max_steps=4)
    spec.update(save_steps=2, dropout=0.0)
    full = result(run_python(TRAINER % dict(spec, resume=None), env=ENV, timeout=300).stdout)
    ckpt = tmp_path / "run" / "checkpoint-2"
    assert (ckpt / "optimizer.pt").exists() and (ckpt / "rng_state.pth").exists()
    resumed = result(
        run_python(TRAINER % dict(spec, resume=str(ckpt)), env=ENV, timeout=300).stdout
    )
    assert resumed["device"] == "neuron:0"
    # steps 1-2 are logged from the checkpoint's state, 3-4 computed after resuming
    assert resumed["losses"] == full["losses"] and len(full["losses"]) == 4


def test_accelerate_save_load_state_restores_neuron_rng(tmp_path):
    r = result(run_python(ACCELERATE_RNG % dict(out=str(tmp_path / "state")), env=ENV).stdout)
    assert r["device"] in ("neuron", "neuron:0")  # accelerate's single-process device
    assert "torch_neuron_manual_seed" in r["keys"]
    assert r["same"] and r["differs_from_next"]
