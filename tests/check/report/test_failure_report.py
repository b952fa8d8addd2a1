"""A failing model's report: a short message, a hint where one is known, the full text
only in the JSON, no cost table of dashes; warnings gathered in one section."""

import json

from check_support import cli, fixture

from torchneuron.check.phases import phase1

DISPATCH = (
    "Could not run 'aten::_nested_tensor_from_mask' with arguments from the 'neuron' backend. "
    "This could be because the operator doesn't exist for this backend...\n"
    + "CPU: registered\n"
    * 40
)


def test_short_message_and_hints():
    assert phase1.short_message(DISPATCH).startswith(
        "Could not run 'aten::_nested_tensor_from_mask'"
    )
    assert (
        "\n" not in phase1.short_message(DISPATCH) and len(phase1.short_message("x" * 1000)) < 250
    )
    # cut at a word's end, not mid-word
    long = "failed to legalize operation " * 20
    short = phase1.short_message(long)
    assert short.endswith(" ...") and long.startswith(short[:-4] + " ")
    assert "enable_nested_tensor=False" in phase1.hint_for(DISPATCH)
    assert "TORCHNEURON_FALLBACK" in phase1.hint_for(
        "Could not run 'aten::foo' with arguments from the 'neuron' backend"
    )
    assert phase1.hint_for("shape mismatch") is None


def test_phase1_failure_report_is_short_and_has_no_cost_table(tmp_path):
    j = tmp_path / "r.json"
    code, out, err = cli(
        "check",
        fixture("raises_on_device"),
        "--iterations",
        "5",
        "--max-warmup",
        "5",
        "--details",
        "--json",
        j,
    )
    assert code == 1, out + err
    assert (
        "this model refuses the neuron device" in out
        and "full message and traceback: --json" in out
    )
    assert "Cost: not computed (phase 3 did not run)" in out and "USD per 1M samples" not in out
    # the first screen, before the tables: the failure panel, not the cost
    first = out[: out.index("details")]
    assert "phase 1 failure" in first and "this model refuses the neuron device" in first
    assert "Cost" not in first
    e = json.loads(j.read_text())["phase1"]["error"]
    assert e["short_message"] == "this model refuses the neuron device" and e["hint"] is None
    assert "Traceback" in e["traceback"]


def test_compile_failure_gets_a_short_message_naming_stage_and_op(tmp_path):
    # aten._fft_r2c has no StableHLO lowering: the compiled mode fails at lowering,
    # while eager runs it (through the CPU fallback).
    j = tmp_path / "r.json"
    code, out, err = cli(
        "check", fixture("spectrum"), "--iterations", "3", "--max-warmup", "3", "--json", j
    )
    e = json.loads(j.read_text())["phase1"]["error"]
    assert code == 1, out + err
    assert e["compile_stage"] == "lowering" and e["op"] == "aten._fft_r2c.default"
    assert e["short_message"].startswith("NeuronCompileError: neuron backend: lowering failed")
    assert "torch.operator" in e["message"]  # the full text: JSON only
    code, out, err = cli(
        "check",
        fixture("spectrum"),
        "--mode",
        "eager",
        "--iterations",
        "3",
        "--max-warmup",
        "3",
        "--json",
        j,
    )
    assert code == 0, out + err


def test_lowering_failure_has_a_hint_and_a_short_panel(tmp_path):
    j = tmp_path / "r.json"
    code, out, err = cli(
        "check", fixture("spectrum"), "--iterations", "3", "--max-warmup", "3", "--json", j
    )
    assert code == 1, out + err
    e = json.loads(j.read_text())["phase1"]["error"]
    assert "--mode eager" in e["hint"] and "hint: " in out and "fallback_execution" in out
    # the IR dump and Dynamo's advice are in the JSON's message, not in the panel
    assert "!torch.vtensor" in e["message"] and "TORCHDYNAMO_VERBOSE" in e["message"]
    assert (
        "!torch.vtensor" not in out
        and "TORCHDYNAMO_VERBOSE" not in out
        and "DISABLE_FALLBACK" not in out
    )
