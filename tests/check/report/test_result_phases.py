"""Phases 2 and 3 (check/result_phases.py), the training check (check/result_training.py),
the cost (check/result_cost.py), the projection (check/result_projection.py) and phase 1's
compile check (check/result_compile.py) as typed results write the JSON they wrote as dicts: the same keys in the same order (the lists below
are those of ``--json`` files written before the change), ``to_dict`` is the file's object,
and ``from_dict`` reads it back equal."""

import json

import pytest
from check_support import FAST_KW, fixture, result

from torchneuron.check.result import CheckResult, Phase1Result, jsonable
from torchneuron.check.result_compile import CompileCheckResult
from torchneuron.check.result_cost import CostResult
from torchneuron.check.result_phases import Phase2Result, Phase3Result
from torchneuron.check.result_projection import ProjectionResult
from torchneuron.check.result_training import TrainingResult

#: Phase 2's keys (``compiled`` only under ``--mode both``, the default).
PHASE2 = [
    "status",
    "reason",
    "reference_device",
    "dtype",
    "tol",
    "tol_source",
    "multiplier",
    "rule",
    "outputs",
    "warnings",
    "compiled",
]
#: Phase 3's keys before anything is timed (a skipped phase 3), and the runner's cold_basis.
PHASE3_SKIPPED = [
    "status",
    "reason",
    "samples_per_iteration",
    "settings",
    "timing",
    "ci_method",
    "device",
    "reference",
    "calibration",
    "ratio",
    "warnings",
    "rounds",
    "samples",
    "cpu_samples",
    "launch_samples",
    "cpu_clock",
    "work_time_basis",
    "cold_basis",
]
#: Phase 3's keys of a ``--mode both`` run whose compiled model was timed.
PHASE3_BOTH = PHASE3_SKIPPED[:-1] + [
    "device_name",
    "cold",
    "compiled_cpu_clock",
    "compiled_work_time_basis",
    "measure_wall_s",
    "device_calibration",
    "calibration_matmul",
    "compiled",
    "cold_basis",
]


def _json(r: CheckResult) -> dict:
    return json.loads(r.to_json())


def test_a_run_writes_the_keys_it_wrote_as_dicts():
    r = result("mlp", **FAST_KW)
    assert isinstance(r.phase2, Phase2Result) and isinstance(r.phase3, Phase3Result)
    d = _json(r)
    assert list(d["phase2"]) == PHASE2 and list(d["phase3"]) == PHASE3_BOTH
    # the --json file's objects are to_dict's (jsonable: non-finite numbers as null)
    assert d["phase2"] == jsonable(r.phase2.to_dict())
    assert d["phase3"] == jsonable(r.phase3.to_dict())
    assert d["phase3"]["compiled"]["p50_s"] == r.phase3.compiled["p50_s"]


def test_skipped_phases_keep_their_keys():
    r = result(fixture("raises_on_device"), **FAST_KW)
    d = _json(r)
    assert r.phase2.status == r.phase3.status == "skipped"
    assert list(d["phase2"]) == PHASE2[:-1]  # no compiled section
    assert list(d["phase3"]) == PHASE3_SKIPPED
    assert CheckResult.from_dict(d).to_json() == r.to_json()


def test_to_dict_read_back_is_equal():
    for r in (result("mlp", **FAST_KW), result(fixture("raises_on_device"), **FAST_KW)):
        assert Phase2Result.from_dict(r.phase2.to_dict()) == r.phase2
        assert Phase3Result.from_dict(r.phase3.to_dict()) == r.phase3
        back = CheckResult.from_dict(_json(r))
        assert isinstance(back.phase2, Phase2Result) and isinstance(back.phase3, Phase3Result)
        assert back.to_json() == r.to_json()


def test_unknown_keys_are_named():
    d = _json(result("mlp", **FAST_KW))
    with pytest.raises(ValueError, match=r"phase2: unknown key\(s\) \['extra'\]"):
        Phase2Result.from_dict({**d["phase2"], "extra": 0})
    with pytest.raises(ValueError, match=r"phase3: unknown key\(s\) \['extra'\]"):
        CheckResult.from_dict({**d, "phase3": {**d["phase3"], "extra": 0}})
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['_null'\]"):
        Phase3Result.from_dict({**d["phase3"], "_null": []})  # private: never a JSON key


