"""The 64-bit policy: float64/int64 inputs of device kernels are computed as
float32/int32 and results restored to the original dtype; warned once per
operator; counted in narrowing_stats(); TORCHNEURON_NARROW_64BIT=0 computes
in full width; index arguments are never narrowed.

References are the CPU computing the same in 32 bits (what the device does)
and in 64 bits (to show the difference is real)."""

import json
import warnings

import pytest
import torch
from conftest import run_python_many

N = torch.neuron


def _quiet(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn()


def test_float64_add_loses_what_float32_cannot_hold():
    x = torch.tensor([1.0, 3.0], dtype=torch.float64)
    y = torch.tensor([1e-10, 2e-9], dtype=torch.float64)
    got = _quiet(lambda: x.neuron() + y.neuron())
    assert got.dtype == torch.float64 and got.device.type == "neuron"
    assert torch.equal(got.cpu(), (x.float() + y.float()).double())
    assert got.cpu().tolist() == [1.0, 3.0]
    assert (x + y).tolist() != [1.0, 3.0]  # the CPU in full width keeps them


@pytest.mark.parametrize(
    "call",
    [
        lambda x, y, w: x.clone().lerp_(y, w),
        lambda x, y, w: x.clone().lerp_(y.double(), 0.3),
        lambda x, y, w: torch.lerp(x, y, w),
        lambda x, y, w: torch._foreach_lerp_([x.clone()], [y], [w]),
    ],
    ids=["lerp_ weight", "lerp_ end", "lerp", "_foreach_lerp_"],
)
def test_lerp_of_float32_with_float64_raises_as_on_the_cpu(call):
    # narrowed, the float64 operand passed ATen's same-dtype check; now full width
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(4, 5, generator=g), torch.randn(4, 5, generator=g)
    w = torch.rand(4, 5, dtype=torch.float64, generator=g)
    with pytest.raises(RuntimeError, match="expected dtype float for") as cpu:
        call(x, y, w)
    with pytest.raises(RuntimeError, match="expected dtype float for") as dev:
        call(x.neuron(), y.neuron(), w.neuron())
    assert str(dev.value).split("(")[0] == str(cpu.value).split("(")[0]
    got = _quiet(lambda: torch.lerp(x.double().neuron(), y.double().neuron(), w.neuron()))
    assert got.dtype == torch.float64  # one dtype: narrowed as before


def test_int64_beyond_int32_wraps():
    x = torch.tensor([2**31, 2**31 + 7, 5], dtype=torch.int64)
    got = _quiet(lambda: x.neuron() + 5)
    assert got.dtype == torch.int64
    ref = (x.to(torch.int32) + 5).to(torch.int64)  # what 32-bit compute gives
    assert torch.equal(got.cpu(), ref)
    assert got.cpu().tolist() == [-(2**31) + 5, -(2**31) + 12, 10]


@pytest.mark.parametrize(
    "name,fn",
    [
        ("mm", lambda a, b: a @ b),
        ("mul", lambda a, b: a * b),
        ("exp", lambda a, b: torch.exp(a / 4)),
        ("sum", lambda a, b: a.sum(dim=1)),
        ("softmax", lambda a, b: torch.softmax(a, dim=-1)),
    ],
)
def test_float64_results_keep_dtype_and_equal_float32_compute(name, fn):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(6, 6, dtype=torch.float64, generator=g)
    b = torch.randn(6, 6, dtype=torch.float64, generator=g)
    got = _quiet(lambda: fn(a.neuron(), b.neuron()))
    assert got.dtype == torch.float64
    ref32 = fn(a.float(), b.float()).double()
    torch.testing.assert_close(got.cpu(), ref32, rtol=1e-6, atol=1e-6)


def test_in_place_and_out_variants_keep_dtype():
    x = torch.tensor([1.0, 2.0], dtype=torch.float64).neuron()
    y = torch.full((2,), 1e-10, dtype=torch.float64).neuron()
    out = torch.empty(2, dtype=torch.float64, device="neuron")
    _quiet(lambda: torch.add(x, y, out=out))
    assert out.dtype == torch.float64 and out.cpu().tolist() == [1.0, 2.0]
    _quiet(lambda: x.add_(y))
    assert x.dtype == torch.float64 and x.cpu().tolist() == [1.0, 2.0]
    i = torch.tensor([2**31 - 1], dtype=torch.int64).neuron()
    _quiet(lambda: i.add_(1))
    assert i.dtype == torch.int64 and i.cpu().tolist() == [-(2**31)]


def test_copies_and_32bit_ops_are_not_narrowed():
    N.reset_narrowing_stats()
    x = torch.tensor([1.0 + 1e-12], dtype=torch.float64)
    d = x.neuron()
    assert torch.equal(d.clone().cpu(), x)  # device copy: full width
    assert torch.equal(d.to("neuron:1").cpu(), x)  # between cores
    f = torch.ones(3, device="neuron") * 2  # float32 compute
    assert f.cpu().tolist() == [2.0, 2.0, 2.0]
    assert N.narrowing_stats() == {}


def test_fills_and_random_draws_write_full_width():
    # self is their result, not an input: nothing to narrow (and nothing counted)
    N.reset_narrowing_stats()
    assert torch.full((2,), 2**40, dtype=torch.int64, device="neuron").cpu().tolist() == [2**40] * 2
    assert torch.full((2,), 0.1, dtype=torch.float64, device="neuron").cpu().tolist() == [0.1] * 2
    assert torch.zeros(3, dtype=torch.int64, device="neuron").cpu().tolist() == [0, 0, 0]
    g = torch.Generator(device="neuron").manual_seed(0)
    got = torch.randint(0, 2**40, (4,), device="neuron", generator=g).cpu()
    assert torch.equal(
        got, torch.randint(0, 2**40, (4,), generator=torch.Generator().manual_seed(0))
    )
    got = torch.randn(5, dtype=torch.float64, device="neuron", generator=g.manual_seed(1)).cpu()
    assert torch.equal(
        got, torch.randn(5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    )
    assert N.narrowing_stats() == {}


def test_scalars_beyond_32_bits_are_narrowed_not_rejected():
    # A narrowed op with a float64 scalar float32 cannot hold (a float64
    # model's torch.finfo(float64).min) gives what float32 compute gives.
    x = torch.zeros(3, dtype=torch.float64)
    got = _quiet(lambda: x.neuron().add_(torch.finfo(torch.float64).min))
    assert got.dtype == torch.float64
    want = torch.zeros(3, dtype=torch.float32).add_(torch.finfo(torch.float64).min).double()
    assert got.cpu().tolist() == want.tolist()
    i = torch.zeros(2, dtype=torch.int64)
    got = _quiet(lambda: i.neuron().add_(2**32 + 9))
    assert got.cpu().tolist() == [9, 9]  # wraps as int32 compute does


def test_masked_fill_moves_values_at_full_width():
    # masked_fill only moves values (attention masks of float64 models): exact.
    x = torch.zeros(3, dtype=torch.float64)
    mask = torch.tensor([True, False, True])
    got = x.neuron().masked_fill_(mask.neuron(), torch.finfo(torch.float64).min)
    assert got.cpu().tolist() == [
        torch.finfo(torch.float64).min,
        0.0,
        torch.finfo(torch.float64).min,
    ]
    i = torch.zeros(2, dtype=torch.int64)
    got = i.neuron().masked_fill_(torch.tensor([True, False], device="neuron"), 2**32 + 9)
    assert got.cpu().tolist() == [2**32 + 9, 0]


def test_narrowing_stats_count_calls_per_operator():
    N.reset_narrowing_stats()
    x = torch.ones(4, dtype=torch.float64, device="neuron")
    for _ in range(3):
        _quiet(lambda: x * 2)
    _quiet(lambda: torch.ones(2, dtype=torch.int64, device="neuron").neg())
    stats = N.narrowing_stats()
    assert stats == {"aten::mul.Tensor": 3, "aten::neg": 1}
    N.reset_narrowing_stats()
    assert N.narrowing_stats() == {}


def test_index_arguments_are_not_narrowed():
    N.reset_narrowing_stats()
    weight = torch.randn(10, 3)
    idx = torch.tensor([[1, 9], [0, 4]])
    got = torch.nn.functional.embedding(idx.neuron(), weight.neuron())
    assert torch.equal(got.cpu(), torch.nn.functional.embedding(idx, weight))
    src = torch.arange(20.0).reshape(4, 5)
    gidx = torch.tensor([[0, 4], [3, 1], [2, 2], [1, 0]])
    # gather insists on an int64 index: a narrowed one would fail
    assert torch.equal(
        torch.gather(src.neuron(), 1, gidx.neuron()).cpu(), torch.gather(src, 1, gidx)
    )
    sel = torch.tensor([3, 0])
    assert torch.equal(
        torch.index_select(src.neuron(), 0, sel.neuron()).cpu(), torch.index_select(src, 0, sel)
    )
    assert N.narrowing_stats() == {}  # float32 values, int64 indices: nothing narrowed
    # float64 values are moved, not computed: exact, and not counted
    got = torch.gather(src.double().neuron(), 1, gidx.neuron())
    assert got.dtype == torch.float64
    assert torch.equal(got.cpu(), torch.gather(src.double(), 1, gidx))
    assert N.narrowing_stats() == {}


def test_runtime_switch():
    x = torch.tensor([1.0], dtype=torch.float64).neuron()
    torch.neuron.reset_narrowing_stats()
    import torchneuron

    torchneuron._C._set_narrow_64bit(False)  # restored by the conftest fixture
    try:
        assert (x + 1e-10).cpu().item() == 1.0 + 1e-10
        assert N.narrowing_stats() == {}
    finally:
        torchneuron._C._set_narrow_64bit(True)
    assert _quiet(lambda: (x + 1e-10).cpu().item()) == 1.0


_CHILD = """
import json, warnings, torch
N = torch.neuron
x = torch.tensor([1.0], dtype=torch.float64, device="neuron")
i = torch.tensor([2**31], dtype=torch.int64, device="neuron")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    a = [(x + 1e-10).cpu().item() for _ in range(3)]
    b = [(i + 5).cpu().item() for _ in range(3)]
    m = (x * 3).cpu().item()
msgs = [str(w.message) for w in caught if "64-bit policy" in str(w.message)]
print(json.dumps({"add": a, "add_int": b, "mul": m, "warnings": msgs,
                  "stats": N.narrowing_stats(), "dtype": str((x + 1).dtype)}))
"""


@pytest.fixture(scope="module")
def children():
    procs = run_python_many(
        {
            "default": (_CHILD, {"TORCHNEURON_WARN_PER_OP": "1"}),
            "full": (_CHILD, {"TORCHNEURON_NARROW_64BIT": "0"}),
        }
    )
    out = {}
    for key, proc in procs.items():
        assert proc.returncode == 0, proc.stderr
        out[key] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def test_warned_once_per_operator(children):
    r = children["default"]
    # add.Tensor is called 6 times (float64 and int64) and mul.Tensor once: one warning each
    assert len(r["warnings"]) == 2, r["warnings"]
    assert "aten::add.Tensor" in r["warnings"][0] and "aten::mul.Tensor" in r["warnings"][1]
    assert "TORCHNEURON_NARROW_64BIT=0" in r["warnings"][0]
    assert r["stats"] == {"aten::add.Tensor": 6, "aten::mul.Tensor": 1}
    assert r["add"] == [1.0] * 3 and r["add_int"] == [-(2**31) + 5] * 3
    assert r["dtype"] == "torch.float64"


def test_narrow_64bit_off_computes_in_full_width(children):
    r = children["full"]
    assert r["add"] == [1.0 + 1e-10] * 3
    assert r["add_int"] == [2**31 + 5] * 3
    assert r["mul"] == 3.0
    assert r["warnings"] == [] and r["stats"] == {}
    assert r["dtype"] == "torch.float64"


def test_data_movement_keeps_64bit_values():
    # cat, gather, indexing, masking and where only move values: exact, like copies.
    b = torch.tensor([2**40 + 1, 3_000_000_000, -5])
    d = b.to("neuron")
    idx = torch.tensor([2, 0, 1])
    cases = {
        "cat": (torch.cat([d, d]), torch.cat([b, b])),
        "stack": (torch.stack([d, d]), torch.stack([b, b])),
        "index_select": (d.index_select(0, idx.to("neuron")), b.index_select(0, idx)),
        "gather": (d.gather(0, idx.to("neuron")), b.gather(0, idx)),
        "getitem": (d[idx.to("neuron")], b[idx]),
        "flip": (d.flip(0), b.flip(0)),
        "masked_fill": (d.masked_fill((b < 0).to("neuron"), 2**33), b.masked_fill(b < 0, 2**33)),
        "where": (
            torch.where((b > 0).to("neuron"), d, d.flip(0)),
            torch.where(b > 0, b, b.flip(0)),
        ),
    }
    for name, (got, want) in cases.items():
        assert got.dtype == torch.int64, name
        assert torch.equal(got.cpu(), want), name
