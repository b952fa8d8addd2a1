"""torchneuron check for training: N AdamW steps on the device, the reference and in
float64 from the same initial state; loss curve, gradient norms per parameter group and
final parameters compared with the benchmark rule; step time and peak memory."""

import json
import re

import pytest
import torch
from check_support import cli, fixture

from torchneuron.check import autocast_available
from torchneuron.check.phases.phase2 import compare
from torchneuron.check.phases.training_compare import compare_update

FAST = ["--iterations", "5", "--max-warmup", "5", "--train-steps", "4"]


def test_training_steps_match_the_reference(tmp_path):
    j, h = tmp_path / "r.json", tmp_path / "r.html"
    code, out, err = cli(
        "check", fixture("trainable"), *FAST, "--details", "--json", j, "--html", h
    )
    assert code == 0, out + err
    tr = json.loads(j.read_text())["training"]
    assert tr["status"] == "pass" and tr["steps"] == 4 and len(tr["per_step"]) == 4
    losses = [s["loss_device"] for s in tr["per_step"]]
    assert losses[-1] < losses[0]  # the optimizer steps did train
    for s in tr["per_step"]:
        assert s["loss_device"] == pytest.approx(s["loss_reference"], rel=1e-4)
        assert set(s["grad_norm_device"]) == {"decay", "no_decay"} and all(
            s["grad_norm_passed"].values()
        )
    assert tr["final_params"]["compared"] == 4 and tr["final_params"]["failed"] == []
    assert tr["peak_allocated_bytes"] > 0 and tr["step_time"]["device_p50_s"] > 0
    assert "Training — 4 steps" in out
    assert (
        'id="training"' in h.read_text()
        and "peak device memory with optimizer state" in h.read_text()
    )


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
def test_builtin_llama_tiny_train(tmp_path):
    # --mode both: eager and compiled training (the rotary embedding's backward needs
    # passes/legalize/clamp_slice_bounds.py to lower)
    code, out, err = cli(
        "check", "llama-tiny-train", *FAST, "--details", "--json", str(tmp_path / "r.json")
    )
    assert code == 0, out + err
    assert "Training — 4 steps" in out and "PASS" in out
    import json

    r = json.loads((tmp_path / "r.json").read_text())
    assert r["training"]["compiled"]["status"] == "pass", r["training"]["compiled"]


