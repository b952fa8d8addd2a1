"""The exact quantities per pass as a typed result (check/result_exact.py) write the JSON they
wrote as a dict: the same keys in the same order (the lists below are those of ``--json`` files
written before the change), ``to_dict`` is the file's object and a baseline's saved ``exact``,
and ``from_dict`` reads it back equal."""

import json

import pytest
from check_support import FAST_KW, fixture, result

from torchneuron.check.baseline import exact as baseline_exact
from torchneuron.check.baseline import store
from torchneuron.check.config import DEFAULT_THRESHOLDS
from torchneuron.check.result import CheckResult, jsonable
from torchneuron.check.result_exact import ExactResult

#: The keys of a traced run (``error`` follows them when the trace raised).
EXACT = [
    "status",
    "launch_us",
    "compile",
    "peak_allocated_bytes",
    "peak_allocated_basis",
    "eager",
    "compiled",
]
#: A traced pass (``trace.summarize`` and what ``phases/exact.py`` adds): the eager side's
#: keys; the compiled side's lack the last two.
SIDE = [
    "kernels",
    "kernels_by_op",
    "signatures",
    "graphs",
    "fused_segments",
    "fused_kernels",
    "fallback_calls",
    "fallbacks_by_op",
    "copies",
    "new_signatures",
    "projection",
    "concatenation",
]


def _json(r: CheckResult) -> dict:
    return json.loads(r.to_json())


def test_a_run_writes_the_keys_it_wrote_as_a_dict():
    r = result("mlp", **FAST_KW)
    assert isinstance(r.exact, ExactResult) and r.exact.passed
    d = _json(r)["exact"]
    assert list(d) == EXACT and d == jsonable(r.exact.to_dict())
    assert list(d["eager"]) == SIDE and list(d["compiled"]) == SIDE[:-2]
    assert list(d["compile"]) == ["compiled_graphs", "graph_breaks", "recompiles"]
    assert r.exact.sides() == ["eager", "compiled"] and r.exact.side("eager") is r.exact.eager
    assert r.exact.eager_projection("trn2") is r.exact.eager["projection"]["trn2"]
    assert ExactResult.from_dict(r.exact.to_dict()) == r.exact
    back = CheckResult.from_dict(_json(r))
    assert isinstance(back.exact, ExactResult) and back.to_json() == r.to_json()


def test_eager_mode_traces_one_side():
    d = _json(result("mlp", mode="eager", **FAST_KW))["exact"]
    assert list(d) == EXACT and d["compiled"] is None and d["compile"] is None
    assert ExactResult.from_dict(d).sides() == ["eager"]


def test_a_skipped_trace_keeps_status_and_reason_only():
    r = result(fixture("raises_on_device"), **FAST_KW)
    d = _json(r)["exact"]
    assert list(d) == ["status", "reason"] and d["status"] == "skipped"
    assert not r.exact.passed and r.exact.why_not() == d["reason"]
    assert ExactResult.from_dict(d) == r.exact and ExactResult.from_dict(d).to_dict() == d
    assert CheckResult.from_dict(_json(r)).to_json() == r.to_json()


def test_a_trace_that_raised_writes_its_error_last():
    x = ExactResult("error", launch_us=20.0, peak_allocated_bytes=1, eager={"kernels": 1})
    x.error = "RuntimeError: boom"
    d = x.to_dict()
    assert list(d) == [*EXACT, "error"] and d["compiled"] is None
    assert ExactResult.from_dict(d) == x and x.why_not() == "RuntimeError: boom"
    out = baseline_exact.compare(
        {"exact": {"eager": {"kernels": 1}}}, CheckResult(exact=x), dict(DEFAULT_THRESHOLDS)
    )
    assert out["rows"] == [] and out["by_op"] == {}
    assert out["notes"] == ["this run's kernel trace failed (RuntimeError: boom): not compared"]


def test_a_baseline_saves_to_dict_and_is_compared_as_read_back():
    r = result("mlp", **FAST_KW)
    saved = store._metrics(r)["exact"]
    assert saved == r.exact.to_dict() and list(saved) == EXACT
    # a baseline is the dict read from disk: comparing this run with its own figures is equal
    bmx = {"exact": json.loads(json.dumps(jsonable(saved))), "compile": None}
    out = baseline_exact.compare(bmx, r, dict(DEFAULT_THRESHOLDS))
    assert out["rows"] and not out["regressions"]
    assert not any(row["changed"] for row in out["rows"])
    assert list(out["by_op"]) == ["eager", "compiled"]
    # a run whose trace was skipped saves none
    assert store._metrics(result(fixture("raises_on_device"), **FAST_KW))["exact"] is None


def test_an_unknown_exact_key_is_named():
    d = _json(result("mlp", **FAST_KW))
    with pytest.raises(ValueError, match=r"exact: unknown key\(s\) \['extra'\]"):
        ExactResult.from_dict({**d["exact"], "extra": 0})
    with pytest.raises(ValueError, match=r"exact: unknown key\(s\) \['extra'\]"):
        CheckResult.from_dict({**d, "exact": {**d["exact"], "extra": 0}})
