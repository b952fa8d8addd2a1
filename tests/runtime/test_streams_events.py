"""Streams and events: work is asynchronous (launches return before the work
is done), streams are in-order queues, events record/wait/query/synchronize
and time, ``torch.neuron.stream`` switches the current stream, and
``NEURON_LAUNCH_BLOCKING=1`` makes every launch synchronous.

Timing assertions are only the generous ones asynchrony needs: the queued
work below takes hundreds of milliseconds, the host needs microseconds."""

import json
import time

import pytest
import torch
from conftest import run_python_many

N = torch.neuron


def _operand(device="neuron"):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(1024, 1024, generator=g) / 32
    return a, a.to(device)


def _chain(a, n=8):
    """n dependent 1024x1024 matmuls: about 17 GFLOP, far more than a launch."""
    b = a
    for _ in range(n):
        b = b @ a
    return b


def test_launch_returns_before_the_work_is_done():
    a, d = _operand()
    N.synchronize()
    t0 = time.perf_counter()
    out = _chain(d)
    launched = time.perf_counter() - t0
    stream = N.current_stream()
    assert not stream.query(), "the work had finished when the launches returned"
    N.synchronize()
    total = time.perf_counter() - t0
    assert stream.query()
    assert launched < total
    torch.testing.assert_close(out.cpu(), _chain(a), rtol=1e-3, atol=1e-4)


def test_stream_synchronize_and_query():
    a, d = _operand()
    s = N.current_stream()
    assert s == N.default_stream() and s.stream_id == 0
    out = _chain(d, 4)
    s.synchronize()
    assert s.query()
    torch.testing.assert_close(out.cpu(), _chain(a, 4), rtol=1e-3, atol=1e-4)


def test_events_record_query_synchronize_and_time():
    a, d = _operand()
    start, end = N.Event(enable_timing=True), N.Event(enable_timing=True)
    assert end.query()  # never recorded: nothing to wait for, as CUDA
    N.synchronize()
    t0 = time.perf_counter()
    start.record()
    out = _chain(d)
    end.record()
    assert not end.query()
    end.synchronize()
    wall_ms = (time.perf_counter() - t0) * 1000
    assert end.query() and start.query()
    ms = start.elapsed_time(end)
    assert 0 < ms <= wall_ms + 50
    torch.testing.assert_close(out.cpu(), _chain(a), rtol=1e-3, atol=1e-4)


def test_event_timing_needs_enable_timing():
    x, y = N.Event(), N.Event()
    x.record()
    y.record()
    y.synchronize()
    with pytest.raises(ValueError, match="enable_timing"):
        x.elapsed_time(y)


def test_generic_torch_stream_and_event_apis():
    s = torch.Stream(device="neuron")
    assert s.device == torch.device("neuron", 0) and s.stream_id != 0
    e1 = torch.Event(device="neuron", enable_timing=True)
    e2 = torch.Event(device="neuron", enable_timing=True)
    a, d = _operand()
    e1.record(s)
    with s:  # torch.Stream as a context manager sets the current stream
        assert torch.accelerator.current_stream() == s
        out = d @ d
    assert torch.accelerator.current_stream().stream_id == 0
    e2.record(s)
    e2.synchronize()
    assert e1.elapsed_time(e2) >= 0
    torch.testing.assert_close(out.cpu(), a @ a, rtol=1e-4, atol=1e-4)


def test_new_streams_and_priorities():
    s = N.Stream()
    assert s.device == torch.device("neuron", 0) and s.stream_id != 0
    hi = N.Stream(priority=-1)
    assert hi.stream_id != s.stream_id and hi.stream_id != 0
    s1 = N.Stream(device=1)
    assert s1.device == torch.device("neuron", 1)
    assert "neuron:1" in repr(s1)


def test_stream_context_manager():
    a, d = _operand()
    s = N.Stream()
    N.synchronize()
    with N.stream(s):
        assert N.current_stream() == s
        out = _chain(d)
        # The work went to s, not to the default stream.
        assert not s.query()
        assert N.default_stream().query()
    assert N.current_stream() == N.default_stream()
    s.synchronize()
    torch.testing.assert_close(out.cpu(), _chain(a), rtol=1e-3, atol=1e-4)
    with N.stream(None):  # no-op, as torch.cuda.stream(None)
        assert N.current_stream() == N.default_stream()


def test_stream_context_manager_on_another_core_restores_device_and_streams():
    s1 = N.Stream(device=1)
    with N.stream(s1):
        assert N.current_device() == 1  # as torch.cuda.stream
        assert N.current_stream() == s1
        y = torch.arange(3.0, device="neuron") + 1
    assert y.device.index == 1
    assert N.current_device() == 0
    assert N.current_stream(0).stream_id == 0 and N.current_stream(1).stream_id == 0
    s1.synchronize()
    assert y.cpu().tolist() == [1.0, 2.0, 3.0]