def test_step_function_form_matches_loss_fn_form(tmp_path):
    """step(model, inputs) -> loss gives the same steps as the (model, inputs, loss_fn) form."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for fx, j in (("trainable", a), ("trainable_step", b)):
        code, out, err = cli("check", fixture(fx), *FAST, "--mode", "eager", "--json", j)
        assert code == 0, out + err
    ta, tb = (json.loads(p.read_text())["training"] for p in (a, b))
    assert tb["form"] == "step(model, inputs)" and ta["form"] == "loss_fn(output)"
    assert tb["status"] == "pass"
    for sa, sb in zip(ta["per_step"], tb["per_step"]):
        assert sb["loss_device"] == pytest.approx(sa["loss_device"], rel=1e-6)
        assert sb["loss_reference"] == pytest.approx(sa["loss_reference"], rel=1e-6)


@pytest.mark.parametrize(
    "fx,words",
    [
        ("trainable_step_no_grad", "does not require grad"),
        ("trainable_step_vector", "expected a floating scalar"),
        ("trainable_three_args", "3 required positional"),
    ],
)
def test_bad_training_callable_is_a_usage_error(fx, words):
    code, _, err = cli("check", fixture(fx), *FAST, "--mode", "eager")
    assert code == 2 and words in err, err


def test_compiled_training_matches_the_reference(tmp_path):
    """--mode both: forward and backward compiled with backend neuron, same rule per step."""
    j = tmp_path / "r.json"
    code, out, err = cli("check", fixture("trainable"), *FAST, "--json", j)
    assert code == 0, out + err
    tr = json.loads(j.read_text())["training"]
    assert tr["modes"] == ["eager", "compile"]
    c = tr["compiled"]
    assert c["status"] == "pass" and len(c["per_step"]) == 4 and c["final_params"]["failed"] == []
    for e, s in zip(tr["per_step"], c["per_step"]):
        assert s["loss_device"] == pytest.approx(s["loss_reference"], rel=1e-4)
        assert s["loss_device"] == pytest.approx(e["loss_device"], rel=1e-4)
    assert c["peak_allocated_bytes"] > 0 and c["step_time"]["first_step_device_s"] > 0


def test_compiled_training_divergence_is_caught(tmp_path):
    j = tmp_path / "r.json"
    code, out, err = cli(
        "check", fixture("trainable_perturbed"), *FAST, "--mode", "compile", "--json", j
    )
    r = json.loads(j.read_text())
    assert code == 1, out + err
    assert r["training"]["compiled"]["status"] == "fail" and "compiled:" in r["training"]["reason"]


def test_compiled_training_in_every_report(tmp_path):
    j, h, x = tmp_path / "r.json", tmp_path / "r.html", tmp_path / "r.xml"
    code, out, err = cli(
        "check",
        fixture("trainable_step"),
        *FAST,
        "--details",
        "--json",
        j,
        "--html",
        h,
        "--junit",
        x,
    )
    assert code == 0, out + err
    assert "Training — 4 steps" in out and "Training (compiled, backend neuron) — 4 steps" in out
    assert 'id="training-compiled"' in h.read_text()
    xml = x.read_text()
    assert 'name="training.eager"' in xml and 'name="training.compiled"' in xml
    assert json.loads(j.read_text())["training"]["compiled"]["status"] == "pass"


def test_raising_loss_fn_is_a_usage_error_found_on_the_reference():
    code, out, err = cli("check", fixture("trainable_loss_raises"), *FAST, "--mode", "eager")
    assert code == 2, out + err
    assert (
        "training: loss_fn(output) raised RuntimeError in the reference run (cpu): shape '[3, 5]' is invalid"
        in err
    ), err
    assert (
        "Traceback" not in out + err and "check_training.py" in err
    )  # where it was raised, no traceback


def test_loss_fn_raising_on_the_device_only_is_a_device_failure(tmp_path):
    j = tmp_path / "r.json"
    code, out, err = cli(
        "check", fixture("trainable_loss_raises_on_device"), *FAST, "--mode", "eager", "--json", j
    )
    assert code == 1, out + err
    assert "Traceback" not in out + err
    tr = json.loads(j.read_text())["training"]
    assert tr["status"] == "fail" and "loss refuses the neuron device" in tr["reason"]


def test_step_calling_backward_itself_is_a_usage_error():
    code, out, err = cli("check", fixture("trainable_step_backward"), *FAST, "--mode", "eager")
    assert code == 2, out + err
    assert (
        "called backward() itself" in err and "return the loss without calling backward()" in err
    ), err
    assert "Traceback" not in out + err


def test_nan_loss_on_both_sides_is_warned_as_phase_2_does(tmp_path):
    # phase 2's rule: non-finite on both sides passes allclose (equal_nan) but cannot be
    # judged: a warning naming the steps and groups, in the terminal and the JSON
    j = tmp_path / "r.json"
    code, out, err = cli(
        "check", fixture("trainable_nan_loss"), *FAST, "--mode", "eager", "--json", j
    )
    assert code == 0, out + err
    r = json.loads(j.read_text())
    import math

    assert all(
        s["loss_device"] is None or math.isnan(s["loss_device"]) for s in r["training"]["per_step"]
    )
    w = [x for x in r["warnings"] if x.startswith("training: ")]
    assert any("loss at step(s) 1-4 is NaN or infinite on both" in x for x in w), w
    assert any("gradient norm (decay) at step(s) 1-4" in x for x in w), w
    assert any("final parameter(s)" in x for x in w), w
    assert "cannot judge" in out and "Warnings" in out


def test_frozen_model_is_a_usage_error_naming_the_cause():
    code, out, err = cli("check", fixture("trainable_frozen"), *FAST, "--mode", "eager")
    assert code == 2, out + err
    assert "no trainable parameter" in err and "does not require grad" not in err, err


def test_compiled_steps_that_run_no_compiled_graph_fail(tmp_path):
    """A step calling model.inner(...) reaches the uncompiled submodule through the compiled
    wrapper: the compiled steps are eager ones and must not pass as compiled."""
    j = tmp_path / "r.json"
    code, out, err = cli(
        "check",
        fixture("trainable_step_inner"),
        *FAST,
        "--mode",
        "compile",
        "--details",
        "--json",
        j,
    )
    assert code == 1, out + err
    c = json.loads(j.read_text())["training"]["compiled"]
    assert c["status"] == "fail" and c["graph_runs"] == 0 and "per_step" not in c
    assert c["reason"].startswith(
        "no graph compiled by torch.compile(backend='neuron') ran during the compiled steps"
    )
    assert "calls a submodule" in c["reason"]
    assert "Training (compiled): no graph compiled" in out


def test_compiled_steps_count_their_graph_runs(tmp_path):
    j = tmp_path / "r.json"
    code, out, err = cli("check", fixture("trainable"), *FAST, "--mode", "compile", "--json", j)
    assert code == 0, out + err
    c = json.loads(j.read_text())["training"]["compiled"]
    assert (
        c["status"] == "pass" and c["graph_runs"] >= 2 * 4
    )  # a forward and a backward graph per step


def test_tiny_loss_skew_is_caught(tmp_path):
    """Losses of order 1e-13 with the device 1.5x off in training: an absolute tolerance of
    1e-4 would pass them; the series' own magnitude scales it."""
    j = tmp_path / "r.json"
    code, out, err = cli(
        "check", fixture("trainable_tiny_loss_skewed"), *FAST, "--mode", "eager", "--json", j
    )
    assert code == 1, out + err
    tr = json.loads(j.read_text())["training"]
    for s in tr["per_step"]:
        assert s["loss_reference"] < 1e-10 and s["loss_device"] == pytest.approx(
            2.25 * s["loss_reference"], rel=1e-3
        )
        assert not s["loss_passed"] and not any(s["grad_norm_passed"].values())
    assert tr["loss_atol"] < 1e-4 * 1e-10


