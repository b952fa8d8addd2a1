"""torchneuron check compares outputs that are not plain tensors: dataclasses, a
transformers KV cache (DynamicCache), nested lists and dicts; what it cannot compare is
listed, never dropped silently."""
import json

from check_support import cli, fixture


def test_dataclass_cache_and_nested_outputs_are_compared(tmp_path):
    j = tmp_path / "r.json"
    code, out, err = cli("check", fixture("structured"), "--iterations", "5", "--max-warmup", "5", "--json", j)
    assert code == 0, out + err
    r = json.loads(j.read_text())
    names = set(r["phase2"]["outputs"])
    assert {"hidden", "past_key_values.layers[0].key", "past_key_values.layers[0].value",
            "extra.list[0]", "extra.list[1].max"} <= names
    assert all(o["passed"] for o in r["phase2"]["outputs"].values())
    assert r["phase1"]["uncomparable_outputs"] == [{"name": "label", "type": "str"}]
    assert any("not compared (not tensors): label (str)" in w for w in r["warnings"])
