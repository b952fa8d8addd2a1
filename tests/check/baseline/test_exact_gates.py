"""The default performance gates against a baseline: exact quantities per pass (device
launches by op, CPU fallbacks, projected Trainium time, graph breaks, recompiles).

CPU-burning processes load every core while the re-checks run: an unchanged build must pass
every time (the quantities are equal, whatever the load), and planted changes (extra device
kernels in the forward, a 3x heavier forward, a new CPU fallback, a new graph break) must
fail with exit 1, naming the quantity and the ops."""

import json
import os
import shutil

import pytest
from check_support import FAST, cli, fixture, needs_fallback_op

# CPU burners run throughout; `make test-protected` leaves them out (timing, not results).
pytestmark = pytest.mark.noisy_host

# issue 22: ten unchanged re-checks under load, all exit 0 (`make test-noisy-host`); make test
# runs three, for CI's time (each is a whole check in a subprocess: ~45 s on a loaded host)
RECHECKS = int(os.environ.get("TORCHNEURON_TEST_RECHECKS", "3"))
# the burners (tests/conftest.py) end themselves after this, even if the test process dies
BURN_SECONDS = 600


def _save(tmp_path_factory, model: str) -> str:
    d = tmp_path_factory.mktemp("exact") / model
    code, out, err = cli(
        "check", fixture(model), *FAST, "--baseline-runs", "1", "--save-baseline", d
    )
    assert code == 0, out + err
    return str(d)


@pytest.fixture(scope="module")
def blocks_baseline(tmp_path_factory):
    return _save(tmp_path_factory, "blocks")


def _check(baseline, tmp_path, model="blocks", *extra):
    j = tmp_path / "r.json"
    code, out, err = cli(
        "check", fixture(model), *FAST, "--baseline", baseline, "--json", j, *extra
    )
    return code, out + err, json.loads(j.read_text())


def _metrics(baseline):
    return json.load(open(os.path.join(baseline, "baseline.json")))["metrics"]


def _regression(r, quantity):
    """The failure line of ``quantity``, or None."""
    hits = [f for f in r["failures"] if f.startswith(f"regression: {quantity}:")]
    return hits[0] if hits else None


def test_unchanged_rechecks_pass_under_load(blocks_baseline, burners, tmp_path):
    base = _metrics(blocks_baseline)["exact"]
    for i in range(RECHECKS):
        code, out, r = _check(blocks_baseline, tmp_path)
        assert code == 0 and r["verdict"] == "pass", out
        # exact: the same values as the baseline's, on a loaded host
        assert r["exact"]["eager"] == base["eager"], i
        assert r["exact"]["compiled"] == base["compiled"], i
        rows = r["baseline"]["exact"]["rows"]
        assert rows and not any(x["regressed"] or x["changed"] for x in rows), rows
        assert r["baseline"]["latency"]["gated"] is False  # host time shown, not decided


def test_extra_device_kernels_are_caught(blocks_baseline, burners, tmp_path, monkeypatch):
    monkeypatch.setenv("CHECK_FIXTURE_DEVICE_EXTRA", "0.3")  # 3 more blocks on the device only
    code, out, r = _check(blocks_baseline, tmp_path)
    assert code == 1, out
    msg = _regression(r, "eager device launches per pass")
    assert msg and "26 vs the baseline's 20" in msg, r["failures"]
    assert "aten::addmm x10 -> x13" in msg and "aten::tanh x10 -> x13" in msg
    assert _regression(r, "eager projected Trainium2 time per pass")
    assert r["baseline"]["accuracy"]["output"]["passed"]  # outputs unchanged


def test_three_times_heavier_model_is_caught(blocks_baseline, burners, tmp_path, monkeypatch):
    monkeypatch.setenv("CHECK_FIXTURE_WORK", "3")  # the whole forward 3x, on both sides
    code, out, r = _check(blocks_baseline, tmp_path)
    assert code == 1, out
    assert "aten::addmm x10 -> x30" in _regression(r, "eager device launches per pass")
    row = next(
        x for x in r["baseline"]["exact"]["rows"] if x["quantity"].startswith("eager projected")
    )
    assert row["regressed"] and row["current"] == pytest.approx(3 * row["baseline"], rel=1e-9)
    assert "regression: eager projected Trainium2 time per pass" in out


