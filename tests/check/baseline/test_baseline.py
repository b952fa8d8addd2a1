"""torchneuron check, baselines: save, compare, planted regressions, bad baselines, and
nothing in an existing baseline overwritten unless --save-baseline names it."""

import hashlib
import json
import os
import shutil

import pytest
import torch
from check_support import FAST, cli, fixture
from safetensors.torch import load_file, save_file

FILES = {"baseline.json", "thresholds.json", "manifest.json", "outputs.safetensors"}
# The round trip compares a run with its own baseline on a small shared machine: p50 can
# move by more than the default 10 % between two runs of a 1 ms model, so the thresholds
# there are loose; the planted slowdowns below are far larger than any noise.
LOOSE = ["--max-latency-regression", "3", "--max-memory-regression", "0.5"]


def _digest(folder):
    return {
        f: hashlib.sha256(open(os.path.join(folder, f), "rb").read()).hexdigest()
        for f in sorted(os.listdir(folder))
    }


@pytest.fixture(scope="module")
def mlp_baseline(tmp_path_factory):
    d = tmp_path_factory.mktemp("base") / "mlp"
    code, out, err = cli("check", "mlp", *FAST, "--baseline-runs", "1", "--save-baseline", d)
    assert code == 0, out + err
    return str(d)


@pytest.fixture(scope="module")
def sleepy_baseline(tmp_path_factory):
    d = tmp_path_factory.mktemp("base") / "sleepy"
    code, out, err = cli(
        "check", fixture("sleepy"), *FAST, "--baseline-runs", "1", "--save-baseline", d
    )
    assert code == 0, out + err
    return str(d)


def _edit_json(folder, name, edit):
    """Apply ``edit`` to the JSON document ``name`` of a baseline folder."""
    path = os.path.join(folder, name)
    doc = json.load(open(path))
    edit(doc)
    json.dump(doc, open(path, "w"))


def test_saved_baseline_contents(mlp_baseline):
    assert set(os.listdir(mlp_baseline)) == FILES
    meta = json.load(open(os.path.join(mlp_baseline, "baseline.json")))
    assert meta["model"]["name"] == "mlp" and meta["settings"]["dtype"] == "float32"
    assert meta["metrics"]["p50_s"] > 0 and meta["metrics"]["peak_allocated_bytes"] > 0
    th = json.load(open(os.path.join(mlp_baseline, "thresholds.json")))
    assert (
        th["latency_p50"] == 0.10 and th["peak_memory"] == 0.10 and th["accuracy"] == "any failure"
    )
    man = json.load(open(os.path.join(mlp_baseline, "manifest.json")))
    assert man["versions"]["torch"] == torch.__version__
    t = load_file(os.path.join(mlp_baseline, "outputs.safetensors"))
    assert set(t) == {"reference/output", "fp64/output", "device/output"}
    assert t["fp64/output"].dtype == torch.float64 and t["reference/output"].shape == (32, 10)


def test_round_trip_passes_and_writes_nothing(mlp_baseline, tmp_path):
    before = _digest(mlp_baseline)
    out_json = tmp_path / "r.json"
    code, out, err = cli(
        "check", "mlp", *FAST, *LOOSE, "--baseline", mlp_baseline, "--json", out_json
    )
    assert code == 0, out + err
    r = json.loads(out_json.read_text())
    b = r["baseline"]
    assert b["status"] == "pass" and b["regressions"] == []
    assert (
        b["accuracy"]["output"]["passed"]
        and b["accuracy"]["output"]["identical_to_baseline_device"]
    )
    assert b["latency"]["regressed"] is False and b["memory"]["regressed"] is False
    assert r["thresholds"]["source"]["latency_p50"] == "command line"
    assert _digest(mlp_baseline) == before  # --baseline never writes


def _copy(src, tmp_path, name="b"):
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return str(dst)


