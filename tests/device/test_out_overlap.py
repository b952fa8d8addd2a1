"""out= (and in-place) arguments that share memory with an input behave as on
the CPU: the ops that refuse it raise the CPU's RuntimeError at the call and
leave their inputs intact; the ops that allow it compute the CPU's values
(issue 23). Native kernels and the CPU fallback alike; int64 too, which the
64-bit policy would narrow (a narrowed out= computed its functional form and
skipped the overlap check: masked_select)."""

import warnings

import pytest
import torch
from conftest import assert_device_works


def _x(device, dtype=torch.float32):
    return torch.arange(10.0).reshape(2, 5).to(device, dtype)


def _long(t, device):
    return torch.tensor(t, dtype=torch.long, device=device)


CASES = {
    "take": lambda x, d: torch.take(x, _long([0, 1, 2], d), out=x),
    "take_same_shape": lambda x, d: torch.take(x, _long([[1, 0, 2, 3, 4]] * 2, d), out=x),
    "gather": lambda x, d: torch.gather(x, 0, torch.zeros(2, 5, dtype=torch.long, device=d), out=x),
    "kthvalue": lambda x, d: torch.kthvalue(
        x, 2, out=(x, torch.empty(0, dtype=torch.long, device=d))
    ),
    "kthvalue_keepdim_view": lambda x, d: torch.kthvalue(
        x, 2, keepdim=True, out=(x[:, :1], torch.empty(0, dtype=torch.long, device=d))
    ),
    "masked_select": lambda x, d: torch.masked_select(
        x, torch.ones(2, 5, dtype=torch.bool, device=d), out=x
    ),
    "masked_select_view": lambda x, d: torch.masked_select(
        x[:, :2], torch.ones(2, 2, dtype=torch.bool, device=d), out=x[1]
    ),
    "pow_shifted_view": lambda x, d: torch.pow(x[:, :4], 2, out=x[:, 1:]),
    "pow_same": lambda x, d: torch.pow(x, 2, out=x),
    "add_same": lambda x, d: torch.add(x, 1, out=x),
    "mul_internal_overlap": lambda x, d: torch.mul(x, 2, out=x[:1].expand(2, 5)),
    "index_select_view": lambda x, d: torch.index_select(x, 1, _long([0, 1], d), out=x[:, :2]),
    "cumsum_same": lambda x, d: torch.cumsum(x, 1, out=x),
    "scatter_self_src": lambda x, d: x.scatter_(
        0, torch.zeros(1, 5, dtype=torch.long, device=d), x
    ),
    "index_put_self": lambda x, d: x.index_put_((_long([0], d),), x[1]),
}


def _run(fn, device, dtype):
    x = _x(device, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fn(x, device)
            if device != "cpu":
                torch.neuron.synchronize()
            return None, x.cpu()
        except RuntimeError as e:
            return str(e).splitlines()[0], x.cpu()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
@pytest.mark.parametrize("name", sorted(CASES))
def test_out_sharing_memory_with_an_input_behaves_as_on_cpu(name, dtype):
    ref_err, ref = _run(CASES[name], "cpu", dtype)
    err, got = _run(CASES[name], "neuron", dtype)
    assert (err is None) == (ref_err is None), (err, ref_err)
    if ref_err is not None:
        assert "neuron kernel" not in err  # at the call, not from a queued kernel
        assert err == ref_err
    torch.testing.assert_close(got, ref)  # intact when it raised
    assert_device_works()


def test_the_same_geometry_without_sharing_still_computes():
    # The geometry cache keys which tensors share memory: a call that raised
    # for out=x leaves the same shapes with separate memory computing.
    x = _x("neuron")
    idx = _long([0, 1, 2], "neuron")
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        torch.take(x, idx, out=x)
    out = torch.empty(2, 5, device="neuron")
    torch.take(x, idx, out=out)
    assert torch.equal(out.cpu(), torch.tensor([0.0, 1.0, 2.0]))
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        torch.take(x, idx, out=x)


def test_out_that_must_grow_and_overlaps_raises_at_the_call():
    # The CPU grows x, then raises its overlap error; device memory cannot grow
    # under a running kernel, so the call raises (at once, not from the queue).
    x = _x("neuron")
    with pytest.raises(RuntimeError) as info:
        torch.cat([x, x], out=x)
    assert "neuron kernel" not in str(info.value)
    assert torch.equal(x.cpu()[:2], _x("cpu"))
    assert_device_works()
