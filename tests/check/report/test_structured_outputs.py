"""torchneuron check compares outputs that are not plain tensors: dataclasses, a
transformers KV cache (DynamicCache), nested lists and dicts; what it cannot compare is
listed, never dropped silently."""

import json

from check_support import cli, fixture


def test_dataclass_cache_and_nested_outputs_are_compared(tmp_path):
    j = tmp_path / "r.json"
    code, out, err = cli(
        "check", fixture("structured"), "--iterations", "5", "--max-warmup", "5", "--json", j
    )
    assert code == 0, out + err
    r = json.loads(j.read_text())
    names = set(r["phase2"]["outputs"])
    assert {
        "hidden",
        "past_key_values.layers[0].key",
        "past_key_values.layers[0].value",
        "extra.list[0]",
        "extra.list[1].max",
    } <= names
    assert all(o["passed"] for o in r["phase2"]["outputs"].values())
    assert r["phase1"]["uncomparable_outputs"] == [{"name": "label", "type": "str"}]
    assert any("not compared (not tensors): label (str)" in w for w in r["warnings"])


def test_an_encoder_decoder_cache_compares_both_caches(tmp_path):
    # T5/BART/Whisper return an EncoderDecoderCache: it was "not compared (not tensors)", and a
    # wrong cross-attention cache passed
    code, text, r = _check(tmp_path, "enc_dec_cache", "--mode", "eager")
    assert code == 1, text
    outs = r["phase2"]["outputs"]
    base = "past_key_values.{}.layers[0].{}"
    assert {
        base.format(c, kv)
        for c in ("self_attention_cache", "cross_attention_cache")
        for kv in ("key", "value")
    } | {"hidden"} == set(outs)
    bad = {k for k, o in outs.items() if not o["passed"]}
    assert bad == {base.format("cross_attention_cache", "value")}, outs
    assert abs(outs[base.format("cross_attention_cache", "value")]["max_abs"] - 1.0) < 1e-6
    assert r["phase1"]["uncomparable_outputs"] == []


def test_outputs_whose_names_collide_are_both_compared(tmp_path):
    # {"a": {"b": t1}, "a.b": t2} both flatten to "a.b": t1 was dropped, and its error passed
    code, text, r = _check(tmp_path, "same_names", "--mode", "eager")
    assert code == 1, text
    outs = r["phase2"]["outputs"]
    assert set(outs) == {"a.b", "a.b#2"}
    assert (
        not outs["a.b"]["passed"]
        and abs(outs["a.b"]["max_abs"] - 1.0) < 1e-6
        and outs["a.b#2"]["passed"]
    )


def _check(tmp_path, name, *extra):
    j = tmp_path / f"{name}.json"
    code, out, err = cli(
        "check", fixture(name), "--iterations", "5", "--max-warmup", "5", "--json", j, *extra
    )
    return code, out + err, json.loads(j.read_text())


def test_complex_output_compares_the_imaginary_part(tmp_path):
    # .double() of a complex tensor keeps the real part only: this passed with max abs 0
    code, text, r = _check(tmp_path, "complex_imag_differs", "--mode", "eager")
    assert code == 1, text
    z = r["phase2"]["outputs"]["z"]
    assert not z["passed"] and abs(z["max_abs"] - 1.0) < 1e-6, z
    assert "discards the imaginary part" not in text


def test_python_numbers_in_outputs_are_compared(tmp_path):
    code, text, r = _check(tmp_path, "python_int_differs", "--mode", "eager")
    assert code == 1, text
    n = r["phase2"]["outputs"]["n"]
    assert not n["passed"] and n["max_abs"] == 4.0, n
    assert r["phase2"]["outputs"]["y"]["passed"]
    assert r["phase1"]["uncomparable_outputs"] == []


def test_numbers_and_empty_outputs_pass_when_equal_in_both_modes(tmp_path):
    # default mode: the compiled model's outputs are compared too; an empty output made
    # the check's own max() raise, reported as a compile failure
    code, text, r = _check(tmp_path, "scalars_and_empty")
    assert code == 0, text
    outs = r["phase2"]["outputs"]
    assert set(outs) == {"h", "empty", "n", "flag", "scale"}
    assert all(o["passed"] for o in outs.values()), outs
    assert (
        outs["n"]["dtype"] == "int64"
        and outs["flag"]["dtype"] == "bool"
        and outs["scale"]["dtype"] == "float64"
    )
    assert r["phase1"]["compile"]["ok"], r["phase1"]["compile"]
    assert r["phase1"]["compile"]["max_abs_diff_vs_eager"]["empty"] == 0.0
    comp = r["phase2"]["compiled"]["outputs"]
    assert all(o["passed"] for o in comp.values()) and set(comp) == set(outs), comp
