"""torchneuron check in compiled mode (issue 6): --mode eager|compile|both, and a model
whose graph cannot lower reported with the failing stage and ATen op."""

from check_support import FAST_KW, fixture, result  # noqa: F401


def test_mode_compile_measures_compiled_model_in_phases_2_and_3():
    r = result("mlp", mode="compile", **FAST_KW)
    c = r.phase1.compile.to_dict()
    assert c["ok"] and c["phases_2_3"] == "compiled"
    assert r.verdict == "pass"
    assert r.cost.device["overhead_label"].startswith("compile time")


def test_mode_eager_skips_compile():
    r = result("mlp", mode="eager", **FAST_KW)
    c = r.phase1.compile.to_dict()
    assert c["checked"] is False and "--mode eager" in c["note"]


def test_compile_failure_reports_stage_op_and_source():
    import os

    path = os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "compile_models.py"
    )
    r = result(f"{path}:unlowerable", **FAST_KW)
    c = r.phase1.compile.to_dict()
    assert c["checked"] and not c["ok"]
    e = c["error"]
    assert e["compile_stage"] == "lowering" and e["op"] == "aten.igamma.default"
    assert "compile_models.py" in e["raised_at"]
    assert r.phase1.status == "fail"  # a model that does not compile fails phase 1


def test_mode_both_reports_compiled_accuracy_beside_eager(tmp_path):
    import json

    from check_support import cli

    j, h, x = tmp_path / "r.json", tmp_path / "r.html", tmp_path / "r.xml"
    code, out, err = cli(
        "check",
        "mlp",
        "--iterations",
        "5",
        "--max-warmup",
        "5",
        "--details",
        "--json",
        j,
        "--html",
        h,
        "--junit",
        x,
    )
    assert code == 0, out + err
    r = json.loads(j.read_text())
    c = r["phase2"]["compiled"]
    assert c["status"] == "pass" and set(c["outputs"]) == set(r["phase2"]["outputs"])
    for name, o in c["outputs"].items():
        assert o["passed"] and o["max_abs_vs_eager"] <= 1e-4
        assert o["max_abs_vs_eager"] == r["phase1"]["compile"]["max_abs_diff_vs_eager"][name]
    assert "Phase 2 (compiled, backend neuron)" in out
    assert 'id="phase2-compiled"' in h.read_text() and "phase2.compiled.accuracy[" in x.read_text()
    assert "only eager mode was checked" not in out + h.read_text()


def test_planted_compiled_accuracy_error_fails_phase2(monkeypatch):
    """A compiled-only error (compiled outputs shifted after the compile check) fails phase 2's
    compiled section while eager still passes."""
    from torchneuron.check.phases import compiled

    real = compiled.check_compile

    def planted(session, cfg, eager, error_info, *rest):
        res = real(session, cfg, eager, error_info, *rest)
        session.compiled_outputs = {k: v + 0.5 for k, v in session.compiled_outputs.items()}
        return res

    monkeypatch.setattr(compiled, "check_compile", planted)
    from torchneuron.check import CheckConfig, run

    # not check_support.result: its per-session cache may hold an unplanted run of mlp
    r = run(CheckConfig(model="mlp", progress=False, **FAST_KW))
    assert r.phase2.status == "pass" and r.phase2.compiled["status"] == "fail"
    assert r.verdict == "fail" and any(f.startswith("phase 2 (compiled)") for f in r.failures)


def test_mode_both_times_and_prices_the_compiled_model(tmp_path):
    import json

    from check_support import cli

    j, h, x = tmp_path / "r.json", tmp_path / "r.html", tmp_path / "r.xml"
    code, out, err = cli(
        "check",
        "mlp",
        "--iterations",
        "5",
        "--max-warmup",
        "5",
        "--amortize-samples",
        "1000",
        "--details",
        "--json",
        j,
        "--html",
        h,
        "--junit",
        x,
    )
    assert code == 0, out + err
    r = json.loads(j.read_text())
    c, d = r["phase3"]["compiled"], r["phase3"]["device"]
    assert (
        c["iterations"] == 5
        and c["p50_s"] > 0
        and c["cold_s"] == r["phase1"]["compile"]["compile_s"]
    )
    assert c["ratio_to_eager_p50"] == c["p50_s"] / d["p50_s"]
    k, price = r["cost"]["compiled"], r["cost"]["device"]["usd_per_hour"]
    # documented formula: price/3600 * (1e6/throughput + compile_s * 1e6/amortize_samples)
    want = price / 3600 * (1e6 / c["throughput_samples_per_s"] + k["overhead_s"] * 1e6 / 1000)
    assert k["usd_per_million"] == __import__("pytest").approx(want, rel=1e-12)
    assert k["overhead_s"] == r["phase1"]["compile"]["compile_s"]
    assert r["cost"]["device"]["overhead_label"].startswith(
        "cold-start"
    )  # eager has no compile step
    assert "compiled (backend neuron)" in out and 'id="phase3-compiled"' in h.read_text()
    assert 'name="phase3.compiled.performance"' in x.read_text()
