"""torchneuron check for training: N AdamW steps on the device, the reference and in
float64 from the same initial state; loss curve, gradient norms per parameter group and
final parameters compared with the benchmark rule; step time and peak memory."""
import json

import pytest

from check_support import cli, fixture

FAST = ["--iterations", "5", "--max-warmup", "5", "--train-steps", "4"]


def test_training_steps_match_the_reference(tmp_path):
    j, h = tmp_path / "r.json", tmp_path / "r.html"
    code, out, err = cli("check", fixture("trainable"), *FAST, "--json", j, "--html", h)
    assert code == 0, out + err
    tr = json.loads(j.read_text())["training"]
    assert tr["status"] == "pass" and tr["steps"] == 4 and len(tr["per_step"]) == 4
    losses = [s["loss_device"] for s in tr["per_step"]]
    assert losses[-1] < losses[0]                       # the optimizer steps did train
    for s in tr["per_step"]:
        assert s["loss_device"] == pytest.approx(s["loss_reference"], rel=1e-4)
        assert set(s["grad_norm_device"]) == {"decay", "no_decay"} and all(s["grad_norm_passed"].values())
    assert tr["final_params"]["compared"] == 4 and tr["final_params"]["failed"] == []
    assert tr["peak_allocated_bytes"] > 0 and tr["step_time"]["device_p50_s"] > 0
    assert "Training — 4 steps" in out
    assert 'id="training"' in h.read_text() and "peak device memory with optimizer state" in h.read_text()


def test_planted_training_divergence_is_caught(tmp_path):
    j = tmp_path / "r.json"
    code, out, err = cli("check", fixture("trainable_perturbed"), *FAST, "--json", j)
    assert code == 1, out + err
    r = json.loads(j.read_text())
    assert r["training"]["status"] == "fail" and not r["training"]["per_step"][0]["loss_passed"]
    assert any(f.startswith("training: steps [1, 2, 3, 4] differ") for f in r["failures"])


def test_loss_fn_must_be_callable():
    code, _, err = cli("check", fixture("trainable_bad_loss"), *FAST)
    assert code == 2 and "loss_fn" in err


@pytest.mark.slow
def test_builtin_llama_tiny_train():
    code, out, err = cli("check", "llama-tiny-train", *FAST)
    assert code == 0, out + err
    assert "Training — 4 steps" in out and "PASS" in out
