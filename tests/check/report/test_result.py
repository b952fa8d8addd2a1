"""The typed result (check/result.py) is the JSON: its fields are the JSON's keys in the JSON's
order, a field dropped or renamed changes the key lists below, and a ``--json`` file read back
(``from_dict``) writes the same text again."""

import dataclasses
import json

from check_support import FAST_KW, fixture, result

from torchneuron.check import write_outputs
from torchneuron.check.config import CheckConfig
from torchneuron.check.report.json_report import dumps
from torchneuron.check.result import CheckResult, Phase1Result

#: The JSON's top-level keys in order (``profile`` only with --profile, ``inconclusive`` only
#: when inconclusive: both absent here).
TOP = [
    "schema",
    "verdict",
    "exit_code",
    "failures",
    "warnings",
    "config",
    "model",
    "manifest",
    "thresholds",
    "phase1",
    "phase2",
    "phase3",
    "exact",
    "training",
    "projection",
    "baseline",
    "cost",
    "elapsed_s",
    "baseline_saved",
]
#: Phase 1's keys of a passing run, in order.
PHASE1 = [
    "status",
    "device",
    "mode",
    "error",
    "fallback_mode",
    "cold_latency_s",
    "uncomparable_outputs",
    "determinism",
    "warnings",
    "outputs",
    "op_profile",
    "op_profile_note",
    "compile",
    "fallback",
    "narrowing",
    "memory",
]


def test_the_json_keys_are_the_fields_in_order(tmp_path):
    r = result("mlp", **FAST_KW)
    assert isinstance(r, CheckResult) and isinstance(r.phase1, Phase1Result)
    d = json.loads(r.to_json())
    assert list(d) == TOP
    assert list(d["phase1"]) == PHASE1
    fields = [f.name for f in dataclasses.fields(CheckResult)]
    assert [k for k in fields if k not in ("profile", "inconclusive")] == TOP
    assert [f.name for f in dataclasses.fields(Phase1Result)] == PHASE1
    # the --json file is to_json's text, and json_report's
    path = tmp_path / "r.json"
    write_outputs(r, CheckConfig(model="mlp", json_path=str(path)))
    assert path.read_text() == r.to_json() == dumps(r)
    assert d["verdict"] == r.verdict and d["phase1"]["device"] == r.phase1.device


def test_a_json_file_read_back_writes_the_same_text():
    r = result("mlp", **FAST_KW)
    back = CheckResult.from_dict(json.loads(r.to_json()))
    assert isinstance(back.phase1, Phase1Result)
    assert back.to_json() == r.to_json()


def test_a_failed_phase1_keeps_its_key_order():
    r = result(fixture("raises_on_device"), **FAST_KW)
    d = json.loads(r.to_json())
    # no profile and no compile check after a failed eager pass: the compile entry comes last
    assert list(d["phase1"])[-4:] == ["fallback", "narrowing", "memory", "compile"]
    assert "op_profile" not in d["phase1"] and d["phase1"]["compile"]["checked"] is False
    assert CheckResult.from_dict(d).to_json() == r.to_json()


def test_reading_back_another_versions_file_names_what_differs():
    import pytest

    d = json.loads(result("mlp", **FAST_KW).to_json())
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['new_key'\]"):
        CheckResult.from_dict({**d, "new_key": 1})
    with pytest.raises(ValueError, match=r"phase1: unknown key\(s\) \['extra'\]"):
        CheckResult.from_dict({**d, "phase1": {**d["phase1"], "extra": 0}})
    with pytest.raises(ValueError, match="schema 'torchneuron.check.result/99'"):
        CheckResult.from_dict({**d, "schema": "torchneuron.check.result/99"})
