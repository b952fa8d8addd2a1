"""torch.save / torch.load of neuron tensors, storages and state_dicts, with
map_location in both directions and between cores."""

import io

import pytest
import torch


def _roundtrip(obj, **load_kw):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kw)


def _values():
    g = torch.Generator().manual_seed(0)
    return {
        "f32": torch.randn(3, 4, generator=g),
        "f64": torch.randn(5, dtype=torch.float64, generator=g),
        "i64": torch.tensor([2**40 + 3, -7]),
        "f16": torch.randn(2, 2, generator=g).half(),
        "bool": torch.tensor([True, False]),
        "scalar": torch.tensor(2.5),
    }


def test_save_load_keeps_device_dtype_and_values():
    ref = _values()
    on_dev = {k: v.neuron() for k, v in ref.items()}
    on_dev["core2"] = ref["f32"].to("neuron:2")
    loaded = _roundtrip(on_dev)
    for k, v in ref.items():
        assert loaded[k].device == torch.device("neuron", 0), k
        assert loaded[k].dtype == v.dtype
        assert torch.equal(loaded[k].cpu(), v), k
    assert loaded["core2"].device == torch.device("neuron", 2)
    assert torch.equal(loaded["core2"].cpu(), ref["f32"])


def test_weights_only_load():
    t = torch.arange(6.0).reshape(2, 3).neuron()
    loaded = _roundtrip({"t": t}, weights_only=True)
    assert loaded["t"].is_neuron and torch.equal(loaded["t"].cpu(), t.cpu())


def test_views_keep_sharing_storage_and_strides():
    base = torch.arange(12.0).reshape(3, 4).neuron()
    loaded = _roundtrip({"base": base, "row": base[1], "t": base.t()})
    assert loaded["t"].stride() == (1, 4)
    loaded["row"].fill_(-1)  # one storage, as saved
    ref = torch.arange(12.0).reshape(3, 4)
    ref[1] = -1
    assert torch.equal(loaded["base"].cpu(), ref)
    assert torch.equal(loaded["t"].cpu(), ref.t())


@pytest.mark.parametrize("map_location", ["cpu", torch.device("cpu"), lambda storage, loc: storage])
def test_map_location_to_cpu(map_location):
    ref = _values()
    loaded = _roundtrip({k: v.neuron() for k, v in ref.items()}, map_location=map_location)
    for k, v in ref.items():
        assert loaded[k].device.type == "cpu"
        assert torch.equal(loaded[k], v)


@pytest.mark.parametrize(
    "map_location,expected",
    [
        ("neuron", 0),
        ("neuron:1", 1),
        (torch.device("neuron", 3), 3),
        ({"cpu": "neuron:2"}, 2),
    ],
)
def test_map_location_from_cpu_to_neuron(map_location, expected):
    ref = _values()
    loaded = _roundtrip(ref, map_location=map_location)
    for k, v in ref.items():
        assert loaded[k].device == torch.device("neuron", expected), k
        assert torch.equal(loaded[k].cpu(), v)


def test_map_location_between_cores():
    x = torch.randn(4, 4)
    saved = {"a": x.to("neuron:0"), "b": x.to("neuron:1")}
    loaded = _roundtrip(saved, map_location="neuron:3")
    assert {t.device.index for t in loaded.values()} == {3}
    loaded = _roundtrip(saved, map_location={"neuron:0": "neuron:2"})
    assert loaded["a"].device.index == 2 and loaded["b"].device.index == 1
    assert torch.equal(loaded["a"].cpu(), x) and torch.equal(loaded["b"].cpu(), x)


def test_loading_to_a_missing_core_is_an_error():
    buf = io.BytesIO()
    torch.save(torch.ones(2), buf)
    buf.seek(0)
    with pytest.raises((RuntimeError, IndexError), match="neuron"):
        torch.load(buf, map_location="neuron:9")


def test_state_dict_round_trip():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 4)
    )
    x = torch.randn(5, 8)
    ref_out = model(x)
    model.neuron()
    sd = _roundtrip(model.state_dict())
    assert all(v.is_neuron for v in sd.values())
    fresh = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 4)
    ).neuron()
    fresh.load_state_dict(sd)
    torch.testing.assert_close(fresh(x.neuron()).cpu(), ref_out)
    # saved on the device, loaded on the CPU into a CPU model
    cpu_model = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 4)
    )
    cpu_model.load_state_dict(_roundtrip(model.state_dict(), map_location="cpu"))
    torch.testing.assert_close(cpu_model(x), ref_out)


def test_load_state_dict_copies_cpu_weights_into_neuron_model():
    src = torch.nn.Linear(3, 2)
    dst = torch.nn.Linear(3, 2).neuron(1)
    dst.load_state_dict(src.state_dict())
    assert dst.weight.device == torch.device("neuron", 1)
    assert torch.equal(dst.weight.detach().cpu(), src.weight.detach())


def test_storage_round_trip():
    t = torch.arange(5, dtype=torch.int32).neuron()
    loaded = _roundtrip(t.untyped_storage())
    # torch.load hands a saved storage back as a (byte) TypedStorage, on any device
    untyped = loaded._untyped_storage if isinstance(loaded, torch.TypedStorage) else loaded
    assert untyped.is_neuron and untyped.nbytes() == 20
    back = torch.tensor([], dtype=torch.int32).set_(untyped.cpu())
    assert torch.equal(back, torch.arange(5, dtype=torch.int32))


def test_save_to_file(tmp_path):
    path = tmp_path / "t.pt"
    t = torch.randn(3, 3).neuron()
    torch.save(t, path)
    assert torch.equal(torch.load(path).cpu(), t.cpu())
    assert torch.load(path, map_location="cpu").device.type == "cpu"
