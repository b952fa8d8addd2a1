"""HBM statistics with torch.cuda's meanings: exact allocated bytes, peaks,
reserved (cached) memory, empty_cache, memory_stats keys, memory_summary,
the same figures through torch.accelerator, and out-of-memory past the
per-core capacity (TORCHNEURON_HBM_GIB, in a child process)."""

import json
import signal

import pytest
import torch
from conftest import assert_device_works

N = torch.neuron
MiB = 2**20
DEV = 3  # a core the other tests use little


def _round(nbytes):  # the allocator's granularity, as CUDA's: 512 bytes
    return (nbytes + 511) // 512 * 512


def _settled():
    N.synchronize(DEV)  # queued kernels hold their tensors until they ran
    return N.memory_allocated(DEV)


@pytest.mark.parametrize(
    "shape,dtype",
    [
        ((1000,), torch.float32),
        ((256, 1024), torch.float32),
        ((4 * MiB,), torch.uint8),
        ((7, 3), torch.float64),
        ((1,), torch.bool),
    ],
)
def test_memory_allocated_is_exact(shape, dtype):
    base = _settled()
    t = torch.empty(shape, dtype=dtype, device=f"neuron:{DEV}")
    nbytes = t.numel() * t.element_size()
    assert N.memory_allocated(DEV) - base == _round(nbytes)
    stats = N.memory_stats(DEV)
    assert stats["allocated_bytes.all.current"] == N.memory_allocated(DEV)
    del t
    assert _settled() == base


def test_requested_bytes_are_unrounded():
    _settled()
    before = N.memory_stats(DEV)["requested_bytes.all.current"]
    t = torch.empty(1000, dtype=torch.float32, device=f"neuron:{DEV}")
    assert N.memory_stats(DEV)["requested_bytes.all.current"] - before == 4000
    del t


def test_results_of_kernels_are_counted_and_freed():
    base = _settled()
    a = torch.ones(1024, 1024, device=f"neuron:{DEV}")
    b = a * 2 + 1  # one temporary (a * 2) freed after the kernels ran
    assert _settled() - base == 2 * 4 * MiB
    assert b[0, 0].item() == 3.0
    del a, b
    assert _settled() == base


def test_peak_and_reset_peak_memory_stats():
    base = _settled()
    N.reset_peak_memory_stats(DEV)
    assert N.max_memory_allocated(DEV) == base
    big = torch.empty(8 * MiB, dtype=torch.uint8, device=f"neuron:{DEV}")
    del big
    assert _settled() == base
    assert N.max_memory_allocated(DEV) == base + 8 * MiB
    assert N.memory_stats(DEV)["allocated_bytes.all.peak"] == base + 8 * MiB
    assert N.max_memory_reserved(DEV) >= base + 8 * MiB
    N.reset_peak_memory_stats(DEV)
    assert N.max_memory_allocated(DEV) == base
    assert N.max_memory_reserved(DEV) == N.memory_reserved(DEV)


def test_reserved_caches_freed_memory_and_empty_cache_releases_it():
    base = _settled()
    t = torch.empty(16 * MiB, dtype=torch.uint8, device=f"neuron:{DEV}")
    assert N.memory_reserved(DEV) >= N.memory_allocated(DEV) >= base + 16 * MiB
    del t
    _settled()
    cached = N.memory_reserved(DEV)
    assert cached >= base + 16 * MiB  # kept for reuse, as CUDA's caching allocator
    N.empty_cache()
    assert N.memory_reserved(DEV) <= cached - 16 * MiB
    assert N.memory_reserved(DEV) >= N.memory_allocated(DEV) == base
    free, total = N.mem_get_info(DEV)
    assert total == N.get_device_properties(DEV).total_memory
    assert free == total - N.memory_reserved(DEV)


