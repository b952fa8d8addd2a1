"""torchneuron check, baselines of the compiled model (--mode both / compile): the compiled
figures saved, re-checked by the same statistic and verdict rules as eager, a planted
slowdown of the compiled model alone caught, a model that stopped compiling a named
regression, and a baseline without compiled figures saying "not compared"."""

import json
import os
import shutil
from dataclasses import replace

import pytest
from check_support import FAST, cli, fixture

from torchneuron.check.baseline import compare as baseline_mod
from torchneuron.check.baseline.store import Baseline
from torchneuron.check.result import CheckResult, Phase1Result
from torchneuron.check.result_compile import CompileCheckResult
from torchneuron.check.result_phases import Phase3Result

# Loose thresholds (as test_baseline.py's round trip): an unchanged re-check of a
# sub-millisecond model on a shared host; the planted slowdown (100 ms sleep) is far beyond.
LOOSE = ["--max-latency-regression", "3", "--max-memory-regression", "0.5"]
MODEL = fixture("compiled_only")


@pytest.fixture(scope="module")
def compiled_baseline(tmp_path_factory):
    d = tmp_path_factory.mktemp("base") / "compiled_only"
    code, out, err = cli(
        "check", MODEL, *FAST, "--baseline-runs", "1", "--save-baseline", d
    )  # --mode both (the default)
    assert code == 0, out + err
    return str(d)


def _check(baseline, tmp_path, *extra):
    j = tmp_path / "r.json"
    code, out, err = cli("check", MODEL, *FAST, *LOOSE, "--baseline", baseline, "--json", j, *extra)
    return code, out + err, json.loads(j.read_text())


def test_baseline_keeps_the_compiled_figures(compiled_baseline):
    m = json.load(open(os.path.join(compiled_baseline, "baseline.json")))
    assert m["settings"]["mode"] == "both" and m["metrics"]["measured"] == "eager"
    c = m["metrics"]["compiled"]
    assert c["p50_s"] > 0 and c["throughput_samples_per_s"] > 0
    # the compiled model was timed in the same interleaved iterations as eager and the reference
    smp = m["metrics"]["samples"]
    assert (
        len(smp["compiled"])
        == len(smp["device"])
        == len(smp["reference"])
        == len(smp["calibration"])
    )
    assert m["metrics"]["compile"]["ok"] is True and m["metrics"]["compile"]["compiled_graphs"] >= 1


def test_unchanged_recheck_compares_the_compiled_model(compiled_baseline, tmp_path):
    code, out, r = _check(compiled_baseline, tmp_path, "--details")
    assert code == 0, out
    c = r["baseline"]["compiled"]
    assert c["compile"]["decision"] == "pass" and c["compile"]["current_ok"]
    lat = c["latency"]
    assert lat["side"] == "compiled" and lat["decision"] == "pass"
    st = lat["statistics"]["compiled_alone"]
    # the emulator's host time is shown, not decided, without --gate-host-latency
    assert lat["gated"] is False and not st["decides"]
    assert st["statistic"] == "median paired work time compiled / reference"
    assert "model_or_inputs" not in lat["statistics"]  # eager's comparison decided it
    # on the process's CPU time (XLA:CPU's pool does the compiled graphs' work)
    assert lat["time_basis"].startswith("work time: the compiled model's process CPU seconds")
    assert r["baseline"]["latency"]["statistics"]["device_alone"]["decision"] == "pass"
    assert "p50 latency (compiled)" in out and "compiles (torch.compile)" in out


def test_a_compile_mode_recheck_is_compared_on_the_same_clock(compiled_baseline, tmp_path):
    # --mode compile: the device step is the compiled model, timed on the process's CPU time,
    # so a --mode both baseline's compiled figures compare with it on the work-time basis
    code, out, r = _check(compiled_baseline, tmp_path, "--mode", "compile")
    assert code == 0, out
    lat = r["baseline"]["compiled"]["latency"]
    assert lat["time_basis"].startswith("work time: the compiled model's process CPU seconds"), lat[
        "time_basis"
    ]
    assert lat["statistics"]["compiled_alone"]["decision"] == "pass"
    assert r["phase3"]["busy_time_sides"] == ["device_calibration"]


def test_compiled_only_slowdown_is_caught(compiled_baseline, tmp_path, monkeypatch):
    # The compiled model sleeps 100 ms a call. Not less: under TORCHNEURON_PROTECT_MEMORY=1,
    # after other tests had grown the device's reserved memory, a forward of this model took
    # about 30 ms on either path, and a 30 ms sleep read x3.5, inside the +300 % of LOOSE.
    monkeypatch.setenv("CHECK_FIXTURE_COMPILED_SLEEP_MS", "100")
    code, out, r = _check(
        compiled_baseline, tmp_path, "--max-latency-regression", "1", "--gate-host-latency"
    )
    assert code == 1, out
    assert "regression: latency (compiled), compiled alone" in out
    st = r["baseline"]["compiled"]["latency"]["statistics"]["compiled_alone"]
    assert st["decision"] == "regressed" and st["ci"]["low"] > 2
    assert r["baseline"]["latency"]["decision"] != "regressed"  # eager is unchanged


