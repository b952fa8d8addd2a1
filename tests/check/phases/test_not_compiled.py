"""torchneuron check under --mode compile/both when no graph compiled by the backend ran (issue 10,
F4): Dynamo compiled nothing (torch.compiler.disable) or every graph fell back to eager
(fallback_execution). Its figures would be eager ones under the compiled label: phase 1's
compile verdict fails instead, and the reports say how many graphs ran compiled."""

import json

import pytest
from check_support import FAST, FAST_KW, cli, fixture, result

from torchneuron.check import formatting, sweep
from torchneuron.check.baseline import compare as baseline_mod
from torchneuron.check.baseline.store import Baseline
from torchneuron.check.result import Phase1Result
from torchneuron.check.result_compile import CompileCheckResult

pytestmark = pytest.mark.skipif(not sweep.compile_available(), reason="compile path not available")


@pytest.mark.parametrize("mode", ["compile", "both"])
def test_a_model_dynamo_never_compiles_fails_phase1(mode):
    r = result(fixture("never_compiled"), mode=mode, **FAST_KW)
    c = r.phase1.compile.to_dict()
    assert c["checked"] and not c["ok"] and c["compiled_graphs"] == 0 and c["graph_runs"] == 0
    assert r.phase1.status == "fail" and r.exit_code == 1
    assert (
        c["error"]["type"] == "NotCompiled" and "0 graph(s) ran compiled" in c["error"]["message"]
    )
    assert "Dynamo compiled no graph" in c["error"]["message"]
    # no eager figures reported as the compiled model's
    assert r.phase2.status == "skipped" and r.phase3.status == "skipped"
    assert c.get("phases_2_3") != "compiled"


def test_every_graph_falling_back_fails_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "0")  # the user's setting
    monkeypatch.setenv("CHECK_FIXTURE_UNLOWERABLE", "1")  # its only graph does not lower
    j = tmp_path / "r.json"
    code, out, err = cli("check", fixture("compiled_only"), *FAST, "--mode", "compile", "--json", j)
    assert code == 1, out + err
    c = json.loads(j.read_text())["phase1"]["compile"]
    assert (
        c["compiled_graphs"] == 1
        and len(c["fallback_graphs"]) == 1
        and c["graphs_ran_compiled"] == 0
    )
    assert c["graph_runs"] == 0 and not c["ok"] and c["error"]["type"] == "NotCompiled"
    text = " ".join(out.split())
    assert "0 graph(s) ran compiled (1 fell back to eager)" in text and "ok, 1 graph(s)" not in text


def test_a_partial_fallback_passes_and_is_shown(tmp_path, monkeypatch):
    # a graph break (the sleep) splits the forward: the first graph compiles, the second falls back
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "0")
    monkeypatch.setenv("CHECK_FIXTURE_UNLOWERABLE", "1")
    monkeypatch.setenv("CHECK_FIXTURE_COMPILED_SLEEP_MS", "1")
    j = tmp_path / "r.json"
    code, out, err = cli(
        "check", fixture("compiled_only"), *FAST, "--mode", "compile", "--details", "--json", j
    )
    assert code == 0, out + err
    c = json.loads(j.read_text())["phase1"]["compile"]
    assert (
        c["ok"]
        and c["graphs_ran_compiled"] == 1
        and len(c["fallback_graphs"]) == 1
        and c["graph_runs"] >= 2
    )
    text = " ".join(out.split())
    assert "ok, 1 graph(s) ran compiled (1 fell back to eager)" in text  # the phase 1 table
    # and on the first screen: the run line, and a finding
    first = text[: text.index("Phase 1 — does it run")]
    assert "eager and compiled (1 graph(s) ran compiled (1 fell back to eager)" in first
    assert "graphs run eagerly: 1 of 2 graph(s) fell back to eager" in first


def test_a_compile_sweep_point_that_runs_no_compiled_graph_fails(tmp_path):
    j = tmp_path / "s.json"
    code, out, err = cli(
        "check",
        fixture("never_compiled"),
        "--sweep",
        "mode=compile",
        "--iterations",
        "5",
        "--max-warmup",
        "5",
        "--json",
        j,
        "--sweep-plot",
        tmp_path / "s.svg",
    )
    assert code == 1, out + err
    (p,) = json.loads(j.read_text())["points"]
    assert (
        p["status"] == "fail" and p["measured"] is None and "0 graph(s) ran compiled" in p["reason"]
    )


def _entry(ok=True, graphs=1, fell_back=0, keyed=True):
    e = {"checked": True, "ok": ok, "compiled_graphs": graphs, "graph_breaks": 0, "recompiles": 0}
    if keyed:
        e["fallback_graphs"] = [f"g{i}" for i in range(fell_back)]
    return e


def _compare(base_entry, cur_entry):
    b = Baseline(
        path="b", meta={"metrics": {"compile": base_entry}}, thresholds={}, manifest={}, outputs={}
    )
    p1 = Phase1Result(
        status="pass", device="neuron:0", mode="eager", error=None, fallback_mode="warn"
    )
    p1.compile = CompileCheckResult.from_dict(cur_entry)
    return baseline_mod.compile_success(b, p1)


def test_more_graphs_falling_back_than_the_baseline_is_a_compile_regression():
    out = _compare(_entry(graphs=2), _entry(graphs=2, fell_back=1))
    assert out["regressed"] and out["fallback_graphs"] == {"baseline": 0, "current": 1}
    assert "1 more graph(s) fell back to eager than in the baseline" in out["regressions"][0]
    assert formatting.compile_cells(out) == (
        "yes, 2 graph(s)",
        "yes, 1 graph(s) ran compiled (1 fell back to eager)",
    )
    # the same fallbacks as the baseline's: unchanged; a baseline saved before they were recorded
    # decides only whether the model still compiles
    assert not _compare(_entry(graphs=2, fell_back=1), _entry(graphs=2, fell_back=1))["regressed"]
    assert not _compare(_entry(graphs=2, keyed=False), _entry(graphs=2, fell_back=1))["regressed"]
