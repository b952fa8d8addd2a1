"""torchneuron check --profile: a steady-state iteration under torch.profiler;
the HTML report gains a timeline (host dispatch, each stream, fallbacks in red)
and the top operators by device time; the JSON carries the same table."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from check_support import FAST, cli, fixture, needs_fallback_op

from torchneuron.check.report.profile_html import html_section
from torchneuron.check.result import CheckResult
from torchneuron.check.result_profile import ProfileResult

REPO = Path(__file__).resolve().parents[3]

#: The ``profile`` object's keys in the order the JSON has written them (before it was typed).
OK_KEYS = [
    "timeline",
    "rows",
    "span_us",
    "top_ops",
    "device_time_us",
    "fallback_time_us",
    "table",
    "status",
    "elapsed_s",
]


def test_profile_in_json_and_html(tmp_path):
    js, html = tmp_path / "r.json", tmp_path / "r.html"
    code, out, err = cli(
        "check",
        "mlp",
        *FAST,
        "--skip-reference-perf",
        "--profile",
        "--json",
        js,
        "--html",
        html,
        "--quiet",
    )
    assert code == 0, err
    doc = json.loads(js.read_text())
    p = doc["profile"]
    assert list(p) == OK_KEYS and p["status"] == "ok"
    back = CheckResult.from_dict(doc)  # the typed result reads its own JSON back
    assert isinstance(back.profile, ProfileResult) and back.profile.to_dict() == p
    ops = [o["op"] for o in p["top_ops"]]
    assert "aten::addmm" in ops or "aten::mm" in ops, ops
    devs = [o["self_device_us"] for o in p["top_ops"]]
    assert devs == sorted(devs, reverse=True) and devs[0] > 0
    assert p["device_time_us"] >= sum(devs) * 0.99
    assert "host dispatch" in p["rows"] and "neuron:0 stream 0" in p["rows"]
    kinds = {s["kind"] for s in p["timeline"]}
    assert {"cpu_op", "kernel"} <= kinds  # inputs stay on the device: no copy
    page = html.read_text()
    assert 'id="profile"' in page and "Top operators by self device time" in page
    assert page.count("<svg") >= 1 and ops[0] in page


def test_fallbacks_are_highlighted(tmp_path):
    op = needs_fallback_op()
    js = tmp_path / "r.json"
    code, _, err = cli(
        "check",
        fixture("falls_back"),
        *FAST,
        "--skip-reference-perf",
        "--profile",
        "--json",
        js,
        "--quiet",
    )
    assert code == 0, err
    p = json.loads(js.read_text())["profile"]
    fb = [s for s in p["timeline"] if s["kind"] == "cpu_fallback"]
    assert fb and op in fb[0]["name"]
    assert any(s["kind"] == "memcpy" for s in p["timeline"])  # the fallback's copies
    assert any(o["cpu_fallback"] and op in o["op"] for o in p["top_ops"]), p["top_ops"]
    assert p["fallback_time_us"] > 0


def test_no_profile_without_the_flag(tmp_path):
    js = tmp_path / "r.json"
    code, _, err = cli("check", "mlp", *FAST, "--skip-reference-perf", "--json", js, "--quiet")
    assert code == 0, err
    assert "profile" not in json.loads(js.read_text())


@pytest.mark.parametrize(
    "res, keys, shown",
    [
        (
            ProfileResult(status="skipped", reason="phase 1 failed"),
            ["status", "reason"],
            "not profiled: phase 1 failed",
        ),
        (
            ProfileResult(status="error", error="RuntimeError: boom", elapsed_s=0.5),
            ["status", "error", "timeline", "top_ops", "rows", "span_us", "device_time_us"]
            + ["fallback_time_us", "elapsed_s"],
            "profiling failed: RuntimeError: boom",
        ),
    ],
)
def test_skipped_and_failed_profiles_keep_their_keys_and_say_why(res, keys, shown):
    d = res.to_dict()
    assert list(d) == keys
    assert ProfileResult.from_dict(d) == res
    assert shown in html_section(res) and "<svg" not in html_section(res)


def test_an_unknown_profile_key_is_refused():
    with pytest.raises(ValueError, match="unknown key"):
        ProfileResult.from_dict({"status": "ok", "flamegraph": []})


@pytest.mark.unprotected_only
def test_the_profiling_example_writes_its_files(tmp_path):
    # examples/profile_minilm.py (docs/profiler.md): trace, timeline and memory snapshot
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    p = subprocess.run(
        [sys.executable, str(REPO / "examples" / "profile_minilm.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    for name in ("minilm_trace.json", "minilm_timeline.png", "minilm_memory.pickle"):
        assert (tmp_path / name).stat().st_size > 0, name
    assert "Self" in p.stdout  # the top operators' table