def _timed(**kw) -> Phase3Result:
    p3 = Phase3Result("pass", None, 1, {}, "t", "ci", rounds=1, measure_wall_s=1.0, **kw)
    p3.device_calibration = p3.calibration_matmul = {"p50_s": 1.0}
    p3.cold_basis = "eager first pass"
    return p3


def test_the_compiled_entry_sits_where_phase3_set_it():
    # a compiled model that failed its warm-up was recorded before the round was measured; its
    # summary after the calibrations
    failed = _timed(compiled={"status": "fail", "reason": "raised"}).to_dict()
    assert list(failed)[-5:] == [
        "compiled",
        "measure_wall_s",
        "device_calibration",
        "calibration_matmul",
        "cold_basis",
    ]
    timed = _timed(compiled={"p50_s": 1.0}).to_dict()
    assert list(timed)[-5:] == [
        "measure_wall_s",
        "device_calibration",
        "calibration_matmul",
        "compiled",
        "cold_basis",
    ]


def test_an_optional_field_put_to_none_is_written():
    p3 = _timed()
    assert "compiled_cpu_clock" not in p3.to_dict()
    p3.put("compiled_cpu_clock", None)
    p3.put("baseline_processes", None)
    d = p3.to_dict()
    assert d["compiled_cpu_clock"] is None and d["baseline_processes"] is None
    assert list(d).index("compiled_cpu_clock") < list(d).index("measure_wall_s")
    assert Phase3Result.from_dict(d) == p3 and Phase3Result.from_dict(d).to_dict() == d
    p3.put("baseline_processes", {"n": 1})
    assert p3.to_dict()["baseline_processes"] == {"n": 1}


#: The cost's keys (``compiled`` only when phase 3 timed the compiled model).
COST = [
    "device",
    "reference",
    "amortize_samples",
    "formula",
    "budget_usd_per_million",
    "over_budget",
    "notes",
    "compiled",
]


def test_the_cost_writes_the_keys_it_wrote_as_a_dict():
    r = result("mlp", **FAST_KW)
    assert isinstance(r.cost, CostResult)
    d = _json(r)
    assert list(d["cost"]) == COST and d["cost"] == jsonable(r.cost.to_dict())
    skipped = result(fixture("raises_on_device"), **FAST_KW)
    assert list(_json(skipped)["cost"]) == COST[:-1]  # nothing timed: no compiled figures
    for x in (r, skipped):
        assert CostResult.from_dict(x.cost.to_dict()) == x.cost
        assert isinstance(CheckResult.from_dict(_json(x)).cost, CostResult)
    with pytest.raises(ValueError, match=r"cost: unknown key\(s\) \['extra'\]"):
        CheckResult.from_dict({**d, "cost": {**d["cost"], "extra": 0}})


#: The training check's keys with eager steps (``compiled`` under ``--mode both``), as written
#: before it was typed; its compiled section's; ``--mode compile``'s.
TRAINING = [
    "steps",
    "optimizer",
    "tol",
    "form",
    "modes",
    "per_step",
    "loss_atol",
    "grad_norm_atol",
    "final_params",
    "step_time",
    "peak_allocated_bytes",
    "device_warnings",
    "warnings",
    "status",
    "reason",
    "exact",
    "eager_verdict",
    "compiled",
]
TRAINING_COMPILED = TRAINING[5:15] + ["graph_runs"]
TRAINING_COMPILE_MODE = [
    *TRAINING[:5],
    "status",
    "reason",
    "device_warnings",
    "warnings",
    "note",
    "eager_verdict",
    "exact",
    "compiled",
]