def test_wait_stream_orders_a_consumer_after_a_producer():
    a, d = _operand()
    producer = N.Stream()
    N.synchronize()
    with N.stream(producer):
        out = _chain(d)
        # cheap final step the consumer depends on
        total = out.sum(dim=0)
    consumer = N.current_stream()
    consumer.wait_stream(producer)
    result = total * 2  # queued on the default stream, after the wait
    assert not consumer.query()  # it waits for the producer's long chain
    ref = _chain(a).sum(dim=0) * 2
    torch.testing.assert_close(result.cpu(), ref, rtol=1e-3, atol=1e-3)


def test_wait_event_orders_across_streams_and_cores():
    a, d = _operand("neuron:1")
    s1 = N.Stream(device=1)
    with N.stream(s1):
        out = _chain(d, 4)
        done = N.Event()
        done.record(s1)
    # A stream of core 0 waits for an event of core 1.
    s0 = N.current_stream(0)
    s0.wait_event(done)
    marker = N.Event()
    marker.record(s0)
    marker.synchronize()
    assert done.query()  # the wait could only pass once core 1 got there
    torch.testing.assert_close(out.cpu(), _chain(a, 4), rtol=1e-3, atol=1e-4)


def test_synchronize_covers_every_stream_of_the_device():
    a, d = _operand()
    streams = [N.Stream() for _ in range(3)]
    outs = []
    for s in streams:
        with N.stream(s):
            outs.append(_chain(d, 2))
    N.synchronize()
    assert all(s.query() for s in streams)
    ref = _chain(a, 2)
    for o in outs:
        torch.testing.assert_close(o.cpu(), ref, rtol=1e-3, atol=1e-4)


def test_accelerator_synchronize():
    a, d = _operand()
    out = _chain(d, 4)
    torch.accelerator.synchronize()
    assert N.current_stream().query()
    torch.testing.assert_close(out.cpu(), _chain(a, 4), rtol=1e-3, atol=1e-4)


_BLOCKING = """
import json, torch
N = torch.neuron
a = torch.randn(1024, 1024, device="neuron") / 32
b = a
for _ in range(4):
    b = b @ a
idle = N.current_stream().query()  # each launch waited for its kernel
print(json.dumps({"blocking": N.runtime_info()["launch_blocking"], "idle": idle}))
"""

# Host waits that PyTorch makes while holding the GIL (storage copies in
# torch.save, empty_cache) must not deadlock with a stream worker that drops
# the last C++ reference of a storage with a Python object (which takes the GIL).
_GIL = """
import io, torch
for step in ("save", "storage copy", "empty_cache"):
    x = torch.randn(1500, 1500, device="neuron")
    torch.neuron.synchronize()
    st = x.untyped_storage()   # the storage gets a Python object
    y = x @ x                  # the queued kernel holds the storage...
    del x                      # ...and is its only C++ owner now
    if step == "save":
        torch.save(y, io.BytesIO())
    elif step == "storage copy":
        torch.UntypedStorage(16).copy_(y.untyped_storage()[:16])
    else:
        torch.neuron.empty_cache()
    print(step, "ok", flush=True)
"""


@pytest.fixture(scope="module")
def children():
    return run_python_many(
        {"blocking": (_BLOCKING, {"NEURON_LAUNCH_BLOCKING": "1"}), "gil": (_GIL, {})}, timeout=90
    )


def test_launch_blocking_makes_every_launch_synchronous(children):
    proc = children["blocking"]
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1]) == {"blocking": True, "idle": True}


def test_host_waits_release_the_gil(children):
    proc = children["gil"]
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["save", "ok", "storage", "copy", "ok", "empty_cache", "ok"]


def test_stream_priority_and_record_stream():
    # As torch.cuda.Stream: priority as created; record_stream accepted (the
    # emulator's kernels keep their tensors alive, so it has nothing to do).
    high, normal = torch.neuron.Stream(priority=-1), torch.neuron.Stream()
    assert (high.priority, normal.priority, torch.neuron.default_stream().priority) == (-1, 0, 0)
    x = torch.arange(4.0, device="neuron")
    high.wait_stream(torch.neuron.current_stream())  # x is written on the default stream
    with torch.neuron.stream(high):
        y = x * 2
    y.record_stream(high)
    high.synchronize()
    assert y.cpu().tolist() == [0.0, 2.0, 4.0, 6.0]
