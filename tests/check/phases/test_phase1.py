"""torchneuron check, phase 1: does the model run on the device."""

import pytest
import torch
from check_support import FAST, FAST_KW, MINILM_KW, cli, fixture, needs_fallback_op, result


def _assert_ran(p1):
    assert p1.status == "pass", p1.error
    assert p1.error is None
    assert p1.cold_latency_s > 0
    assert p1.determinism["identical"] is True
    m = p1.memory
    assert (
        0
        < m["weights_bytes"]
        <= m["peak_allocated_bytes"]
        <= m["peak_reserved_bytes"]
        <= m["capacity_bytes"]
    )
    assert isinstance(p1.narrowing, dict)
    assert p1.op_profile and all(
        r["op"].startswith("aten::") and r["self_host_s"] >= 0 for r in p1.op_profile
    )
    # compiled mode (issue 6): it compiles, cold and warm times, graphs and breaks counted
    c = p1.compile.to_dict()
    assert c["checked"] is True and c["ok"] is True, c.get("error")
    assert c["modes"] == ["eager", "compile"]
    assert c["compile_s"] > 0 and 0 < c["warm_compile_s"]
    assert c["compiled_graphs"] >= 1 and c["recompiles"] == 0 and c["fallback_graphs"] == []
    assert c["warm_cache_hits"] == c["compiled_graphs"]
    assert c["graph_count"] >= 1 and c["graph_breaks"] == len(c["break_reasons"])
    assert all(d <= 1e-4 for d in c["max_abs_diff_vs_eager"].values())


def test_mlp_runs():
    r = result("mlp", **FAST_KW)
    p1 = r.phase1
    _assert_ran(p1)
    assert p1.fallback["ops"] == {}
    assert p1.outputs == [{"name": "output", "shape": [32, 10], "dtype": "float32"}]


def test_minilm_runs():
    r = result("minilm", **MINILM_KW)
    p1 = r.phase1
    _assert_ran(p1)
    assert p1.outputs == [{"name": "output", "shape": [4, 384], "dtype": "float32"}]
    # the weights of all-MiniLM-L6-v2 (22.7 M float32 parameters) live in device memory
    assert p1.memory["weights_bytes"] >= 22_000_000 * 4
    # int64 attention-mask arithmetic is narrowed to int32 on the device, and counted
    assert all(isinstance(k, str) and v > 0 for k, v in p1.narrowing.items())


def test_fallback_ops_are_counted_and_timed():
    op = needs_fallback_op()
    r = result(fixture("falls_back"), **FAST_KW)
    p1 = r.phase1
    assert p1.status == "pass"
    ops = p1.fallback["ops"]
    hit = [k for k in ops if k.startswith(f"aten::{op}")]
    assert hit, ops
    v = ops[hit[0]]
    assert (
        v["calls"] >= 3 and v["seconds"] > 0 and 0 < v["share"] < 1
    )  # cold, determinism, profile runs
    assert 0 < p1.fallback["share"] < 1
    # the steady-state share is measured again in phase 3
    assert r.phase3.device["fallback_share"] > 0


def test_strict_fallback_fails_with_op_and_traceback():
    op = needs_fallback_op()
    r = result(fixture("falls_back"), fallback="error", **FAST_KW)
    p1 = r.phase1
    assert p1.status == "fail"
    e = p1.error
    assert e["type"] == "NotImplementedError"
    assert e["op"].startswith(f"aten::{op}")
    assert "Traceback" in e["traceback"] and "check_inference.py" in e["traceback"]
    for p in (r.phase2, r.phase3):
        assert p.status == "skipped"
        assert "phase 1 failed" in p.reason and f"aten::{op}" in p.reason
    assert r.verdict == "fail" and r.exit_code == 1
    assert r.cost.device.get("usd_per_million") is None


def test_python_error_on_device_only():
    r = result(fixture("raises_on_device"), **FAST_KW)
    e = r.phase1.error
    assert e["type"] == "RuntimeError" and "refuses the neuron device" in e["message"]
    assert e["op"] is None  # raised in Python, not in an operator
    assert "check_planted.py" in e["raised_at"]
    assert r.phase2.status == "skipped" and r.phase3.status == "skipped"
    assert r.exit_code == 1


def test_failing_op_found_when_the_message_does_not_name_it():
    r = result(fixture("bad_shapes_on_device"), **FAST_KW)
    e = r.phase1.error
    assert e["op"] == "aten::mm.default" and e["op_source"] == "re-run under an operator recorder"
    assert "check_planted.py" in e["raised_at"] and "in forward" in e["raised_at"]
    assert e["reference"] == "the model runs on the reference device cpu"
    assert r.exit_code == 1


def test_model_failing_on_the_reference_too_is_bad_input():
    # a shape error that the CPU raises too is the model's or its inputs' fault, not the device's
    code, out, err = cli("check", fixture("bad_shapes"), *FAST)
    assert code == 2, out + err
    assert (
        "fails on the reference device cpu too: this is a model/input error, not a device problem"
        in err
    )
    assert "RuntimeError: mat1 and mat2 shapes cannot be multiplied" in err
    assert "failing op on neuron: aten::mm.default" in err
    line = next(ln for ln in err.splitlines() if ln.startswith("raised at: "))
    assert "check_planted.py" in line and line.endswith("in forward"), line
    assert "Phase 1" not in out


