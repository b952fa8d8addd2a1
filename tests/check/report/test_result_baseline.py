"""The comparison with --baseline as a typed result (check/result_baseline.py) writes the JSON
it wrote as a dict: the same keys in the same order (the lists below are those of ``--json``
files written before the change), ``to_dict`` is the file's object, and ``from_dict`` reads it
back equal."""

import json

import pytest
from check_support import FAST_KW, result

from torchneuron.check.result import CheckResult, jsonable
from torchneuron.check.result_baseline import BaselineComparison

#: A full comparison's keys.
FULL = [
    "path",
    "created_utc",
    "regressions",
    "accuracy",
    "latency",
    "memory",
    "changes",
    "compiled",
    "exact",
    "training",
    "status",
]
#: Phase 1 failed: only whether the model still compiles was compared.
COMPILE_ONLY = ["path", "created_utc", "status", "regressions", "compiled", "reason"]


@pytest.fixture(scope="module")
def rechecked(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("typed_baseline") / "mlp")
    saved = result("mlp", save_baseline=d, baseline_runs=1, **FAST_KW)
    assert saved.baseline_saved == d and saved.baseline is None
    return result("mlp", baseline=d, **FAST_KW)


def _json(r: CheckResult) -> dict:
    return json.loads(r.to_json())


def test_a_recheck_writes_the_keys_it_wrote_as_a_dict(rechecked):
    r = rechecked
    assert isinstance(r.baseline, BaselineComparison) and not r.baseline.compile_only
    d = _json(r)["baseline"]
    assert list(d) == FULL and d == jsonable(r.baseline.to_dict())
    assert d["status"] == r.baseline.status == "pass" and d["regressions"] == []
    assert list(d["exact"]) == ["rows", "regressions", "notes", "by_op"]
    assert list(d["compiled"]) == ["compile", "regressions", "latency"]
    assert BaselineComparison.from_dict(r.baseline.to_dict()) == r.baseline
    back = CheckResult.from_dict(_json(r))
    assert isinstance(back.baseline, BaselineComparison) and back.to_json() == r.to_json()


def test_a_compile_only_comparison_keeps_its_key_order():
    why = "phase 1 failed: only whether the model compiles was compared"
    comp = {"regressed": False, "decision": "pass", "regressions": [], "note": "not compared"}
    b = BaselineComparison(
        "b", None, status="skipped", regressions=[], compiled={"compile": comp}, reason=why
    )
    assert b.compile_only and list(b.to_dict()) == COMPILE_ONLY
    assert BaselineComparison.from_dict(b.to_dict()) == b
    full = BaselineComparison("b", "2026-12-01", accuracy={}, changes={}, status="pass")
    assert list(full.to_dict()) == FULL and full.to_dict()["memory"] is None
    assert BaselineComparison.from_dict(full.to_dict()) == full


def test_an_unknown_baseline_key_is_named(rechecked):
    d = _json(rechecked)
    with pytest.raises(ValueError, match=r"baseline: unknown key\(s\) \['extra'\]"):
        BaselineComparison.from_dict({**d["baseline"], "extra": 0})
    with pytest.raises(ValueError, match=r"baseline: unknown key\(s\) \['extra'\]"):
        CheckResult.from_dict({**d, "baseline": {**d["baseline"], "extra": 0}})
