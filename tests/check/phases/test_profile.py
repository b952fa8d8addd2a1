"""torchneuron check --profile: a steady-state iteration under torch.profiler;
the HTML report gains a timeline (host dispatch, each stream, fallbacks in red)
and the top operators by device time; the JSON carries the same table."""

import json

from check_support import FAST, cli, fixture, needs_fallback_op


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
    p = json.loads(js.read_text())["profile"]
    assert p["status"] == "ok"
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