def test_correct_tiny_loss_passes(tmp_path):
    j = tmp_path / "r.json"
    code, out, err = cli(
        "check", fixture("trainable_tiny_loss"), *FAST, "--mode", "eager", "--json", j
    )
    assert code == 0, out + err
    tr = json.loads(j.read_text())["training"]
    assert tr["status"] == "pass" and all(s["loss_reference"] < 1e-10 for s in tr["per_step"])
    for s in tr["per_step"]:
        assert s["loss_device"] == pytest.approx(s["loss_fp64"], rel=1e-4)


def test_update_comparison_is_scaled_to_the_update():
    torch.manual_seed(0)
    p0 = torch.randn(64, 64)
    step = 3e-4 * torch.randn(64, 64, dtype=torch.float64)  # ~ steps * lr
    g = p0.double() + step
    r = g.float()
    c = compare_update(r, r, g, p0, 1e-2, torch.bfloat16)
    assert c["passed"] and c["compared"] == "update (final - initial)" and c["dtype"] == "float32"
    assert c["atol"] == pytest.approx(
        1e-2 * float(step.abs().max()) + 2**-23 * float(g.abs().max())
    )
    wrong = (p0.double() - step).float()  # the update's sign flipped
    assert compare(wrong, r, g, 1e-2, torch.bfloat16)["passed"]  # final values within 1e-2: passed
    c = compare_update(wrong, r, g, p0, 1e-2, torch.bfloat16)
    assert not c["passed"] and c["decided_by"].startswith("RMSE")
    # the reference's own float32 rounding of the parameters, on the device too: passes
    ulp = torch.where(torch.rand(64, 64) < 0.5, torch.nextafter(r, r + 1), r)
    assert compare_update(ulp, r, g, p0, 1e-4, torch.float32)["passed"]
    assert compare_update(r.bfloat16(), r, g, p0, 1e-2, torch.bfloat16)["decided_by"].startswith(
        "dtype mismatch"
    )
    # bfloat16: a few elements' steps flipped (gradients near 0), more than on the reference: the
    # RMSE step fails, the update as a whole is within sqrt(2 tol) of float64's
    few = (p0.double() + torch.where(torch.rand(64, 64) < 0.002, -step, step)).float()
    c = compare_update(few, r, g, p0, 1e-2, torch.bfloat16)
    assert (
        c["passed"]
        and c["decided_by"].startswith("relative RMSE")
        and 0.03 < c["relative_rmse"] < 0.141
    )
    half = (p0.double() + torch.where(torch.rand(64, 64) < 0.2, -step, step)).float()
    assert not compare_update(half, r, g, p0, 1e-2, torch.bfloat16)["passed"]


