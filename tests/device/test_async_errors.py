"""Errors of kernels that already left the host (an index out of range found
while the kernel runs): reported as a RuntimeError naming the kernel, either
at the call or at the next sync point of that stream or device, once; later
work still runs and the device stays usable. With NEURON_LAUNCH_BLOCKING=1
the error is raised by the call itself."""

import json

import pytest
import torch
from conftest import assert_device_works

N = torch.neuron
OUT_OF_RANGE = (
    r"neuron kernel 'aten::\w+' failed on device \d stream \d+: .*out of .*(range|bounds)"
)


def _weights():
    return torch.randn(10, 4, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("sync", ["cpu", "item", "synchronize", "stream", "event"])
def test_embedding_index_out_of_range_reported_at_a_sync_point(sync):
    w = _weights().neuron()
    idx = torch.tensor([1, 12, 3], device="neuron")  # 12 >= 10 rows
    with pytest.raises(RuntimeError, match=OUT_OF_RANGE) as info:
        out = torch.nn.functional.embedding(idx, w)  # may raise here already
        s = out.sum()
        if sync == "cpu":
            s.cpu()
        elif sync == "item":
            s.item()
        elif sync == "synchronize":
            N.synchronize()
        elif sync == "stream":
            N.current_stream().synchronize()
        else:
            e = N.Event()
            e.record()
            e.synchronize()
            N.current_stream().synchronize()
    assert "Exception raised from" not in str(info.value)  # no C++ backtrace in the message
    N.synchronize()  # reported once: nothing left
    assert_device_works()


def test_index_select_and_gather_out_of_range():
    src = torch.arange(12.0).reshape(3, 4).neuron()
    with pytest.raises(RuntimeError, match=OUT_OF_RANGE):
        torch.index_select(src, 0, torch.tensor([0, 3], device="neuron")).cpu()
    with pytest.raises(RuntimeError, match=OUT_OF_RANGE):
        torch.gather(src, 1, torch.tensor([[0], [4], [1]], device="neuron")).cpu()
    with pytest.raises(RuntimeError, match=OUT_OF_RANGE):
        torch.index_select(src, 1, torch.tensor([-7], device="neuron")).cpu()
    assert torch.equal(src.cpu(), torch.arange(12.0).reshape(3, 4))
    assert_device_works()


def test_later_work_still_runs_and_is_correct():
    w = _weights()
    d = w.neuron()
    bad_idx = torch.tensor([99], device="neuron")
    good_idx = torch.tensor([2, 5], device="neuron")  # (a host copy is a sync point)
    bad = torch.nn.functional.embedding(bad_idx, d)
    good = torch.nn.functional.embedding(good_idx, d) * 2
    with pytest.raises(RuntimeError, match=OUT_OF_RANGE):
        N.synchronize()
    # the kernels queued after the failing one ran
    assert torch.equal(good.cpu(), w[[2, 5]] * 2)
    del bad


def test_error_belongs_to_its_stream():
    s = N.Stream()
    src = torch.arange(4.0, device="neuron")
    N.synchronize()
    with N.stream(s):
        torch.index_select(src, 0, torch.tensor([9], device="neuron"))
    # the default stream's sync point does not see s's error...
    assert (src + 1).cpu().tolist() == [1.0, 2.0, 3.0, 4.0]
    # ...s's own does, and so does a device-wide synchronize (once)
    with pytest.raises(RuntimeError, match=OUT_OF_RANGE):
        s.synchronize()
    s.synchronize()
    with N.stream(s):
        torch.index_select(src, 0, torch.tensor([9], device="neuron"))
    with pytest.raises(RuntimeError, match=OUT_OF_RANGE):
        N.synchronize()
    assert_device_works()


def test_error_on_another_core_leaves_the_others_alone():
    src = torch.arange(4.0, device="neuron:1")
    torch.index_select(src, 0, torch.tensor([4], device="neuron:1"))
    assert_device_works("neuron:0")
    with pytest.raises(RuntimeError, match=r"failed on device 1"):
        N.synchronize(1)
    assert_device_works("neuron:1")


_BLOCKING = """
import json, torch
out = {}
w = torch.randn(10, 4, device="neuron")
try:
    torch.nn.functional.embedding(torch.tensor([1, 12], device="neuron"), w)
    out["raised_at_call"] = False
except RuntimeError as e:
    out["raised_at_call"] = True
    out["message"] = str(e)
torch.neuron.synchronize()  # nothing left over
out["works"] = (torch.arange(3.0, device="neuron") * 2).cpu().tolist()
print(json.dumps(out))
"""


def test_launch_blocking_raises_at_the_call(run_py):
    r = json.loads(run_py(_BLOCKING, env={"NEURON_LAUNCH_BLOCKING": "1"}).stdout.splitlines()[-1])
    assert r["raised_at_call"]
    assert "aten::index_select" in r["message"] and "out of range" in r["message"]
    assert "NEURON_LAUNCH_BLOCKING" not in r["message"]  # it is raised at its call
    assert r["works"] == [0.0, 2.0, 4.0]


def _negative_one_hot():
    # one_hot leaves the range check to scatter_'s kernel on devices (as on CUDA)
    return torch.nn.functional.one_hot(torch.tensor([0, -1, 2], device="neuron"), 5)


@pytest.mark.parametrize(
    "not_a_sync_point",
    [
        "manual_seed",
        "neuron_manual_seed",
        "get_rng_state",
        "set_rng_state",
        "seed",
        "storage_growth",
    ],
)
def test_error_waits_for_a_sync_point_not_an_unrelated_call(not_a_sync_point):
    # Issue 23: torch.manual_seed(0) after F.one_hot of a negative class raised
    # "neuron kernel 'aten::scatter_.value' failed".
    bad = _negative_one_hot()
    if not_a_sync_point == "manual_seed":
        torch.manual_seed(0)
    elif not_a_sync_point == "neuron_manual_seed":
        N.manual_seed_all(0)
    elif not_a_sync_point == "get_rng_state":
        N.get_rng_state()
    elif not_a_sync_point == "set_rng_state":
        N.set_rng_state(torch.get_rng_state())
    elif not_a_sync_point == "seed":
        N.seed()
    else:
        t = torch.ones(4, device="neuron")
        t.resize_(1000)  # the storage grows with a device copy
    with pytest.raises(
        RuntimeError, match=r"aten::scatter_.value' failed.*NEURON_LAUNCH_BLOCKING=1"
    ):
        bad.cpu()
    N.synchronize()  # reported once
    assert_device_works()