def test_cached_blocks_are_reused():
    _settled()
    t = torch.empty(4 * MiB, dtype=torch.uint8, device=f"neuron:{DEV}")
    del t
    _settled()
    allocs = N.memory_stats(DEV)["num_device_alloc"]
    reserved = N.memory_reserved(DEV)
    t = torch.empty(4 * MiB, dtype=torch.uint8, device=f"neuron:{DEV}")
    assert N.memory_stats(DEV)["num_device_alloc"] == allocs
    assert N.memory_reserved(DEV) == reserved
    del t


CUDA_KEYS = [
    f"{stat}.{pool}.{field}"
    for stat in (
        "allocation",
        "segment",
        "active",
        "inactive_split",
        "allocated_bytes",
        "reserved_bytes",
        "active_bytes",
        "inactive_split_bytes",
        "requested_bytes",
    )
    for pool in ("all", "small_pool", "large_pool")
    for field in ("current", "peak", "allocated", "freed")
] + ["num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free"]


def test_memory_stats_has_torch_cuda_keys():
    stats = N.memory_stats(DEV)
    missing = [k for k in CUDA_KEYS if k not in stats]
    assert not missing
    assert all(isinstance(stats[k], int) for k in CUDA_KEYS)


def test_small_and_large_pools():
    _settled()
    s0 = N.memory_stats(DEV)
    small = torch.empty(4096, dtype=torch.uint8, device=f"neuron:{DEV}")
    large = torch.empty(4 * MiB, dtype=torch.uint8, device=f"neuron:{DEV}")
    s1 = N.memory_stats(DEV)
    d = {
        k: s1[k] - s0[k]
        for k in (
            "allocated_bytes.small_pool.current",
            "allocated_bytes.large_pool.current",
            "allocation.all.current",
            "active.all.current",
        )
    }
    assert d == {
        "allocated_bytes.small_pool.current": 4096,
        "allocated_bytes.large_pool.current": 4 * MiB,
        "allocation.all.current": 2,
        "active.all.current": 2,
    }
    del small, large


def test_memory_summary():
    t = torch.empty(MiB, dtype=torch.uint8, device=f"neuron:{DEV}")
    text = N.memory_summary(DEV)
    assert f"neuron:{DEV} memory summary" in text
    for row in (
        "Allocated memory",
        "Reserved memory",
        "Active memory",
        "Allocations",
        "from large pool",
        "from small pool",
        "OOMs",
    ):
        assert row in text
    assert "capacity 24.00 GiB" in text
    assert "from large pool" not in N.memory_summary(DEV, abbreviated=True)
    del t


def test_torch_accelerator_reports_the_same_figures():
    t = torch.empty(2 * MiB, dtype=torch.uint8, device=f"neuron:{DEV}")
    _settled()
    assert torch.accelerator.memory_allocated(DEV) == N.memory_allocated(DEV)
    assert torch.accelerator.max_memory_allocated(DEV) == N.max_memory_allocated(DEV)
    assert torch.accelerator.memory_reserved(DEV) == N.memory_reserved(DEV)
    assert torch.accelerator.max_memory_reserved(DEV) == N.max_memory_reserved(DEV)
    assert torch.accelerator.memory_stats(DEV) == N.memory_stats(DEV)
    assert torch.accelerator.get_memory_info(DEV) == N.mem_get_info(DEV)
    # device given as a string or torch.device, and the current device by default
    assert N.memory_allocated(f"neuron:{DEV}") == N.memory_allocated(torch.device("neuron", DEV))
    with N.device(DEV):
        assert (
            N.memory_allocated() == torch.accelerator.memory_allocated() == N.memory_allocated(DEV)
        )
    del t


def test_per_core_accounting():
    for d in range(N.device_count()):
        N.synchronize(d)
    before = [N.memory_allocated(d) for d in range(4)]
    t = torch.empty(MiB, dtype=torch.uint8, device="neuron:2")
    after = [N.memory_allocated(d) for d in range(4)]
    assert [a - b for a, b in zip(after, before)] == [0, 0, MiB, 0]
    del t