def test_a_model_that_stopped_compiling_is_a_named_regression(
    compiled_baseline, tmp_path, monkeypatch
):
    monkeypatch.setenv(
        "CHECK_FIXTURE_UNLOWERABLE", "1"
    )  # nonzero_static(0) added: eager outputs unchanged
    code, out, r = _check(compiled_baseline, tmp_path)
    assert code == 1, out
    cc = r["baseline"]["compiled"]["compile"]
    assert cc["regressed"] and cc["baseline_ok"] and not cc["current_ok"]
    assert any(
        x.startswith("regression: compile: the model compiled in the baseline")
        and "nonzero_static" in x
        for x in r["failures"]
    ), r["failures"]


def test_falling_off_the_compiled_path_is_a_compile_regression(
    compiled_baseline, tmp_path, monkeypatch
):
    # the same unlowerable graph run eagerly by the backend (the user's fallback_execution): it
    # "compiles", but no graph ran compiled; the baseline's did
    monkeypatch.setenv("CHECK_FIXTURE_UNLOWERABLE", "1")
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "0")
    code, out, r = _check(compiled_baseline, tmp_path, "--details")
    assert code == 1, out
    cc = r["baseline"]["compiled"]["compile"]
    assert (
        cc["regressed"]
        and cc["current_not_compiled"]
        and cc["fallback_graphs"] == {"baseline": 0, "current": 1}
    )
    assert any(
        x.startswith("regression: compile: the model ran compiled in the baseline")
        and "fell off the compiled path" in x
        for x in r["failures"]
    ), r["failures"]
    assert "NO: 0 graph(s) ran compiled" in out


def test_baseline_without_compiled_figures_says_not_compared(compiled_baseline, tmp_path):
    b = str(tmp_path / "old")
    shutil.copytree(compiled_baseline, b)
    path = os.path.join(b, "baseline.json")
    m = json.load(open(path))
    for key in ("compiled", "compile", "measured"):  # as an earlier version saved it
        del m["metrics"][key]
    del m["metrics"]["samples"]["compiled"]
    json.dump(m, open(path, "w"))
    code, out, r = _check(b, tmp_path, "--details")
    assert code == 0, out
    c = r["baseline"]["compiled"]
    assert c["latency"]["note"].startswith("not compared: the baseline has no compiled figures")
    assert c["compile"]["note"].startswith("not compared")
    assert (
        r["baseline"]["latency"]["statistics"]["device_alone"]["decision"] == "pass"
    )  # eager still compared
    assert "the baseline has no compiled figures" in " ".join(out.split())


def test_a_baseline_without_the_compiled_clock_is_compared_on_wall_time(
    compiled_baseline, tmp_path
):
    # saved by the version whose compiled CPU samples were the calling thread's alone
    b = str(tmp_path / "old")
    shutil.copytree(compiled_baseline, b)
    path = os.path.join(b, "baseline.json")
    m = json.load(open(path))
    for key in ("compiled_cpu_clock", "compiled_work_time_basis"):
        del m["metrics"][key]
    json.dump(m, open(path, "w"))
    code, out, r = _check(b, tmp_path)
    assert code == 0, out
    lat = r["baseline"]["compiled"]["latency"]
    assert lat["time_basis"].startswith(
        "wall seconds per step (the compiled model's process CPU time is missing"
    )
    assert lat["statistics"]["compiled_alone"]["statistic"] == "min compiled / min reference"
    assert r["baseline"]["latency"]["time_basis"].startswith("work time")  # eager's is unaffected


def test_compiled_work_time_is_its_cpu_plus_least_waiting_not_the_launch():
    # the compiled side is a host-like side on the work-time basis: CPU seconds (all threads)
    # plus its least waiting; the device's launch samples are not part of it
    n = 40
    cpu = {
        "device": [1e-3] * n,
        "reference": [2e-3] * n,
        "calibration": [1e-3] * n,
        "calibration_matmul": [1e-3] * n,
        "device_calibration": [1e-3] * n,
        "compiled": [1e-3] * n,
    }
    wall = {k: [t * 1.5 for t in v] for k, v in cpu.items()}
    base = {
        "samples": wall,
        "cpu_samples": cpu,
        "launch_samples": {"device": [5e-3] * n},
        "rounds": 1,
        "cpu_clock": "c",
        "work_time_basis": "w",
        "compiled_cpu_clock": "p",
        "compiled_work_time_basis": "cw",
        "compiled": {"p50_s": 1.5e-3},
        "device": {"p50_s": 1.5e-3},
    }
    view = baseline_mod._compiled_view(base, base["compiled"], "device")
    assert view["busy_time_sides"] == ("device_calibration",) and view["work_time_basis"] == "cw"
    # four times the CPU, same waiting (0.5 ms): (4 + 0.5) / (1 + 0.5) = x3 vs the baseline
    cpu2 = cpu | {"compiled": [4e-3] * n}
    cur = base | {"cpu_samples": cpu2, "samples": wall | {"compiled": [4.5e-3] * n}}
    bview = baseline_mod._compiled_view(base, base["compiled"], "p50_s")
    out = baseline_mod.latency(
        bview, baseline_mod._compiled_view(cur, cur["compiled"], "device"), 0.10, side="compiled"
    )
    st = out["statistics"]["compiled_alone"]
    assert out["time_basis"] == "work time: cw" and st["decision"] == "regressed"
    assert st["ci"]["ratio"] == pytest.approx(4.5 / 1.5)