def test_the_training_check_writes_the_keys_it_wrote_as_a_dict():
    r = result(fixture("trainable"), **FAST_KW)
    assert isinstance(r.training, TrainingResult)
    assert isinstance(r.training.compiled, TrainingResult)
    d = _json(r)["training"]
    assert list(d) == TRAINING and list(d["compiled"]) == TRAINING_COMPILED
    assert d == jsonable(r.training.to_dict())
    assert TrainingResult.from_dict(r.training.to_dict()) == r.training
    back = CheckResult.from_dict(_json(r))
    assert back.training == r.training and back.to_json() == r.to_json()
    with pytest.raises(ValueError, match=r"training: unknown key\(s\) \['extra'\]"):
        TrainingResult.from_dict({**d, "compiled": {**d["compiled"], "extra": 0}})


def test_every_training_variant_keeps_its_key_order():
    head = dict(steps=3, optimizer="AdamW", tol=1e-4, form="loss_fn(output)")
    skipped = TrainingResult("skipped", "an inference model")
    assert list(skipped.to_dict()) == ["status", "reason"]
    eager_raised = TrainingResult("fail", "raised", modes=["eager"], **head)
    assert list(eager_raised.to_dict()) == [*TRAINING[:5], "status", "reason"]
    not_compiled = TrainingResult("fail", "no graph ran", graph_runs=0, device_warnings=[])
    assert list(not_compiled.to_dict()) == ["status", "reason", "graph_runs", "device_warnings"]
    compile_raised = TrainingResult("fail", "raised", error={"type": "E"})
    assert list(compile_raised.to_dict()) == ["status", "error", "reason"]
    compile_mode = TrainingResult(
        "fail",
        "compiled: raised",
        modes=["compile"],
        device_warnings=[],
        warnings=[],
        note="--mode compile: eager training steps not run",
        eager_verdict={"status": "pass", "reason": None},
        exact={"compiled": None},
        compiled=compile_raised,
        **head,
    )
    assert list(compile_mode.to_dict()) == TRAINING_COMPILE_MODE
    assert compile_mode.to_dict()["compiled"] == compile_raised.to_dict()
    for x in (skipped, eager_raised, not_compiled, compile_raised, compile_mode):
        assert TrainingResult.from_dict(x.to_dict()) == x


#: The projection's keys when it ran (``status`` and ``reason`` alone when skipped or failed).
PROJECTION = ["status", "how", "lower_s", "reason", "note", "trn2", "trn3"]


def test_the_projection_writes_the_keys_it_wrote_as_a_dict():
    r = result(fixture("good"), projection=True, **FAST_KW)
    assert isinstance(r.projection, ProjectionResult) and r.projection.status == "pass"
    d = _json(r)["projection"]
    assert list(d) == PROJECTION and d == jsonable(r.projection.to_dict())
    skipped = _json(result("mlp", **FAST_KW))["projection"]
    assert skipped == {"status": "skipped", "reason": "not asked (--projection)"}
    for x in (d, skipped):
        assert ProjectionResult.from_dict(x).to_dict() == x
    assert ProjectionResult.from_dict(r.projection.to_dict()) == r.projection
    assert CheckResult.from_dict(_json(r)).to_json() == r.to_json()
    with pytest.raises(ValueError, match=r"projection: unknown key\(s\) \['extra'\]"):
        ProjectionResult.from_dict({**d, "extra": 0})


#: Phase 1's compile keys when it compiled and both calls and the warm compile ran (``--mode
#: both``; ``--mode compile`` adds ``phases_2_3`` before ``narrowing``).
COMPILE_OK = [
    "checked",
    "modes",
    "ok",
    "graph_count",
    "graph_breaks",
    "break_reasons",
    "compile_s",
    "cold_backend_compile_s",
    "compiled_graphs",
    "fallback_graphs",
    "graphs_ran_compiled",
    "recompiles",
    "graph_runs",
    "max_abs_diff_vs_eager",
    "warm_compile_s",
    "warm_backend_compile_s",
    "warm_cache_hits",
    "memory",
    "narrowing",
]
COMPILE_MODE = COMPILE_OK[:-1] + ["phases_2_3", "narrowing"]
#: No graph ran compiled (``NotCompiled``): the error after the graph counts.
COMPILE_NOT_COMPILED = COMPILE_OK[:13] + ["error", "narrowing"]
#: Compiling raised in the cold call (the lowering failed): the error after the breaks.
COMPILE_RAISED = COMPILE_OK[:6] + ["error", "narrowing"]
#: Not checked: ``--mode eager``, no compiler, or a failed eager pass.
COMPILE_UNCHECKED = ["checked", "modes", "note"]


