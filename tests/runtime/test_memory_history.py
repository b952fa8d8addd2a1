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
    # As c10's trace: alloc and free events carry the bytes requested (the
    # block, rounded, is in the snapshot's segments).
    assert allocs[-1]["size"] == frees[-1]["size"] == 1_200_000
    assert any(
        f["name"] == "_allocate_named_tensor" and f["filename"].endswith("test_memory_history.py")
        for f in allocs[-1]["frames"]
    )
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
    keep = [
        _allocate_named_tensor(),
        torch.ones(100, device="neuron"),
        torch.empty(10_000_000, device="neuron"),
    ]
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
        # Pools as CUDA's: blocks of at most 1 MiB in 2 MiB "small" segments.
        sizes = [b["size"] for b in s["blocks"] if b["state"] == "active_allocated"]
        if s["segment_type"] == "small":
            assert s["total_size"] == 2 << 20 and all(n <= 1 << 20 for n in sizes)
        else:
            assert s["segment_type"] == "large" and all(n > 1 << 20 for n in sizes)
    assert {s["segment_type"] for s in segs} == {"small", "large"}
    for t in keep:
        assert any(b["address"] == t.data_ptr() for b in live)
    # After frees and empty_cache: only segments holding live blocks remain.
    del keep[:2]
    torch.neuron.synchronize()
    torch.neuron.empty_cache()
    segs = [s for s in M.memory_snapshot() if s["device"] == 2]
    stats = torch.neuron.memory_stats(2)
    free, total = torch.neuron.mem_get_info(2)
    assert sum(s["total_size"] for s in segs) == stats["reserved_bytes.all.current"] == total - free
    assert sum(s["allocated_size"] for s in segs) == stats["allocated_bytes.all.current"]
    assert all(s["allocated_size"] > 0 for s in segs)
    live = [b["address"] for s in segs for b in s["blocks"] if b["state"] == "active_allocated"]
    assert len(live) == stats["allocation.all.current"] and {t.data_ptr() for t in keep} <= set(
        live
    )


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


# The error types torch.cuda raises: its TORCH_CHECKs (RuntimeError) on the
# strings, pybind's TypeError on a negative size_t.
@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"enabled": "yes"}, RuntimeError, "expected state"),
        ({"context": "bad"}, RuntimeError, "expected context"),
        ({"stacks": "cpp"}, RuntimeError, "expected stacks"),
        ({"skip_actions": ["allocs"]}, RuntimeError, "unknown action 'allocs'"),
        ({"max_entries": -1}, TypeError, "max_entries"),
    ],
)
def test_bad_arguments_raise(kwargs, error, match):
    M._record_memory_history(max_entries=100)
    t = torch.empty(10, device="neuron")
    with pytest.raises(error, match=match):
        M._record_memory_history(**kwargs)
    # Nothing changed: still recording, history kept.
    assert [e["action"] for e in M._snapshot()["device_traces"][0]][-1] == "alloc"
    M._record_memory_history(enabled=None)
    del t


def _events_of(ptr):
    torch.neuron.synchronize()
    return {e["action"]: e for e in M._snapshot()["device_traces"][0] if e.get("addr") == ptr}


def _free_here(box):
    """Frees the tensor in ``box`` (a list holding the only reference) here."""
    t = box.pop()
    ptr = t.data_ptr()
    del t
    return ptr


@pytest.mark.parametrize("context", [None, "state", "alloc", "all"])
def test_context_levels_as_torch_cuda(context):
    """context=None: no stacks; "state": live blocks only; "alloc": also alloc
    events (a free carries its allocation's stack); "all": frees their own."""
    M._record_memory_history(context=context, max_entries=1000)
    try:
        box = [_allocate_named_tensor()]
        block = [b for b in _blocks(M._snapshot()) if b["address"] == box[0].data_ptr()][0]
        ev = _events_of(_free_here(box))
    finally:
        M._record_memory_history(enabled=None)
    names = lambda frames: {f["name"] for f in frames}  # noqa: E731
    assert ("_allocate_named_tensor" in names(block["frames"])) == (context is not None)
    assert ("_allocate_named_tensor" in names(ev["alloc"]["frames"])) == (
        context in ("alloc", "all")
    )
    free_frames = names(ev["free_requested"]["frames"])
    assert ("_allocate_named_tensor" in free_frames) == (context == "alloc")
    assert ("_free_here" in free_frames) == (context == "all")


def test_clear_history_skip_actions_and_the_legacy_form():
    M._record_memory_history(max_entries=100, skip_actions=["free_requested", "snapshot"])
    try:
        ptr = _free_here([torch.empty(10, device="neuron")])
        assert set(_events_of(ptr)) == {"alloc", "free_completed"}
        M._record_memory_history(max_entries=100)  # enabling again keeps the history
        assert set(_events_of(ptr)) == {"alloc", "free_completed"}
        M._record_memory_history(max_entries=100, clear_history=True)
        assert M._snapshot()["device_traces"][0] == []
        # torch.cuda's legacy form (PyTorch 2.0's memory-snapshot blog post).
        M._record_memory_history(True, trace_alloc_max_entries=10, trace_alloc_record_context=True)
        ptr = _free_here([_allocate_named_tensor()])
        assert any(
            f["name"] == "_allocate_named_tensor" for f in _events_of(ptr)["alloc"]["frames"]
        )
    finally:
        M._record_memory_history(enabled=None)
    assert M._snapshot()["device_traces"][0] == []


def test_memory_snapshot_takes_torch_cuda_arguments():
    assert M.memory_snapshot(mempool_id=None, include_traces=False) == M.memory_snapshot()
    with pytest.raises(RuntimeError, match="memory pool"):
        M.memory_snapshot(mempool_id=(1, 2))