def test_planted_accuracy_regression_in_baseline_is_caught(mlp_baseline, tmp_path):
    b = _copy(mlp_baseline, tmp_path)
    path = os.path.join(b, "outputs.safetensors")
    t = load_file(path)
    for kind in ("reference", "fp64"):  # the accepted reference outputs changed
        t[f"{kind}/output"] = t[f"{kind}/output"] + 0.01
    save_file(t, path, metadata={"format": "torchneuron.check.baseline/1", "model": "mlp"})
    code, out, err = cli("check", "mlp", *FAST, *LOOSE, "--baseline", b)
    assert code == 1, out + err
    assert "regression: accuracy" in out


def test_changed_integer_output_against_a_baseline_is_reported(tmp_path, monkeypatch):
    # an integer output has no RMSE: its regression message formatted None (TypeError, no reports)
    b, j, x = tmp_path / "b", tmp_path / "r.json", tmp_path / "r.xml"
    code, out, err = cli(
        "check",
        fixture("class_ids"),
        *FAST,
        "--mode",
        "eager",
        "--baseline-runs",
        "1",
        "--save-baseline",
        b,
    )
    assert code == 0, out + err
    monkeypatch.setenv("CHECK_FIXTURE_SHIFT_IDS", "1")  # the device's class ids are now off by one
    code, out, err = cli(
        "check",
        fixture("class_ids"),
        *FAST,
        *LOOSE,
        "--mode",
        "eager",
        "--baseline",
        b,
        "--json",
        j,
        "--junit",
        x,
    )
    assert code == 1, out + err
    assert "Traceback" not in out + err
    msg = (
        "accuracy: output 'output' does not match the baseline's reference outputs "
        "(exact equality (integer output); max abs "
    )
    assert any(r.startswith(msg) for r in json.loads(j.read_text())["baseline"]["regressions"])
    assert "does not match the baseline (exact equality (integer output)" in x.read_text()


def test_planted_slowdown_is_caught(sleepy_baseline, monkeypatch):
    monkeypatch.setenv("CHECK_FIXTURE_SLEEP_MS", "30")  # the model now sleeps 30 ms on the device
    code, out, err = cli(
        "check",
        fixture("sleepy"),
        *FAST,
        *LOOSE,
        "--gate-host-latency",
        "--baseline",
        sleepy_baseline,
    )
    assert code == 1, out + err
    assert "regression: latency" in out


def test_planted_low_p50_in_baseline_is_caught_at_default_threshold(mlp_baseline, tmp_path):
    b = _copy(mlp_baseline, tmp_path)

    # the accepted run's device was 5x faster (per-iteration samples decide, the p50 is shown):
    # its wall seconds and its working threads' CPU seconds per step
    def faster(m):
        m["metrics"]["p50_s"] /= 5
        for key in ("samples", "cpu_samples"):
            m["metrics"][key]["device"] = [t / 5 for t in m["metrics"][key]["device"]]

    _edit_json(b, "baseline.json", faster)
    code, out, err = cli(
        "check",
        "mlp",
        *FAST,
        "--max-memory-regression",
        "0.5",
        "--gate-host-latency",
        "--baseline",
        b,
    )
    assert code == 1, out + err
    assert "regression: latency" in out and "+10%" in out
    # without --gate-host-latency the emulator's host time is shown, never decides
    code, out, err = cli(
        "check", "mlp", *FAST, "--max-memory-regression", "0.5", "--baseline", b, "--details"
    )
    assert code == 0, out + err
    assert "regression: latency" not in out and "shown only" in out


def test_memory_regression_is_caught(mlp_baseline, tmp_path):
    b = _copy(mlp_baseline, tmp_path)
    _edit_json(
        b,
        "baseline.json",
        lambda m: m["metrics"].__setitem__(
            "peak_allocated_bytes", m["metrics"]["peak_allocated_bytes"] // 2
        ),
    )
    # mlp's peak is under the default 1 MiB noise floor: the baseline's own threshold lowers it
    _edit_json(b, "thresholds.json", lambda th: th.__setitem__("peak_memory_min_bytes", 0))
    code, out, err = cli("check", "mlp", *FAST, "--max-latency-regression", "3", "--baseline", b)
    assert code == 1, out + err
    assert "regression: memory" in out


