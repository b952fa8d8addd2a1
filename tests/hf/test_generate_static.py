"""`generate(cache_implementation="static")` on neuron: transformers compiles the decoding
step with backend neuron once; more tokens (4, then 8) compile nothing more, and the
greedy tokens are the CPU run's."""

import pytest
from conftest import run_python
from hf_jobs import GENERATE_STATIC, result

pytestmark = pytest.mark.slow


def test_static_cache_generate_compiles_once():
    p = run_python(GENERATE_STATIC, env={"HF_HUB_OFFLINE": "1"}, timeout=400)
    r = result(p.stdout)
    assert r["n1"] >= 1  # the decoding step ran compiled on neuron
    assert r["n2"] == r["n1"] and r["unique_graphs"] == r["n1"]  # no graph per token
    assert r["out2"] == r["ref"]
    assert r["out1"] == [r["ref"][0][:9]]
    assert r["fallbacks"] == []