def test_compiled_alone_needs_its_load_margin():
    # x1.80, the compiled model's offset between a quiet baseline and a loaded re-check
    # (perfstats.COMPILED_MARGIN): undecided, not a regression; x2.50 is one
    from torchneuron.check.stats import perfstats

    n = 40
    cpu = {
        k: [1e-3] * n
        for k in (
            "device",
            "reference",
            "calibration",
            "calibration_matmul",
            "device_calibration",
            "compiled",
        )
    }
    base = {
        "samples": cpu,
        "cpu_samples": cpu,
        "launch_samples": {"device": [1e-4] * n},
        "rounds": 1,
        "cpu_clock": "c",
        "work_time_basis": "w",
        "compiled_cpu_clock": "p",
        "compiled_work_time_basis": "cw",
        "compiled": {"p50_s": 1e-3},
        "device": {"p50_s": 1e-3},
    }
    bview = baseline_mod._compiled_view(base, base["compiled"], "p50_s")
    for scale, decision in ((1.80, "undecided"), (2.50, "regressed")):
        c = cpu | {"compiled": [1e-3 * scale] * n}
        cur = base | {"cpu_samples": c, "samples": c}
        out = baseline_mod.latency(
            bview,
            baseline_mod._compiled_view(cur, cur["compiled"], "device"),
            0.10,
            side="compiled",
        )
        st = out["statistics"]["compiled_alone"]
        assert st["decision"] == decision, (scale, st)
        assert st["regression_above"] == pytest.approx(1.10 * perfstats.COMPILED_MARGIN)
    eager = baseline_mod.latency(
        base | {"p50_s": 1e-3}, base | {"cpu_samples": cpu | {"device": [1.3e-3] * n}}, 0.10
    )
    assert (
        eager["statistics"]["device_alone"]["decision"] == "regressed"
    )  # eager's has no such margin


def _run(measured_side, scale, n=30):
    """A synthetic phase 3 (``--mode both``: samples of every side) whose compiled model takes
    ``scale`` times the base time; deterministic, slightly varying iterations."""
    base = [1e-3 * (1 + 0.01 * (i % 5)) for i in range(n)]
    smp = {
        "device": base,
        "reference": [t * 2 for t in base],
        "calibration": [t / 2 for t in base],
        "device_calibration": base,
        "compiled": [t * scale for t in base],
    }
    return {
        "samples": smp,
        "rounds": 1,
        "cpu_clock": "x",
        "work_time_basis": None,
        "device": {"p50_s": base[n // 2], "throughput_samples_per_s": 1 / base[n // 2]},
        "compiled": {
            "p50_s": base[n // 2] * scale,
            "throughput_samples_per_s": 1 / base[n // 2] / scale,
        },
    }


def _phase3(run: dict) -> Phase3Result:
    """A passed phase 3 result with ``run``'s figures and samples."""
    return Phase3Result(
        status="pass",
        reason=None,
        samples_per_iteration=1,
        settings={},
        timing="",
        ci_method="",
        **run,
    )


def test_a_compile_mode_baseline_is_compared_as_the_compiled_model():
    # An earlier version's --mode compile baseline (no "measured"): its device figures are the
    # compiled model's, known from its command line. Re-checked under --mode both, its figures are
    # compared with this run's compiled ones, never with eager's.
    old = _run("compiled", 0.25)
    metrics = {
        "p50_s": old["compiled"]["p50_s"],
        "samples": old["samples"] | {"device": old["samples"]["compiled"]},
        "cpu_clock": "x",
        "throughput_samples_per_s": old["compiled"]["throughput_samples_per_s"],
    }
    base = Baseline(
        path="b",
        meta={"metrics": metrics},
        thresholds={},
        manifest={"command": "torchneuron check mlp --mode compile"},
        outputs={},
    )
    assert baseline_mod.measured(base) == "compiled"
    p1 = Phase1Result(
        "pass", "neuron:0", "eager", None, "warn", compile=CompileCheckResult(checked=True, ok=True)
    )
    result = CheckResult(phase1=p1, phase3=_phase3(_run("eager", 1.0)), config={"mode": "both"})
    c = baseline_mod.compiled(base, result, 0.10)
    st = c["latency"]["statistics"]["compiled_alone"]  # the compiled model is 2x the baseline's
    assert (
        c["latency"]["decision"] == "regressed" and 3.9 < st["ci"]["low"] <= st["ci"]["high"] < 4.1
    )
    assert c["compile"]["note"].startswith("not compared: the baseline does not record")
    same = baseline_mod.compiled(base, replace(result, phase3=_phase3(_run("eager", 0.25))), 0.10)
    assert same["latency"]["decision"] == "pass"