def test_memory_noise_below_the_floor_is_not_a_regression(mlp_baseline, tmp_path):
    b = _copy(mlp_baseline, tmp_path)
    # 4x the baseline's peak now (a large relative change, far above the run-to-run spread
    # of the peak, about 10 % of mlp's), yet fewer bytes than the 1 MiB floor
    _edit_json(
        b,
        "baseline.json",
        lambda m: m["metrics"].__setitem__(
            "peak_allocated_bytes", m["metrics"]["peak_allocated_bytes"] // 4
        ),
    )
    out_json = tmp_path / "r.json"
    code, out, err = cli(
        "check",
        "mlp",
        *FAST,
        "--max-latency-regression",
        "3",
        "--max-memory-regression",
        "0",
        "--baseline",
        b,
        "--json",
        out_json,
    )
    assert code == 0, out + err
    mem = json.loads(out_json.read_text())["baseline"]["memory"]
    assert mem["change"] > 1 and not mem["regressed"] and mem["min_increase_bytes"] == 1 << 20
    assert 0 < mem["current_peak_allocated_bytes"] - mem["baseline_peak_allocated_bytes"] < 1 << 20


def test_thresholds_come_from_the_baseline(mlp_baseline, tmp_path):
    b = _copy(mlp_baseline, tmp_path)
    json.dump(
        {"latency_p50": 3.0, "peak_memory": 0.5}, open(os.path.join(b, "thresholds.json"), "w")
    )
    out_json = tmp_path / "r.json"
    code, out, err = cli("check", "mlp", *FAST, "--baseline", b, "--json", out_json)
    assert code == 0, out + err
    th = json.loads(out_json.read_text())["thresholds"]
    assert th["latency_p50"] == 3.0 and th["source"]["latency_p50"] == "baseline"


# ------------------------------------------------------------------ bad baselines: exit code 2


def test_missing_baseline_folder(tmp_path):
    code, _, err = cli("check", "mlp", *FAST, "--baseline", tmp_path / "nope")
    assert code == 2 and "does not exist" in err


@pytest.mark.parametrize("missing", sorted(FILES))
def test_partial_baseline(mlp_baseline, tmp_path, missing):
    b = _copy(mlp_baseline, tmp_path)
    os.remove(os.path.join(b, missing))
    code, _, err = cli("check", "mlp", *FAST, "--baseline", b)
    assert code == 2 and "partial" in err and missing in err


def test_corrupt_baseline(mlp_baseline, tmp_path):
    b = _copy(mlp_baseline, tmp_path)
    open(os.path.join(b, "baseline.json"), "w").write("{not json")
    code, _, err = cli("check", "mlp", *FAST, "--baseline", b)
    assert code == 2 and "baseline.json is unreadable" in err


def test_baseline_missing_an_output_tensor(mlp_baseline, tmp_path):
    b = _copy(mlp_baseline, tmp_path)
    path = os.path.join(b, "outputs.safetensors")
    t = load_file(path)
    del t["fp64/output"]
    save_file(t, path)
    code, _, err = cli("check", "mlp", *FAST, "--baseline", b)
    assert code == 2 and "partial" in err and "fp64/output" in err


def test_baseline_from_another_model(mlp_baseline):
    code, _, err = cli("check", fixture("good"), *FAST, "--baseline", mlp_baseline)
    assert code == 2 and "another model" in err and "'mlp'" in err


def test_baseline_with_other_batch_size(mlp_baseline):
    code, _, err = cli("check", "mlp", "--batch-size", "8", *FAST, "--baseline", mlp_baseline)
    assert code == 2 and "other inputs" in err