_OOM = """
import json, torch
N = torch.neuron
MiB = 2**20
out = {"capacity": N.get_device_properties(0).total_memory}
a = torch.empty(100 * MiB, dtype=torch.uint8, device="neuron")
try:
    torch.empty(300 * MiB, dtype=torch.uint8, device="neuron")
except torch.OutOfMemoryError as e:
    out["message"] = str(e)
    out["is_runtime_error"] = isinstance(e, RuntimeError)
out["allocated_after"] = N.memory_allocated()
out["num_ooms"] = N.memory_stats()["num_ooms"]
# An operator whose result does not fit: raised at the call, inputs intact.
b = a.view(torch.float32)
b.fill_(1.5)
c = b + 1                                  # 200 MiB in use
try:
    b * 2                                  # 300 MiB > 256 MiB
except torch.OutOfMemoryError as e:
    out["op_message"] = str(e)
out["inputs_intact"] = b[0].item() == 1.5 and c[-1].item() == 2.5
# Freed blocks stay cached: a larger request releases the cache and retries.
del c
N.synchronize()
reserved = N.memory_reserved()
d = torch.empty(150 * MiB, dtype=torch.uint8, device="neuron")
out["reserved_before_retry"] = reserved
out["retries"] = N.memory_stats()["num_alloc_retries"]
del d
# The device keeps working, and each core has its own capacity.
out["works"] = (torch.arange(4.0, device="neuron") * 2).cpu().tolist()
e = torch.empty(200 * MiB, dtype=torch.uint8, device="neuron:1")
out["core1"] = N.memory_allocated(1)
out["protected"] = N.runtime_info()["protect_memory"]
print(json.dumps(out), flush=True)
# TORCHNEURON_PROTECT_MEMORY=1: a host read of device memory outside kernels
# and copies crashes at once (the point of the mode: such reads are bugs).
import ctypes
N.synchronize(1)
ctypes.c_uint8.from_address(e.data_ptr()).value
print("the host read device memory")
"""


def test_out_of_memory_past_capacity_and_protected_memory(run_py):
    proc = run_py(
        _OOM, env={"TORCHNEURON_HBM_GIB": "0.25", "TORCHNEURON_PROTECT_MEMORY": "1"}, check=False
    )
    assert proc.returncode == -signal.SIGSEGV, proc.stdout + proc.stderr
    assert "the host read device memory" not in proc.stdout
    r = json.loads(proc.stdout.splitlines()[0])
    assert r["protected"]
    assert r["capacity"] == 256 * MiB
    msg = r["message"]
    assert r["is_runtime_error"]
    assert "out of memory" in msg
    assert "300.00 MiB" in msg  # requested
    assert "100.00 MiB allocated" in msg  # allocated
    assert "capacity 256.00 MiB" in msg  # capacity
    assert "TORCHNEURON_HBM_GIB" in msg  # how to change it
    assert r["allocated_after"] == 100 * MiB
    assert r["num_ooms"] == 1
    assert "out of memory" in r["op_message"] and "200.00 MiB allocated" in r["op_message"]
    assert r["inputs_intact"]
    assert r["reserved_before_retry"] >= 200 * MiB
    assert r["retries"] >= 1
    assert r["works"] == [0.0, 2.0, 4.0, 6.0]
    assert r["core1"] == 200 * MiB


def test_device_usable_after_stats_calls():
    N.reset_accumulated_memory_stats(DEV)
    s = N.memory_stats(DEV)
    assert s["allocated_bytes.all.freed"] == 0 and s["num_ooms"] == 0
    assert_device_works(f"neuron:{DEV}")


_FRACTION = r"""
import torch, torchneuron
N = torch.neuron
cap = N.get_device_properties(2).total_memory  # 1 GiB (TORCHNEURON_HBM_GIB=1)
N.set_per_process_memory_fraction(0.25, 2)
assert N.get_per_process_memory_fraction(2) == 0.25
a = torch.empty(cap // 8, dtype=torch.uint8, device="neuron:2")  # within a quarter
try:
    torch.empty(cap // 4, dtype=torch.uint8, device="neuron:2")  # past it
    print("NO-OOM")
except torch.neuron.OutOfMemoryError as e:
    print("OOM", "set_per_process_memory_fraction" in str(e))
b = torch.empty(cap // 2, dtype=torch.uint8, device="neuron:1")  # other cores unlimited
del a
N.set_per_process_memory_fraction(1.0, 2)
c = torch.empty(cap // 2, dtype=torch.uint8, device="neuron:2")  # raised again: fits
print("OK", N.mem_get_info(2)[1] == cap)
"""


