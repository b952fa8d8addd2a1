"""torch.profiler with ProfilerActivity.PrivateUse1 on neuron: kernels on
their streams with the emulated core's start/end, copies with bytes, CPU
fallbacks marked, device time attributed to the launching CPU operator
(key_averages), Chrome trace rows per NeuronCore stream, record_function and
schedule; device times checked against the runtime's own busy counter."""

import json
import warnings

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function, schedule

import torchneuron

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
_C = torchneuron._C


def _device_events(prof):
    return [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]


def _trace(prof, tmp_path):
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    return json.loads(path.read_text())["traceEvents"]


def _work(x):
    y = x @ x
    return torch.relu(y).sum()


def test_private_use1_is_supported_through_kineto():
    assert ProfilerActivity.PrivateUse1 in torch.profiler.supported_activities()
    assert torch.profiler.kineto_available()


def test_kernels_and_copies_are_device_rows_linked_to_their_ops(tmp_path):
    x = torch.randn(64, 64)
    torch.neuron.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        a = x.to("neuron")
        s = _work(a).cpu()
    assert torch.allclose(s, _work(x), rtol=1e-4)
    names = [e.name for e in _device_events(prof)]
    assert names == [
        "Memcpy HtoD (neuron)",
        "aten::mm",
        "aten::relu",
        "aten::sum",
        "Memcpy DtoH (neuron)",
    ]
    for e in _device_events(prof):
        assert e.device_index == 0
        assert e.time_range.end > e.time_range.start
    # Device time lands on the CPU operator that launched the kernel.
    rows = {r.key: r for r in prof.key_averages()}
    for op in ("aten::mm", "aten::relu", "aten::sum"):
        assert rows[op].self_device_time_total > 0, op
    assert rows["aten::matmul"].device_time_total >= rows["aten::mm"].self_device_time_total
    # Copies carry their bytes and direction in the trace.
    copies = {e["name"]: e for e in _trace(prof, tmp_path) if e.get("cat") == "gpu_memcpy"}
    assert copies["Memcpy HtoD (neuron)"]["args"]["bytes"] == x.nbytes
    assert copies["Memcpy DtoH (neuron)"]["args"]["bytes"] == s.nbytes
    assert copies["Memcpy HtoD (neuron)"]["args"]["kind"] == "memcpy_htod"


def test_table_sorted_by_self_device_time():
    x = torch.randn(128, 128, device="neuron")
    torch.neuron.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        for _ in range(3):
            _work(x)
        torch.neuron.synchronize()
    table = prof.key_averages().table(sort_by="self_device_time_total", row_limit=10)
    assert "Self NEURON" in table and "aten::mm" in table
    avgs = sorted(prof.key_averages(), key=lambda r: r.self_device_time_total, reverse=True)
    assert avgs[0].self_device_time_total > 0
    mm = [r for r in prof.key_averages() if r.key == "aten::mm" and r.self_cpu_time_total > 0][0]
    assert mm.count == 3


def test_device_times_match_the_runtime_busy_counter():
    x = torch.randn(256, 256, device="neuron")
    torch.neuron.synchronize()
    busy0 = _C._device_busy_ns(0)
    with profile(activities=ACTIVITIES) as prof:
        for _ in range(5):
            _work(x)
        torch.neuron.synchronize()
    busy = (_C._device_busy_ns(0) - busy0) / 1e3  # us
    events = [e for e in _device_events(prof) if not e.name.startswith("cpu_fallback")]
    traced = sum(e.time_range.end - e.time_range.start for e in events)
    assert len(events) == 15
    # Independent clocks (system vs steady) around the same kernels.
    assert traced == pytest.approx(busy, rel=0.05, abs=20 * len(events))


def test_ordering_on_streams(tmp_path):
    x = torch.randn(64, 64, device="neuron")
    s1, s2 = torch.neuron.Stream(), torch.neuron.Stream()
    torch.neuron.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        with torch.neuron.stream(s1):
            for _ in range(4):
                x.add(1)
        with torch.neuron.stream(s2):
            for _ in range(4):
                x.mul(2)
        torch.neuron.synchronize()
    rows = {}
    for e in _trace(prof, tmp_path):
        if e.get("cat") == "kernel":
            rows.setdefault(e["tid"], []).append(e)
    assert set(rows) == {s1.stream_id, s2.stream_id}
    # Kernel names are the launch names: the operator with its overload.
    assert [e["name"].split(".")[0] for e in rows[s1.stream_id]] == ["aten::add"] * 4
    assert [e["name"].split(".")[0] for e in rows[s2.stream_id]] == ["aten::mul"] * 4
    for evs in rows.values():
        evs.sort(key=lambda e: e["ts"])
        for prev, nxt in zip(evs, evs[1:]):
            assert prev["ts"] + prev["dur"] <= nxt["ts"] + 1e-3  # in order, no overlap
            assert prev["args"]["correlation"] < nxt["args"]["correlation"]


