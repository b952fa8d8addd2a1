"""The warm path's index (graph key -> executable key + run plan): a hit skips the FX
passes and the lowering; a corrupt index entry or executable behind a hit is detected,
warned about and rebuilt; graphs differing only in a constant do not share; a warm
start's executable loads on the background thread (prefetch.py), and a hint shared by
two graphs never hands one the other's executable."""

import os
import threading

import pytest
import torch
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401
from torchneuron.compiler import cache, graph_compiler, neuron_cc


def _files(root, ext):
    return [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(ext)]


def _fn(x):
    return (x @ x.T).relu() * 3.0


def _warm_restart():
    cache.clear_memory_cache()
    torch._dynamo.reset()


def test_index_hit_skips_passes_and_lowering(monkeypatch):
    x = torch.randn(6, 5)
    ref = _fn(x)
    assert torch.allclose(
        torch.compile(_fn, backend="neuron")(x.to("neuron")).cpu(), ref, atol=1e-5
    )
    _warm_restart()

    def boom(*a, **k):
        raise AssertionError("the warm path ran the passes or the lowering")

    monkeypatch.setattr(graph_compiler, "run_passes", boom)
    monkeypatch.setattr(graph_compiler, "lower_to_stablehlo", boom)
    out = torch.compile(_fn, backend="neuron")(x.to("neuron"))
    assert torch.allclose(out.cpu(), ref, atol=1e-5)
    assert torch.neuron.get_dynamo_metrics()[-1]["cache"] == "disk"


def test_corrupt_index_entry_is_warned_and_rewritten():
    x = torch.randn(6, 5)
    ref = _fn(x)
    torch.compile(_fn, backend="neuron")(x.to("neuron"))
    root = os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"]
    (idx,) = _files(root, ".index")
    data = open(idx, "rb").read()
    open(idx, "wb").write(data[:-3] + b"xyz")  # payload no longer matches
    _warm_restart()
    with pytest.warns(RuntimeWarning, match="index entry .* truncated or corrupt"):
        out = torch.compile(_fn, backend="neuron")(x.to("neuron"))
    assert torch.allclose(out.cpu(), ref, atol=1e-5)
    assert cache.index_decode(cache.decode(open(idx, "rb").read()))["key"]  # valid again


def test_corrupt_executable_behind_index_hit_is_rebuilt():
    x = torch.randn(6, 5)
    ref = _fn(x)
    torch.compile(_fn, backend="neuron")(x.to("neuron"))
    root = os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"]
    (neff,) = _files(root, ".neff")
    data = open(neff, "rb").read()
    open(neff, "wb").write(data[:100] + bytes(len(data) - 100))
    _warm_restart()
    with pytest.warns(RuntimeWarning, match="truncated or corrupt; rebuilding"):
        out = torch.compile(_fn, backend="neuron")(x.to("neuron"))
    assert torch.allclose(out.cpu(), ref, atol=1e-5)
    assert torch.neuron.get_dynamo_metrics()[-1]["cache"] == "compiled"


def test_graphs_differing_only_in_a_constant_do_not_share():
    x = torch.randn(3, 4)
    for k in (2.0, 5.0):
        _warm_restart()

        def f(x, k=k):
            return (x * k).sum(0)

        out = torch.compile(f, backend="neuron")(x.to("neuron")).cpu()
        assert torch.allclose(out, (x * k).sum(0), atol=1e-6)


def _record_loads(monkeypatch):
    """(thread name, payload) of every executable deserialization."""
    loads = []
    orig = neuron_cc.NeuronExecutable.deserialize.__func__

    def deserialize(cls, data, options):
        loads.append((threading.current_thread().name, bytes(data)))
        return orig(cls, data, options)

    monkeypatch.setattr(neuron_cc.NeuronExecutable, "deserialize", classmethod(deserialize))
    return loads


def test_warm_start_loads_its_executable_in_the_background(monkeypatch):
    x = torch.randn(6, 5)
    ref = _fn(x)
    torch.compile(_fn, backend="neuron")(x.to("neuron"))
    _warm_restart()
    loads = _record_loads(monkeypatch)
    out = torch.compile(_fn, backend="neuron")(x.to("neuron"))
    assert torch.allclose(out.cpu(), ref, atol=1e-5)
    rec = torch.neuron.get_dynamo_metrics()[-1]
    assert rec["cache"] == "disk"
    # loaded once, by the prefetch thread (while AOTAutograd traced), not by the caller
    assert [t for t, _ in loads] and all(t.startswith("neuron-prefetch") for t, _ in loads)
    assert cache.read_entry(rec["graph_id"]) == loads[0][1]


def test_a_hint_shared_by_two_graphs_never_gives_the_other_executable(monkeypatch):
    # x * 2 and x * 5 are the same Dynamo graph but for the constant: one hint. The
    # second graph's warm start prefetches the first's executable, and must not run it.
    x = torch.randn(3, 4)

    def f2(x):
        return (x * 2.0).sum(0)

    def f5(x):
        return (x * 5.0).sum(0)

    torch.compile(f2, backend="neuron")(x.to("neuron"))
    key2 = torch.neuron.get_dynamo_metrics()[-1]["graph_id"]
    _warm_restart()
    loads = _record_loads(monkeypatch)
    out = torch.compile(f5, backend="neuron")(x.to("neuron")).cpu()
    cache._loader.submit(lambda: None).result()  # the background load has finished
    assert [p for _, p in loads] == [cache.read_entry(key2)]  # f2's, prefetched
    assert key2 not in cache._pending  # and dropped once f5's own key was known
    assert torch.allclose(out, (x * 5.0).sum(0), atol=1e-6)
    assert torch.neuron.get_dynamo_metrics()[-1]["cache"] == "compiled"