def test_per_process_memory_fraction_enforced():
    from conftest import run_python

    out = run_python(_FRACTION, env={"TORCHNEURON_HBM_GIB": "1"}).stdout
    assert "OOM True" in out and "OK True" in out, out


def test_per_process_memory_fraction_bad_input():
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError, match="Invalid fraction value"):
            N.set_per_process_memory_fraction(bad, DEV)
    with pytest.raises(TypeError, match="float"):
        N.set_per_process_memory_fraction(1, DEV)
    assert N.get_per_process_memory_fraction(DEV) == 1.0  # unchanged by the bad calls
    assert_device_works()


def test_cuda_module_gaps():
    assert N.OutOfMemoryError is torch.OutOfMemoryError
    assert N.is_initialized() and N.get_arch_list() == ["trn2"]
    assert N.get_device_capability(0) == (3, 0)  # Trainium2: NeuronCore-v3
    N.ipc_collect()
    x = torch.ones(1 << 20, device=f"neuron:{DEV}")
    N.synchronize(DEV)
    N.reset_peak_memory_stats(DEV)
    peak_before = N.max_memory_allocated(DEV)
    del x
    N.synchronize(DEV)
    N.reset_max_memory_allocated(DEV)
    assert N.max_memory_allocated(DEV) == N.memory_allocated(DEV) < peak_before
    # device_of: the tensor's core is current inside the block, restored after
    prev = N.current_device()
    with N.device_of(torch.ones(1, device="neuron:1")):
        assert N.current_device() == 1
    with N.device_of(torch.ones(1)):  # a CPU tensor changes nothing
        assert N.current_device() == prev
    assert N.current_device() == prev
    # StreamContext: the stream is current inside, the previous one after
    s = N.Stream(DEV)
    before = N.current_stream(DEV)
    with N.StreamContext(s):
        assert N.current_stream(DEV) == s
    assert N.current_stream(DEV) == before
    with N.StreamContext(None):
        assert N.current_stream(DEV) == before


def test_utilization_reflects_kernel_time():
    N.synchronize(DEV)
    N.utilization(DEV)  # start a sampling period
    import time

    time.sleep(0.3)
    idle = N.utilization(DEV)
    a = torch.randn(512, 512, device=f"neuron:{DEV}")
    for _ in range(60):
        a = (a @ a).tanh()
    N.synchronize(DEV)
    busy = N.utilization(DEV)
    assert 0 <= idle <= 5 and idle < busy <= 100, (idle, busy)


def test_kernels_queued_with_freed_tensors_do_not_exhaust_memory(run_py):
    # each temporary is freed by Python one iteration later, but the queued kernels that
    # use it keep it until they run: an allocation that fails waits for the device's
    # queued work and tries again (CUDA reuses a freed block in stream order at once)
    code = """
import json, torch, torchneuron
def prog(dev):
    x = torch.randn(1024, 1024, generator=torch.Generator().manual_seed(0)).to(dev)  # 4 MiB
    for i in range(200):
        y = x * 1.0001
        x = y.tanh()
    return x.cpu()
got, ref = prog("neuron"), prog("cpu")
s = torch.neuron.memory_stats()
print(json.dumps({"diff": (got - ref).abs().max().item(), "ooms": s["num_ooms"],
                  "retries": s["num_alloc_retries"]}))
"""
    for env in ({}, {"TORCH_NEURONX_ENABLE_CONCATENATION": "1"}):
        proc = run_py(code, env={"TORCHNEURON_HBM_GIB": "0.0625", **env})
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        assert r["diff"] <= 1e-5 and r["ooms"] == 0, r
