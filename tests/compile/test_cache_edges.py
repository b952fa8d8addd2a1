"""Rough edges of the compile cache and its variables: an unwritable cache folder warns
once and the graphs still run (uncached); a folder where an entry should be is named in
a warning, not a bare IsADirectoryError; a boolean variable with a value that is not
one is an error naming it (it was read as 1)."""

import os
import warnings

import pytest
import torch
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401
from torchneuron.compiler import cache, config


def _run(fn, *xs):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = torch.compile(fn, backend="neuron")(*[x.to("neuron") for x in xs])
        torch.neuron.synchronize()
    return out.cpu(), [str(m.message) for m in w if "compile cache" in str(m.message)]


def _unwritable_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "_unwritable", set())  # warned once per process and folder
    if os.geteuid() == 0:  # root writes into read-only folders: a file in the way instead
        (tmp_path / "file").write_text("")
        root = tmp_path / "file" / "cache"
    else:
        root = tmp_path / "ro"
        root.mkdir()
        root.chmod(0o555)
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(root))
    return root


def test_unwritable_cache_folder_warns_once_and_runs(tmp_path, monkeypatch):
    root = _unwritable_cache(tmp_path, monkeypatch)
    x = torch.randn(4, 5)
    out, msgs = _run(lambda t: t.exp() * 2, x)
    torch.testing.assert_close(out, x.exp() * 2)
    assert len(msgs) == 1, msgs
    assert str(root) in msgs[0] and "will not be cached" in msgs[0]
    out, msgs = _run(lambda t: t.sin() - 1, x)  # another graph: no second warning
    torch.testing.assert_close(out, x.sin() - 1)
    assert msgs == []
    assert [r["cache"] for r in torch.neuron.get_dynamo_metrics()] == ["compiled", "compiled"]


def test_read_only_cache_folder_is_still_read(tmp_path, monkeypatch):
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    x = torch.randn(4, 5)
    _run(lambda t: t.exp() * 2, x)  # fills the cache
    root = tmp_path / "neff_cache"
    for d, subdirs, _ in os.walk(root):
        os.chmod(d, 0o555)
    monkeypatch.setattr(cache, "_unwritable", set())
    cache.clear_memory_cache()
    torch._dynamo.reset()
    out, msgs = _run(lambda t: t.exp() * 2, x)
    torch.testing.assert_close(out, x.exp() * 2)
    assert torch.neuron.get_dynamo_metrics()[-1]["cache"] == "disk"


def test_folder_in_place_of_an_entry_is_named(tmp_path):
    x = torch.randn(3)
    _run(lambda t: t * 3 + 1, x)
    key = torch.neuron.get_dynamo_metrics()[0]["graph_id"]
    path = cache.entry_path(key)
    os.remove(path)
    os.mkdir(path)  # a folder where the entry should be
    cache.clear_memory_cache()
    torch._dynamo.reset()
    out, msgs = _run(lambda t: t * 3 + 1, x)
    torch.testing.assert_close(out, x * 3 + 1)
    assert any(path in m and "is a folder" in m for m in msgs), msgs
    assert torch.neuron.get_dynamo_metrics()[-1]["cache"] == "compiled"


@pytest.mark.parametrize(
    "value, disabled",
    [
        ("1", True),
        ("0", False),
        ("yes", True),
        ("No", False),
        ("TRUE", True),
        ("off", False),
        (" 1 ", True),
        ("", True),
    ],
)
def test_fallback_variable_spellings(value, disabled, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", value)
    assert config.fallback_execution_disabled() is disabled


@pytest.mark.parametrize("value", ["2", "maybe", "ture", "disable"])
def test_fallback_variable_other_values_raise(value, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", value)
    with pytest.raises(
        ValueError, match="TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=.* is not a boolean; use 1 or 0"
    ):
        config.fallback_execution_disabled()
    # through torch.compile: Dynamo's BackendCompilerFailed (a RuntimeError) carries it
    with pytest.raises(RuntimeError, match="TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION"):
        torch.compile(lambda t: t + 1, backend="neuron")(torch.ones(2, device="neuron"))