def test_the_compile_check_writes_the_keys_it_wrote_as_a_dict():
    both = result("mlp", **FAST_KW)
    assert isinstance(both.phase1.compile, CompileCheckResult) and both.phase1.compile.ok
    d = _json(both)["phase1"]
    assert list(d["compile"]) == COMPILE_OK and d["compile"] == jsonable(both.phase1.compile)
    assert list(d).index("compile") == list(d).index("op_profile_note") + 1
    compiled = _json(result("mlp", mode="compile", **FAST_KW))["phase1"]["compile"]
    assert list(compiled) == COMPILE_MODE and compiled["phases_2_3"] == "compiled"
    eager = _json(result("mlp", mode="eager", **FAST_KW))["phase1"]["compile"]
    assert list(eager) == COMPILE_UNCHECKED and "--mode eager" in eager["note"]
    never = result(fixture("never_compiled"), mode="compile", **FAST_KW)
    d = _json(never)["phase1"]
    assert list(d["compile"]) == COMPILE_NOT_COMPILED and d["error"]["type"] == "NotCompiled"
    # a failed eager pass skips the compile check: its entry is phase 1's last
    failed = _json(result(fixture("raises_on_device"), **FAST_KW))["phase1"]
    assert list(failed)[-1] == "compile" and list(failed["compile"]) == COMPILE_UNCHECKED
    for x in (both, never):
        assert Phase1Result.from_dict(x.phase1.to_dict()) == x.phase1
        back = CheckResult.from_dict(_json(x))
        assert isinstance(back.phase1.compile, CompileCheckResult)
        assert back.to_json() == x.to_json()
    for x in (compiled, eager):
        assert CompileCheckResult.from_dict(x).to_dict() == x


def test_every_compile_variant_keeps_its_key_order():
    head = dict(checked=True, modes=["eager", "compile"], ok=False, graph_count=1, graph_breaks=0)
    raised = CompileCheckResult(**head, break_reasons=[], error={"type": "X"}, narrowing={})
    assert list(raised.to_dict()) == COMPILE_RAISED
    # explain failed: its counts written as null, its note after them
    unexplained = CompileCheckResult(
        checked=True, modes=["eager", "compile"], ok=False, note="explain failed", compile_s=1.0
    )
    assert list(unexplained.to_dict()) == [*COMPILE_OK[:5], "note", "compile_s"]
    assert unexplained.to_dict()["graph_count"] is None
    # the warm compile raised: the error after the warm figures set so far
    warm = CompileCheckResult(**head, break_reasons=[], compile_s=1.0, warm_compile_s=0.1)
    warm.error = {"type": "X"}
    assert list(warm.to_dict())[-3:] == ["compile_s", "warm_compile_s", "error"]
    # no compile entry yet: the JSON's {}
    assert CompileCheckResult().to_dict() == {}
    p1 = Phase1Result("pass", "neuron:0", "eager", None, "warn")
    assert p1.to_dict()["compile"] == {}
    for x in (raised, unexplained, warm, CompileCheckResult()):
        assert CompileCheckResult.from_dict(x.to_dict()) == x


def test_an_unknown_compile_key_is_named():
    with pytest.raises(ValueError, match=r"phase1.compile: unknown key\(s\) \['extra'\]"):
        CompileCheckResult.from_dict({"checked": False, "extra": 0})
    p1 = Phase1Result("pass", "neuron:0", "eager", None, "warn").to_dict()
    with pytest.raises(ValueError, match=r"phase1.compile: unknown key\(s\) \['extra'\]"):
        Phase1Result.from_dict({**p1, "compile": {"checked": False, "extra": 0}})
