"""The CPU fallback for operators without a native kernel: CPU-equal results,
in-place and out= variants (mutated inputs copied back), one warning per
operator, fallback_stats() with calls and seconds, reset, and strict mode
(TORCHNEURON_FALLBACK=error or torch.neuron.fallback_mode("error")) raising
NotImplementedError that names the operator.

The operator under test is the first of a few candidates that really falls
back (conftest.fallback_op), so the tests keep working as native kernels are
added."""

import json
import warnings

import pytest
import torch
from conftest import assert_device_works, run_python_many

N = torch.neuron


def _quiet(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn()


def _input(shape=(4, 5)):
    return torch.linspace(0.25, 3.0, shape[0] * shape[1]).reshape(shape)


def _entry(op):
    """The fallback_stats entry of torch function `op` (an aten name containing it)."""
    hits = {k: v for k, v in N.fallback_stats().items() if op in k}
    assert len(hits) == 1, N.fallback_stats()
    return next(iter(hits.items()))


def test_result_equals_cpu(fallback_op):
    fn = getattr(torch, fallback_op)
    x = _input()
    got = _quiet(lambda: fn(x.neuron()))
    assert got.device == torch.device("neuron", 0)
    torch.testing.assert_close(got.cpu(), fn(x))


def test_result_stays_on_the_inputs_core(fallback_op):
    fn = getattr(torch, fallback_op)
    x = _input()
    got = _quiet(lambda: fn(x.to("neuron:2")))
    assert got.device == torch.device("neuron", 2)
    torch.testing.assert_close(got.cpu(), fn(x))


def test_sees_results_of_queued_device_work(fallback_op):
    fn = getattr(torch, fallback_op)
    a = torch.randn(256, 256)
    d = a.neuron()
    y = (d @ d).abs() / 256 + 0.5  # queued; the fallback's copy to the host waits for it
    got = _quiet(lambda: fn(y))
    torch.testing.assert_close(got.cpu(), fn((a @ a).abs() / 256 + 0.5), rtol=1e-4, atol=1e-4)


def test_counted_with_calls_and_seconds_and_reset(fallback_op):
    fn = getattr(torch, fallback_op)
    x = _input().neuron()
    N.reset_fallback_stats()
    for _ in range(3):
        _quiet(lambda: fn(x))
    name, entry = _entry(fallback_op)
    assert name.startswith("aten::")
    assert entry["calls"] == 3
    assert isinstance(entry["seconds"], float) and 0 < entry["seconds"] < 10
    N.reset_fallback_stats()
    assert N.fallback_stats() == {}


def test_native_ops_are_not_counted():
    N.reset_fallback_stats()
    x = torch.randn(8, 8, device="neuron")
    y = torch.relu(x @ x + 1).sum(dim=0)
    y.cpu()
    assert N.fallback_stats() == {}


def test_in_place_variant_writes_back(fallback_op):
    x = _input()
    d = x.neuron()
    ret = _quiet(lambda: getattr(d, fallback_op + "_")())
    assert ret is d
    torch.testing.assert_close(d.cpu(), getattr(torch, fallback_op)(x))


def test_in_place_on_a_non_contiguous_view(fallback_op):
    x = _input((4, 6))
    d = x.neuron()
    view = d[:, ::2]
    _quiet(lambda: getattr(view, fallback_op + "_")())
    ref = x.clone()
    getattr(ref[:, ::2], fallback_op + "_")()
    torch.testing.assert_close(d.cpu(), ref)  # the other columns untouched


def test_out_variant_writes_the_given_tensor(fallback_op):
    fn = getattr(torch, fallback_op)
    x = _input()
    out = torch.full((4, 5), -1.0, device="neuron")
    ret = _quiet(lambda: fn(x.neuron(), out=out))
    assert ret is out
    torch.testing.assert_close(out.cpu(), fn(x))
    # a wrongly sized out= is resized, as on the CPU
    small = torch.empty(0, device="neuron")
    _quiet(lambda: fn(x.neuron(), out=small))
    assert small.shape == (4, 5)
    torch.testing.assert_close(small.cpu(), fn(x))


def test_multi_output_op_with_out_tuple():
    # sort/topk/kthvalue: whichever falls back; the out= tuple is written
    x = torch.randn(3, 7, generator=torch.Generator().manual_seed(0))
    d = x.neuron()
    N.reset_fallback_stats()
    values = torch.empty(0, device="neuron")
    indices = torch.empty(0, dtype=torch.int64, device="neuron")
    _quiet(lambda: torch.topk(d, 3, dim=1, out=(values, indices)))
    ref = torch.topk(x, 3, dim=1)
    assert torch.equal(values.cpu(), ref.values) and torch.equal(indices.cpu(), ref.indices)
    s = _quiet(lambda: torch.sort(d, dim=1, descending=True))
    ref = torch.sort(x, dim=1, descending=True)
    assert torch.equal(s.values.cpu(), ref.values) and torch.equal(s.indices.cpu(), ref.indices)
    if not N.fallback_stats():
        pytest.skip("topk and sort are native now")


def test_mixed_devices_are_rejected_by_the_fallback_too():
    x = torch.ones(4, device="neuron")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        _quiet(lambda: torch.logaddexp(x, torch.ones(4)))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        _quiet(lambda: torch.logaddexp(x, torch.ones(4, device="neuron:1")))
    assert torch.equal(x.cpu(), torch.ones(4))
    assert_device_works()


def test_fallback_mode_error_in_process(fallback_op):
    fn = getattr(torch, fallback_op)
    x = _input().neuron()
    N.reset_fallback_stats()
    with N.fallback_mode("error"):
        with pytest.raises(NotImplementedError, match=f"aten::{fallback_op}.*TORCHNEURON_FALLBACK"):
            fn(x)
        # native operators still run
        assert (x * 2).cpu().shape == (4, 5)
    assert N.fallback_stats() == {}  # refused calls are not counted
    torch.testing.assert_close(_quiet(lambda: fn(x)).cpu(), fn(x.cpu()))
    with pytest.raises(RuntimeError, match="'warn' or 'error'"):
        with N.fallback_mode("loud"):
            pass


_CHILD = """
import json, warnings, torch
N = torch.neuron
op = {op!r}
fn = getattr(torch, op)
x = torch.linspace(0.25, 3.0, 8, device="neuron")
out = {{}}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        for _ in range(3):
            fn(x)
        fn(x * 2)
        getattr(torch, "logaddexp")(x, x)   # a second fallback operator, if it is one
        out["ran"] = True
    except NotImplementedError as e:
        out["error"] = str(e)
out["warnings"] = [str(w.message) for w in caught if "runs on the CPU" in str(w.message)]
out["stats"] = {{k: v["calls"] for k, v in N.fallback_stats().items()}}
out["works"] = (torch.arange(3.0, device="neuron") + 1).cpu().tolist()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def children(fallback_op):
    code = _CHILD.format(op=fallback_op)
    procs = run_python_many(
        {
            "warn": (code, {"TORCHNEURON_WARN_PER_OP": "1"}),
            "error": (code, {"TORCHNEURON_FALLBACK": "error"}),
        }
    )
    out = {}
    for key, proc in procs.items():
        assert proc.returncode == 0, proc.stderr
        out[key] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def test_warned_once_per_operator(children, fallback_op):
    r = children["warn"]
    assert r["ran"]
    mine = [w for w in r["warnings"] if f"aten::{fallback_op}" in w]
    assert len(mine) == 1, r["warnings"]  # 4 calls, one warning
    assert "fallback_stats" in mine[0]
    # every operator that fell back warned exactly once
    assert len(r["warnings"]) == len(r["stats"])
    assert sum(v for k, v in r["stats"].items() if fallback_op in k) == 4


def test_strict_mode_from_the_environment(children, fallback_op):
    r = children["error"]
    assert "ran" not in r
    assert f"aten::{fallback_op}" in r["error"]
    assert "TORCHNEURON_FALLBACK=error" in r["error"]
    assert r["warnings"] == [] and r["stats"] == {}
    assert r["works"] == [1.0, 2.0, 3.0]
