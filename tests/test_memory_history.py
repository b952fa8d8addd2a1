"""torch.neuron.memory._record_memory_history / _snapshot / memory_snapshot /
_dump_snapshot with torch.cuda's meanings and file format: PyTorch's own
torch.cuda._memory_viz reads the dump; the snapshot's segments and blocks
agree with memory_stats and mem_get_info."""
import pickle

import pytest
import torch
from torch.cuda import _memory_viz

M = torch.neuron.memory


@pytest.fixture
def history():
    M._record_memory_history(max_entries=10000)
    yield
    M._record_memory_history(enabled=None)


def _allocate_named_tensor():
    return torch.empty(300_000, device="neuron")  # 1.2 MB: large pool


def _blocks(snapshot, device=0):
    return [b for s in snapshot["segments"] if s["device"] == device for b in s["blocks"]]


def test_alloc_and_free_events_with_stacks(history):
    t = _allocate_named_tensor()
    ptr = t.data_ptr()
    del t
    torch.neuron.synchronize()
    snap = M._snapshot()
    trace = snap["device_traces"][0]
    allocs = [e for e in trace if e["action"] == "alloc" and e["addr"] == ptr]
    frees = [e for e in trace if e["action"] == "free_completed" and e["addr"] == ptr]
    assert allocs and frees
    # The block's size: the request rounded to 512 bytes, or the whole segment
    # when the rest would be too small to split off (as CUDA's allocator).
    assert allocs[-1]["size"] in (1_200_128, 2 << 20)
    assert any(f["name"] == "_allocate_named_tensor" and f["filename"].endswith("test_memory_history.py")
               for f in allocs[-1]["frames"])
    assert {"action", "addr", "size", "stream", "time_us", "frames"} <= set(allocs[-1])


def test_live_blocks_carry_their_allocation_stack(history):
    t = _allocate_named_tensor()
    snap = M._snapshot()
    block = [b for b in _blocks(snap) if b["address"] == t.data_ptr()]
    assert len(block) == 1
    assert block[0]["state"] == "active_allocated"
    assert block[0]["requested_size"] == t.nbytes
    assert any(f["name"] == "_allocate_named_tensor" for f in block[0]["frames"])
    assert M.memory_snapshot() == M._snapshot()["segments"]
    del t


def test_memory_viz_reads_the_dump(history, tmp_path):
    # 40 MB: more than any cached segment holds, so a segment_alloc is recorded.
    keep = [_allocate_named_tensor(), torch.ones(100, device="neuron"), torch.empty(10_000_000, device="neuron")]
    del keep[0]
    torch.neuron.synchronize()
    path = tmp_path / "snap.pickle"
    M._dump_snapshot(str(path))
    data = pickle.loads(path.read_bytes())
    assert "segment_alloc" in [e["action"] for e in data["device_traces"][0]]
    assert _memory_viz.segsum(data).startswith("Summary of segments")
    text = _memory_viz.trace(data)
    assert "cudaMalloc" in text and "free completed" in text
    flame = _memory_viz.memory(data, format_flamegraph=lambda lines: lines)
    assert "_allocate_named_tensor" in flame or "test_memory_viz_reads_the_dump" in flame
    assert _memory_viz.segments(data, format_flamegraph=lambda lines: lines)
    for plot in (_memory_viz.trace_plot, _memory_viz.segment_plot):
        assert "<html" in plot(data).lower()


def test_snapshot_agrees_with_memory_stats_and_mem_get_info():
    keep = [torch.empty(n, device="neuron:2") for n in (10, 1000, 300_000, 2_000_000)]
    del keep[1]
    torch.neuron.synchronize()
    segs = [s for s in M.memory_snapshot() if s["device"] == 2]
    stats = torch.neuron.memory_stats(2)
    free, total = torch.neuron.mem_get_info(2)
    reserved = sum(s["total_size"] for s in segs)
    assert reserved == stats["reserved_bytes.all.current"] == total - free
    assert sum(s["allocated_size"] for s in segs) == stats["allocated_bytes.all.current"]
    assert sum(s["requested_size"] for s in segs) == stats["requested_bytes.all.current"]
    assert len(segs) == stats["segment.all.current"]
    live = [b for s in segs for b in s["blocks"] if b["state"] == "active_allocated"]
    assert len(live) == stats["allocation.all.current"]
    for s in segs:
        assert sum(b["size"] for b in s["blocks"]) == s["total_size"]
        assert s["segment_type"] == ("small" if s["total_size"] == 2 << 20 and
                                     all(b["size"] <= 1 << 20 for b in s["blocks"]) else s["segment_type"])
    for t in keep:
        assert any(b["address"] == t.data_ptr() for b in live)


def test_max_entries_state_and_stop():
    M._record_memory_history(max_entries=3)
    for _ in range(5):
        torch.empty(100, device="neuron")
    torch.neuron.synchronize()
    assert len(M._snapshot()["device_traces"][0]) == 3
    M._record_memory_history(enabled="state")
    t = _allocate_named_tensor()
    snap = M._snapshot()
    assert snap["device_traces"][0] == []
    assert any(f["name"] == "_allocate_named_tensor" for b in _blocks(snap) for f in b["frames"])
    M._record_memory_history(enabled=None)
    assert all(b["frames"] == [] for b in _blocks(M._snapshot()))
    del t


def test_oom_is_recorded(history):
    total = torch.neuron.mem_get_info(3)[1]
    with pytest.raises(torch.OutOfMemoryError):
        torch.empty(total + 1, dtype=torch.uint8, device="neuron:3")
    ooms = [e for e in M._snapshot()["device_traces"][3] if e["action"] == "oom"]
    assert ooms and ooms[-1]["size"] == total + 1 and "device_free" in ooms[-1]
    torch.empty(4, device="neuron:3").cpu()  # the device keeps working


@pytest.mark.parametrize("kwargs", [{"enabled": "yes"}, {"context": "bad"}, {"stacks": "cpp"},
                                    {"max_entries": -1}])
def test_bad_arguments_raise(kwargs):
    with pytest.raises(ValueError, match="_record_memory_history"):
        M._record_memory_history(**kwargs)