def test_raised_at_is_the_users_frame(tmp_path):
    # torch reached through a symlink (a venv's lib64 -> lib) is still torch, and the user's
    # file wins over other libraries' frames
    import os
    import traceback

    from torchneuron.check.phases.phase1 import _raised_at

    link = tmp_path / "lib64"
    os.symlink(os.path.dirname(os.path.dirname(torch.__file__)), link)
    user = str(tmp_path / "model.py")
    frames = [
        traceback.FrameSummary(user, 10, "forward"),
        traceback.FrameSummary("/opt/otherlib/layers.py", 20, "helper"),
        traceback.FrameSummary(str(link / "torch" / "__init__.py"), 1750, "_check_with"),
    ]
    assert _raised_at(frames, user).filename == user
    assert _raised_at(frames, None).filename == "/opt/otherlib/layers.py"


@pytest.mark.parametrize(
    "name,returned", [("returns_float", "a float ("), ("returns_none", "None")]
)
def test_model_returning_no_tensors_anywhere_is_bad_input(name, returned):
    code, out, err = cli("check", fixture(name), *FAST)
    assert code == 2, out + err
    assert f"returned no tensors: forward returned {returned}" in err
    assert "on the reference device cpu as on neuron" in err


def test_model_returning_no_tensors_on_the_device_only_fails_phase_1():
    r = result(fixture("none_on_device"), **FAST_KW)
    e = r.phase1.error
    assert e["type"] == "NoTensorsError" and "returned None" in e["message"]
    assert e["reference"] == "the model runs on the reference device cpu"
    assert r.exit_code == 1


def test_device_failure_exit_code_and_report():
    op = needs_fallback_op()
    code, out, err = cli("check", fixture("falls_back"), "--fallback", "error", *FAST)
    assert code == 1, err
    assert f"aten::{op}" in out and "Traceback" in out
    assert "phase 1 failed" in out


def test_fallback_mode_restored_after_check():
    op = needs_fallback_op()
    result(fixture("falls_back"), fallback="error", **FAST_KW)
    from torchneuron import _C

    assert _C._fallback_mode() == "warn"
    getattr(torch, op)(torch.rand(3, device="neuron") + 0.5)  # still allowed afterwards


# ------------------------------------------------------------------ peak memory in program order


def test_peak_memory_is_the_program_order_peak():
    # runs_ahead: 20 steps of h = h * 0.5 + 0.25 on a 1 MiB input, no weights. Counted by hand,
    # at most four 1 MiB tensors are alive in program order (input, running value, product,
    # sum). Queued kernels keep their tensors until they run, so the host running ahead of the
    # device held about 40 MiB in the development runs: the compared figure must not be that.
    m = result(fixture("runs_ahead"), mode="eager", **FAST_KW).phase1.memory
    assert m["peak_allocated_basis"] == "in order" and m["peak_allocated_bytes"] == 4 * 2**20
    assert (
        m["peak_allocated_in_order_bytes"]
        == m["peak_allocated_bytes"]
        <= m["peak_allocated_run_ahead_bytes"]
    )


def test_peak_memory_is_the_same_with_and_without_save_baseline(tmp_path):
    import json

    from torchneuron.check import CheckConfig, run

    kw = dict(model="mlp", mode="eager", iterations=5, max_warmup=3, progress=False)
    plain = run(CheckConfig(**kw)).phase1.memory["peak_allocated_bytes"]
    saved = run(
        CheckConfig(**kw, save_baseline=str(tmp_path / "b"), baseline_runs=1)
    ).phase1.memory["peak_allocated_bytes"]
    stored = json.load(open(tmp_path / "b" / "baseline.json"))["metrics"]["peak_allocated_bytes"]
    assert plain == saved == stored


def test_compiled_runs_narrowing_is_gathered_not_printed(tmp_path):
    """Ops narrowed only by the compiled runs are listed (compile.narrowing, "compiled: ..." in
    the 64-bit narrowing row) and their warning goes to the Warnings section, not raw to
    stderr. A fresh process: the device warns once per operator per process."""
    import json
    import os
    import subprocess
    import sys

    j = tmp_path / "r.json"
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(x for x in (os.getcwd(), os.environ.get("PYTHONPATH")) if x),
    )
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "torchneuron",
            "check",
            fixture("narrows_when_compiled"),
            "--mode",
            "both",
            "--iterations",
            "3",
            "--max-warmup",
            "3",
            "--no-progress",
            "--json",
            str(j),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "UserWarning" not in p.stderr and "computes float64/int64" not in p.stderr, p.stderr
    r = json.loads(j.read_text())
    assert "aten::cumsum" not in r["phase1"]["narrowing"]  # eager never ran it
    assert r["phase1"]["compile"]["narrowing"].get("aten::cumsum", 0) >= 1
    assert any("aten::cumsum computes float64/int64" in w for w in r["phase1"]["warnings"])
    assert (
        "compiled: aten::cumsum" in p.stdout
        and "device warning: UserWarning: neuron: aten::cumsum" in p.stdout
    )