def test_chrome_trace_has_a_row_per_neuron_core_stream(tmp_path):
    x = torch.randn(8, device="neuron:1")
    torch.neuron.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        (x + 1).cpu()
    ev = _trace(prof, tmp_path)
    names = {
        (e["pid"], e["args"]["name"])
        for e in ev
        if e.get("ph") == "M" and e["name"] == "process_name"
    }
    assert (1, "NeuronCore 1") in names
    threads = {
        (e["pid"], e["tid"], e["args"]["name"])
        for e in ev
        if e.get("ph") == "M" and e["name"] == "thread_name"
    }
    assert (1, 0, "stream 0 (default)") in threads
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    assert kernels and all(e["pid"] == 1 for e in kernels)


def test_cpu_fallback_is_marked_with_its_copies(fallback_op, tmp_path):
    x = torch.linspace(0.5, 2.0, 16, device="neuron")
    torch.neuron.synchronize()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with profile(activities=ACTIVITIES) as prof:
            getattr(torch, fallback_op)(x).cpu()
    fb = [e for e in _device_events(prof) if e.name.startswith("cpu_fallback: ")]
    assert len(fb) == 1 and fallback_op in fb[0].name
    copies = [e.name for e in _device_events(prof) if e.name.startswith("Memcpy")]
    assert "Memcpy DtoH (neuron)" in copies and "Memcpy HtoD (neuron)" in copies
    host_rows = [
        e
        for e in _trace(prof, tmp_path)
        if e.get("ph") == "M"
        and e["name"] == "thread_name"
        and e["args"]["name"] == "host (CPU fallback)"
    ]
    assert host_rows
    # The fallback's time is device time of its operator: it shows in the table.
    row = [r for r in prof.key_averages() if fallback_op in r.key and r.self_device_time_total > 0]
    assert row


def test_synchronous_kernels_and_item_are_device_rows(tmp_path):
    """An op whose result size depends on the data (x[mask]) runs on the host
    in the current stream's place, and .item() reads one element: both are
    device time on that stream's row, linked to their operator (they were
    missing from the trace and the table)."""
    x = torch.randn(64, 64)
    d = x.to("neuron")
    s1 = torch.neuron.Stream()
    torch.neuron.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        with torch.neuron.stream(s1):
            m = d[d > 0]
            v = d.sum().item()
    assert torch.equal(m.cpu(), x[x > 0]) and v == pytest.approx(x.sum().item(), rel=1e-4, abs=1e-3)
    index = [e for e in _device_events(prof) if e.name.startswith("aten::index")]
    assert len(index) == 1 and index[0].device_resource_id == s1.stream_id
    assert index[0].time_range.elapsed_us() > 0
    rows = {r.key: r for r in prof.key_averages() if r.self_cpu_time_total > 0}
    assert rows["aten::index"].self_device_time_total > 0
    assert rows["aten::_local_scalar_dense"].self_device_time_total > 0
    item_copies = [
        e
        for e in _trace(prof, tmp_path)
        if e.get("cat") == "gpu_memcpy" and e["tid"] == s1.stream_id
    ]
    assert [e["args"]["bytes"] for e in item_copies] == [4]
    assert item_copies[0]["args"]["kind"] == "memcpy_dtoh"


def test_record_function_and_schedule():
    x = torch.randn(32, 32, device="neuron")
    traces = []
    torch.neuron.synchronize()
    with profile(
        activities=ACTIVITIES,
        schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
        on_trace_ready=traces.append,
    ) as prof:
        for _ in range(5):
            with record_function("train_step"):
                _work(x)
                torch.neuron.synchronize()
            prof.step()
    assert len(traces) == 1
    rows = {r.key: r for r in prof.key_averages()}
    assert rows["train_step"].count == 2
    assert len([e for e in _device_events(prof) if e.name == "aten::mm"]) == 2
    assert rows["train_step"].device_time_total > 0


def test_tracing_is_off_outside_a_profile_and_cpu_only_profiles_have_no_device_rows():
    x = torch.randn(8, device="neuron")
    assert not _C._activity_tracing()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        assert not _C._activity_tracing()
        (x + 1).cpu()
    assert not _device_events(prof)
    with profile(activities=ACTIVITIES):
        assert _C._activity_tracing()
    assert not _C._activity_tracing()