def test_baseline_with_other_dtype(mlp_baseline):
    code, _, err = cli("check", "mlp", "--dtype", "bfloat16", *FAST, "--baseline", mlp_baseline)
    assert code == 2 and "--dtype float32" in err


def test_baseline_with_other_seed(mlp_baseline):
    # other seeded weights and inputs: an identity mismatch, not accuracy and latency regressions
    code, out, err = cli("check", "mlp", "--seed", "1", *FAST, "--baseline", mlp_baseline)
    assert code == 2, out + err
    assert "--seed 0" in err and "--seed 1" in err


def test_baseline_with_non_finite_threshold(mlp_baseline, tmp_path):
    b = _copy(mlp_baseline, tmp_path)
    open(os.path.join(b, "thresholds.json"), "w").write('{"latency_p50": NaN}')
    code, out, err = cli("check", "mlp", *FAST, "--baseline", b)
    assert code == 2, out + err
    assert "thresholds.json has latency_p50 = nan" in err


@pytest.mark.parametrize(
    "text, shown", [('"0.05"', '"0.05"'), ("true", "true"), ("null", "null"), ("[0.1]", "[0.1]")]
)
def test_baseline_with_a_threshold_that_is_not_a_number(mlp_baseline, tmp_path, text, shown):
    # a quoted number or a bool was silently the default 0.10
    b = _copy(mlp_baseline, tmp_path)
    open(os.path.join(b, "thresholds.json"), "w").write(
        '{"peak_memory": 0.2, "latency_p50": %s}' % text
    )
    code, out, err = cli("check", "mlp", *FAST, "--baseline", b)
    assert code == 2, out + err
    assert f"thresholds.json has latency_p50 = {shown}; expected a finite number >= 0" in err


def test_same_name_other_architecture(mlp_baseline, tmp_path):
    b = _copy(mlp_baseline, tmp_path)
    meta_path = os.path.join(b, "baseline.json")
    meta = json.load(open(meta_path))
    meta["model"]["fingerprint"] = "0" * 16
    json.dump(meta, open(meta_path, "w"))
    code, _, err = cli("check", "mlp", *FAST, "--baseline", b)
    assert code == 2 and "fingerprint" in err


# ------------------------------------------------------------------ nothing overwritten


def test_reports_may_not_write_into_the_baseline(mlp_baseline):
    before = _digest(mlp_baseline)
    for opt in ("--json", "--junit", "--html"):
        code, _, err = cli(
            "check",
            "mlp",
            *FAST,
            "--baseline",
            mlp_baseline,
            opt,
            os.path.join(mlp_baseline, "baseline.json"),
        )
        assert code == 2 and "only written by --save-baseline" in err
    assert _digest(mlp_baseline) == before


def test_failing_run_does_not_replace_a_baseline(mlp_baseline, tmp_path):
    b = _copy(mlp_baseline, tmp_path)
    before = _digest(b)
    code, out, _ = cli(
        "check", fixture("perturbed"), *FAST, "--baseline-runs", "1", "--save-baseline", b
    )
    assert code == 1 and "baseline not saved" in out
    assert _digest(b) == before


def test_save_baseline_overwrites_only_its_files(mlp_baseline, tmp_path):
    b = _copy(mlp_baseline, tmp_path)
    open(os.path.join(b, "NOTES.txt"), "w").write("keep me")
    old = json.load(open(os.path.join(b, "baseline.json")))["created_utc"]
    code, out, err = cli(
        "check", "mlp", *FAST, *LOOSE, "--baseline", b, "--baseline-runs", "1", "--save-baseline", b
    )
    assert code == 0, out + err
    assert open(os.path.join(b, "NOTES.txt")).read() == "keep me"
    assert set(os.listdir(b)) == FILES | {"NOTES.txt"}
    assert json.load(open(os.path.join(b, "baseline.json")))["created_utc"] >= old