def _three_eager_steps(name: str, dtype: str, *options) -> tuple[int, str, str]:
    """The fixture ``name`` checked for 3 eager training steps in ``dtype``."""
    return cli(
        "check",
        fixture(name),
        "--iterations",
        "5",
        "--max-warmup",
        "5",
        "--train-steps",
        "3",
        "--mode",
        "eager",
        "--dtype",
        dtype,
        *options,
    )


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_gradient_of_the_wrong_sign_is_caught(tmp_path, dtype):
    """The device's fc1.weight gradient has the wrong sign. In bfloat16, 3 steps: the losses
    and gradient norms agree and the final parameters are within an absolute 1e-2 of the
    reference's; their updates (final - initial) are opposite."""
    if dtype != "float32" and not autocast_available(getattr(torch, dtype)):
        pytest.skip(f"torch.autocast('neuron', {dtype}) is not available")
    j = tmp_path / "r.json"
    code, out, err = _three_eager_steps("trainable_sign_flipped", dtype, "--json", j)
    assert code == 1, out + err
    tr = json.loads(j.read_text())["training"]
    assert "fc1.weight" in tr["final_params"]["failed"] and tr["final_params"][
        "compared_as"
    ].startswith("update")
    assert "parameter updates differ: fc1.weight" in tr["reason"]
    if dtype == "bfloat16":
        assert all(s["loss_passed"] and all(s["grad_norm_passed"].values()) for s in tr["per_step"])
    code, out, err = _three_eager_steps("trainable", dtype)
    assert code == 0, out + err


def test_loss_fn_failing_only_in_the_float64_run_says_so():
    code, out, err = cli("check", fixture("trainable_f32_closure"), *FAST, "--mode", "eager")
    assert code == 2, out + err
    assert "raised RuntimeError in the float64 golden run (it ran on the reference)" in err, err
    assert (
        "move or cast closed-over tensors with .to(output)" in err and "Traceback" not in out + err
    )


def test_junit_eager_training_case_does_not_carry_the_compiled_failure(tmp_path):
    x, j = tmp_path / "r.xml", tmp_path / "r.json"
    code, out, err = cli(
        "check", fixture("trainable_no_lowering"), *FAST, "--junit", x, "--json", j
    )
    assert code == 1, out + err
    tr = json.loads(j.read_text())["training"]
    assert tr["compiled"]["status"] == "fail" and tr["eager_verdict"]["status"] == "pass", tr
    import xml.etree.ElementTree as ET

    cases = {c.get("name"): c for c in ET.parse(x).getroot().iter("testcase")}
    assert cases["training.eager"].find("failure") is None
    assert "compiled training raised" in cases["training.compiled"].find("failure").get(
        "message", ""
    ) + (cases["training.compiled"].find("failure").text or "")


