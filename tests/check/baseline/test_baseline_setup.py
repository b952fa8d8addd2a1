"""torchneuron check, baselines: a re-check must interleave the same sides in phase 3 as its
baseline (the reference, the compiled model), or it is refused with the option to change
(baseline_setup.py): the statistics of runs timed beside other workloads do not compare."""

import json
import os
import shutil

import pytest
from check_support import FAST, cli

from torchneuron.check.baseline import setup as baseline_setup
from torchneuron.check.result_phases import Phase3Result


@pytest.fixture(scope="module")
def both_baseline(tmp_path_factory):
    """Saved in the default mode (--mode both): device, reference and compiled model interleaved."""
    d = tmp_path_factory.mktemp("setup") / "mlp"
    code, out, err = cli("check", "mlp", *FAST, "--baseline-runs", "1", "--save-baseline", d)
    assert code == 0, out + err
    return str(d)


def test_baseline_records_the_interleaved_sides(both_baseline):
    m = json.load(open(os.path.join(both_baseline, "baseline.json")))["metrics"]
    assert set(m["interleaved"]) == set(m["samples"])
    assert {"device", "reference", "compiled", "device_calibration"} <= set(m["interleaved"])


def test_skip_reference_perf_against_a_baseline_that_timed_the_reference_is_refused(both_baseline):
    # was a false regression (device/device calibration x1.9, 6 of 6): the device calibration's
    # busy time differs with and without the reference and the compiled model beside it
    code, out, err = cli(
        "check", "mlp", *FAST, "--baseline", both_baseline, "--skip-reference-perf"
    )
    assert code == 2, out + err
    assert "with the reference timed" in err and "Remove --skip-reference-perf" in err


def test_eager_recheck_against_a_default_mode_baseline_is_refused(both_baseline):
    # was a false pass: eager re-checks read device_alone x0.87-x0.90 against a --mode both baseline
    code, out, err = cli("check", "mlp", *FAST, "--baseline", both_baseline, "--mode", "eager")
    assert code == 2, out + err
    assert "--mode both" in err and "compiled model" in err


def test_a_baseline_without_the_reference_wants_skip_reference_perf(both_baseline, tmp_path):
    # an older baseline (no "interleaved" record): the sides come from its samples' keys
    b = tmp_path / "b"
    shutil.copytree(both_baseline, b)
    path = b / "baseline.json"
    meta = json.load(open(path))
    del meta["metrics"]["interleaved"]
    for key in ("samples", "cpu_samples"):
        meta["metrics"][key].pop("reference")
    json.dump(meta, open(path, "w"))
    code, out, err = cli("check", "mlp", *FAST, "--baseline", b)
    assert code == 2, out + err
    assert "without the reference timed" in err and "Add --skip-reference-perf" in err


def _timed(sides) -> Phase3Result:
    """A passed phase 3 that interleaved ``sides``."""
    return Phase3Result("pass", None, 1, {}, "", "", samples={k: [1.0] for k in sides})


def test_sides_that_differ_after_the_run_are_not_compared():
    base = {"interleaved": ["device", "reference", "compiled", "calibration", "device_calibration"]}
    assert baseline_setup.differs(base, _timed(base["interleaved"])) is None
    no_compiled = _timed(("device", "reference", "calibration", "device_calibration"))
    assert "compiled" in baseline_setup.differs(base, no_compiled)
    assert baseline_setup.differs({"samples": no_compiled.samples}, no_compiled) is None