def test_new_cpu_fallback_is_caught(tmp_path_factory, burners, tmp_path, monkeypatch):
    op = needs_fallback_op()
    base = _save(tmp_path_factory, "maybe_falls_back")
    monkeypatch.setenv("CHECK_FIXTURE_FALLBACK", "1")
    code, out, r = _check(base, tmp_path, "maybe_falls_back")
    assert code == 1, out
    msg = _regression(r, "eager CPU fallback calls per pass")
    assert msg and "1 vs the baseline's 0" in msg and f"aten::{op}" in msg, r["failures"]
    assert r["exact"]["eager"]["fallback_calls"] == 1


def test_new_graph_break_is_caught(tmp_path_factory, burners, tmp_path, monkeypatch):
    base = _save(tmp_path_factory, "compiled_only")
    monkeypatch.setenv("CHECK_FIXTURE_COMPILED_SLEEP_MS", "1")  # time.sleep under torch.compile
    code, out, r = _check(base, tmp_path, "compiled_only")
    assert code == 1, out
    assert _regression(r, "graph breaks") == (
        "regression: graph breaks: 1 vs the baseline's 0 (threshold +0)"
    )


def test_shapes_changing_between_passes_are_caught(tmp_path_factory, tmp_path, monkeypatch):
    d = tmp_path_factory.mktemp("exact") / "growing"
    eager = ["--mode", "eager"]  # Dynamo would recompile on the changing attribute too
    code, out, err = cli(
        "check", fixture("growing"), *FAST, *eager, "--baseline-runs", "1", "--save-baseline", d
    )
    assert code == 0, out + err
    assert _metrics(str(d))["exact"]["eager"]["new_signatures"] == []
    monkeypatch.setenv("CHECK_FIXTURE_GROWING", "1")
    code, out, r = _check(str(d), tmp_path, "growing", *eager)
    assert code == 1, out
    msg = _regression(r, "eager new kernel signatures after warm-up per pass")
    # the zero rows' fill, a new shape each pass (a TensorList's shapes are not recorded: cat's
    # signature is its name only)
    assert msg and "vs the baseline's 0" in msg and "aten::zero_(float[" in msg, r["failures"]
    assert r["baseline"]["accuracy"]["output"]["passed"]


def test_older_baseline_is_compared_on_what_it_has(blocks_baseline, tmp_path, monkeypatch):
    b = tmp_path / "old"
    shutil.copytree(blocks_baseline, b)
    meta = json.load(open(b / "baseline.json"))
    del meta["metrics"]["exact"]  # as saved before the exact quantities existed
    json.dump(meta, open(b / "baseline.json", "w"))
    monkeypatch.setenv("CHECK_FIXTURE_DEVICE_EXTRA", "0.3")  # not seen: nothing to compare with
    code, out, r = _check(str(b), tmp_path)
    assert code == 0, out
    ex = r["baseline"]["exact"]
    assert any("save it again" in n for n in ex["notes"]) and "save it again" in out
    assert [x["quantity"] for x in ex["rows"]] == ["graph breaks", "recompiles"]


def test_thresholds_per_quantity(blocks_baseline, tmp_path, monkeypatch):
    b = tmp_path / "loose"
    shutil.copytree(blocks_baseline, b)
    json.dump({"kernels": 0.5, "projected_time": 0.5}, open(b / "thresholds.json", "w"))
    monkeypatch.setenv("CHECK_FIXTURE_DEVICE_EXTRA", "0.3")
    code, out, r = _check(str(b), tmp_path)
    assert code == 0, out  # +30 % is within thresholds.json's +50 %: changed, not regressed
    rows = {x["quantity"]: x for x in r["baseline"]["exact"]["rows"]}
    assert rows["eager device launches per pass"]["changed"]
    assert r["thresholds"]["source"]["kernels"] == "baseline"
    code, out, r = _check(str(b), tmp_path, "blocks", "--max-kernel-regression", "0.2")
    assert code == 1 and r["thresholds"]["source"]["kernels"] == "command line", out
    assert _regression(r, "eager device launches per pass")
    assert not _regression(r, "eager projected Trainium2 time per pass")


def test_training_step_quantities_are_recorded_and_equal(tmp_path_factory, tmp_path):
    base = _save(tmp_path_factory, "trainable")
    saved = _metrics(base)["training"]["exact"]
    assert saved["eager"]["kernels"] > 0 and saved["compiled"]["graphs"] >= 2  # forward, backward
    code, out, r = _check(base, tmp_path, "trainable")
    assert code == 0, out
    assert r["training"]["exact"] == saved
    rows = {x["quantity"]: x for x in r["baseline"]["exact"]["rows"]}
    for side in ("eager", "compiled"):
        row = rows[f"training ({side}) device launches per step"]
        assert not row["changed"] and row["current"] > 0