def test_training_memory_is_compared_with_the_baseline(tmp_path):
    # review item 5: the training's peak memory with the optimizer's state went from 554 KiB to
    # 100 MiB on re-check and nothing was compared. Now it is, by the inference memory rule;
    # step times are saved and shown, not decided (a few wall-time steps give no interval)
    b, j = tmp_path / "b", tmp_path / "r.json"
    code, out, err = cli(
        "check",
        fixture("trainable"),
        *FAST,
        "--mode",
        "eager",
        "--baseline-runs",
        "1",
        "--save-baseline",
        b,
    )
    assert code == 0, out + err
    assert "only the training's peak memory" in " ".join((out + err).split())  # rich wraps lines
    saved = json.load(open(b / "baseline.json"))["metrics"]["training"]
    assert saved["peak_allocated_bytes"] > 0 and saved["step_time"]["device_p50_s"] > 0
    h = tmp_path / "r.html"
    common = [
        *FAST,
        "--mode",
        "eager",
        "--max-latency-regression",
        "3",
        "--baseline",
        b,
        "--json",
        j,
        "--html",
        h,
    ]
    code, out, err = cli("check", fixture("trainable"), *common)
    r = json.loads(j.read_text())
    tr = r["baseline"]["training"]
    assert tr["decision"] == "pass" and not tr["regressions"], out + err
    assert tr["step_time"]["baseline_device_p50_s"] == saved["step_time"]["device_p50_s"]
    _html_training_rows_match(h.read_text(), tr, "PASS")
    # the accepted run's training peak was a tenth (the threshold's floor lowered: a tiny model)
    meta = json.load(open(b / "baseline.json"))
    meta["metrics"]["training"]["peak_allocated_bytes"] //= 10
    json.dump(meta, open(b / "baseline.json", "w"))
    th = json.load(open(b / "thresholds.json"))
    th["peak_memory_min_bytes"] = 0
    json.dump(th, open(b / "thresholds.json", "w"))
    code, out, err = cli("check", fixture("trainable"), *common)
    assert code == 1, out + err
    assert "regression: training memory" in out
    tr = json.loads(j.read_text())["baseline"]["training"]
    assert tr["regressed"]
    _html_training_rows_match(h.read_text(), tr, "FAIL")


def test_training_memory_threshold_reads_the_same_in_the_table_and_the_regression():
    # the threshold cell said "more than the floor" where the row above said "+1.00 MiB", and the
    # regression "at least 1024 KiB"
    from torchneuron.check import formatting
    from torchneuron.check.baseline import compare as baseline_mod
    from torchneuron.check.result_training import TrainingResult

    th = {"peak_memory": 0.10, "peak_memory_min_bytes": 1 << 20}
    bmx = {"training": {"peak_allocated_bytes": 4 << 20}}
    now = TrainingResult(status="pass", peak_allocated_bytes=6 << 20)
    out = baseline_mod.training(bmx, now, th)
    ((cells, verdict),) = formatting.training_baseline_rows(out)
    assert verdict == "fail" and cells[4] == "+10% and +1.00 MiB"
    assert out["regressions"][0].endswith("(threshold +10% and +1.00 MiB)"), out["regressions"]
    # a result written before the threshold was kept: its limit, never "the floor"
    old = {k: v for k, v in out.items() if k not in ("threshold", "min_increase_bytes")}
    ((cells, _),) = formatting.training_baseline_rows(old)
    assert cells[4] == f"above {formatting.nbytes(out['limit_bytes'])}" == "above 5.00 MiB"


_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def _cells(page, label):
    """The cells of the HTML report's table row whose first cell starts with ``label``."""
    for row in re.findall(r"<tr>(.*?)</tr>", page):
        cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
        if cells and cells[0].startswith(label):
            return cells
    raise AssertionError(f"no row {label!r} in the HTML report")


def _html_training_rows_match(page, tr, result):
    # the HTML baseline table shows the training peak (and the step time, not decided) with
    # the JSON's figures: bytes read back from "1.23 MiB" within the 2-decimal rounding
    cells = _cells(page, "training peak memory")
    for text, want in zip(
        cells[1:3], (tr["baseline_peak_allocated_bytes"], tr["current_peak_allocated_bytes"])
    ):
        v, unit = text.split()
        assert abs(float(v) * _UNITS[unit] - want) <= 0.005 * _UNITS[unit], (text, want)
    assert float(cells[3].rstrip("%")) == pytest.approx(100 * tr["change"], abs=0.05)
    assert cells[4].startswith(f"+{round(100 * tr['threshold'])}%") and cells[5] == result
    st = tr["step_time"]
    cells = _cells(page, "training device step p50")
    assert [float(c.split()[0]) for c in cells[1:3]] == pytest.approx(
        [1e3 * st["baseline_device_p50_s"], 1e3 * st["current_device_p50_s"]], abs=5e-4
    )
    assert cells[5] == "info only"
