"""Ops the compile sweep (tests/compile/compile_sweep.py) found failing to compile or differing from
the CPU, against the CPU: decompositions_scans.py (cummax/cummin, logcumsumexp),
decompositions_elementwise.py (hypot, pow 0.5/-0.5, bool clamp),
passes/semantics/compare_in_result_type.py (bool compared with a Python number) and
passes/semantics/nan_aware_arg_reductions.py (float64 max.dim). One compiled graph per test."""

import pytest
import torch
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401

_NAN, _INF = float("nan"), float("inf")


def _same(out, ref, rtol=0.0, atol=0.0):
    out = out if isinstance(out, (tuple, list)) else (out,)
    ref = ref if isinstance(ref, (tuple, list)) else (ref,)
    assert len(out) == len(ref)
    for o, r in zip(out, ref):
        o = o.cpu()
        assert o.dtype == r.dtype and o.shape == r.shape, (o, r)
        torch.testing.assert_close(o, r, rtol=rtol, atol=atol, equal_nan=True)
        if r.dtype.is_floating_point:  # -0.0 kept where the CPU keeps it
            z = (r == 0) & (o == 0)
            assert torch.equal(o[z].signbit(), r[z].signbit()), (o, r)


def _run(f, *xs, **tol):
    out = torch.compile(f, backend="neuron", fullgraph=True)(*(x.to("neuron") for x in xs))
    _same(list(_flat(out)), list(_flat(f(*xs))), **tol)


def _flat(out):
    if isinstance(out, torch.Tensor):
        yield out
    else:
        for o in out:
            yield from _flat(o)


# ties take the latest index, the first NaN stays with its index (ATen's CPU kernel)
_TIES = torch.tensor(
    [
        [1.0, 3.0, 3.0, 2.0, 3.0, _NAN, 5.0, _NAN],
        [-_INF, -_INF, 0.0, -0.0, 0.0, 7.0, 7.0, -1.0],
        [2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0],
    ]
)


def _cum(a):
    return (a.cummax(1), a.cummin(1), a.cummax(0), a.cummin(-1), a[0].cummax(0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_cummax_cummin_float_ties_and_nan_match_cpu(dtype):
    _run(_cum, _TIES.to(dtype))


def test_cummax_cummin_integers_match_cpu():
    big = torch.tensor([[3_000_000_000, 5, 3_000_000_001, 3_000_000_001, -(2**40), 7]])
    i8 = torch.tensor([[5, -3, 5, 127, -128, 127], [0, 0, 0, -1, -1, 1]], dtype=torch.int8)
    u8 = torch.tensor([[200, 3, 255, 255, 0, 128]], dtype=torch.uint8)
    b = torch.tensor([[False, True, False, True, True, False]])
    _run(lambda *xs: [_cum(x)[:2] for x in xs], big, i8, u8, b)


def test_logcumsumexp_does_not_overflow_as_cpu():
    x = torch.tensor(
        [
            [100.0, 100.0, 1000.0, -_INF, 3.0, -1e4],
            [-_INF, -_INF, _INF, 1.0, _INF, 2.0],
            [0.5, _NAN, 1.0, 2.0, 3.0, 4.0],
        ]
    )
    _run(
        lambda a: (a.logcumsumexp(1), a.logcumsumexp(0), a.bfloat16().logcumsumexp(1)),
        x,
        rtol=1e-5,
        atol=1e-5,
    )


def test_logcumsumexp_bfloat16_matches_cpu():
    x = torch.linspace(-30, 90, 40).reshape(4, 10)
    _run(lambda a: a.bfloat16().logcumsumexp(1), x, rtol=1.6e-2, atol=1e-2)


def test_hypot_does_not_overflow_as_cpu():
    # (no subnormals: compiled graphs flush them, docs/compile.md)
    a = torch.tensor([3e38, -2e38, 3.0, 0.0, -0.0, _INF, _NAN, _NAN, 1e-30, 1e-30, 1e20])
    b = torch.tensor([3e38, 1.0, -4.0, 0.0, 0.0, _NAN, -_INF, 2.0, 1e-30, 0.0, 1e-20])
    _run(
        lambda x, y: (torch.hypot(x, y), torch.hypot(x.half().clamp(-6e4, 6e4), y.half())),
        a,
        b,
        rtol=1e-5,
        atol=0,
    )


def test_pow_half_exponents_take_sqrt_as_cpu():
    x = torch.tensor([-_INF, -0.0, 0.0, 4.0, -1.0, _INF, _NAN, 2.25])
    _run(
        lambda a: (a**0.5, a**-0.5, a.double() ** 0.5, a.bfloat16().pow(0.5), a.half() ** 0.5),
        x,
        rtol=1e-6,
        atol=0,
    )


def test_bool_compared_with_a_number_matches_cpu():
    x = torch.tensor([True, False, True, False])
    _run(
        lambda a: (
            a < 2,
            a == 2,
            a != 2,
            a >= 0.5,
            a > -1,
            a <= 0,
            a == True,  # noqa: E712
            a.int() < 2.5,
            a.to(torch.uint8) > -1,
        ),
        x,
    )


def test_bool_clamp_matches_cpu():
    x = torch.tensor([[True, False, True, False], [False, False, True, True]])
    lo = torch.tensor([False, True, True, False])
    hi = torch.tensor([[True, True, False, False], [True, False, True, True]])
    _run(
        lambda a, m, h: (
            a.clamp(min=m),
            a.clamp(max=h),
            torch.clamp_min(a, m),
            torch.clamp_max(a, h),
            a.clamp(0, 1),
            a.clamp(min=torch.tensor(2)),
        ),
        x,
        lo,
        hi,
    )


def test_float64_max_dim_with_nan_matches_cpu():
    x = torch.tensor([[1.0, _NAN, 3.0], [4.0, -2.0, 0.5]], dtype=torch.float64)
    _run(lambda a: (a.max(1), a.min(0), a.max(1).values + 1, a.min(1, keepdim=True).indices), x)


def test_number_operands_angle_and_integer_forms_match_cpu():
    """xlogy/copysign with a Python number, angle, reciprocal/isinf of integers and bool,
    abs of uint8: these failed to compile (decompositions_elementwise.py)."""
    f = torch.tensor([-2.5, -0.0, 0.0, 0.5, _NAN, _INF, -_INF, 3.0])
    i = torch.tensor([-7, 0, 5, 1, -1, 100, 3, 2], dtype=torch.int32)
    u = torch.tensor([0, 1, 7, 200, 255, 128, 3, 2], dtype=torch.uint8)
    b = u > 5
    _run(
        lambda f, i, u, b: (
            torch.xlogy(f, 2.0),
            torch.xlogy(3.0, f),
            torch.xlogy(i, 0.5),
            torch.copysign(f, -1.0),
            torch.copysign(f, 2),
            torch.angle(f),
            torch.angle(i),
            torch.angle(i.long()),
            torch.reciprocal(i),
            torch.reciprocal(u),
            torch.reciprocal(b),
            torch.isinf(i),
            torch.isinf(u),
            torch.isinf(b),
            torch.abs(u),
            u.abs() + 1,
        ),
        f,
        i,
        u,
        b,
        rtol=1e-6,
        atol=0,
    )


def test_empty_results_compile_and_match_cpu(run_py):
    """sort/gather of an empty tensor aborted the process in torch-mlir (SIGABRT), stack,
    scatter and tensor indexing failed to compile: empty results are constants now
    (passes/legalize/empty_results.py). In a child process, so an abort fails only this test."""
    run_py(
        """
        import torch, torchneuron

        def f(a, b):
            i = torch.zeros(0, 2, dtype=torch.int64, device=a.device)
            return (a.sort(1), a.gather(1, i), torch.stack([a, b]), a.scatter(1, i, b[:, :2]),
                    a[:, torch.tensor([-1, 0], device=a.device)], a.argsort(0), a.sum(0),
                    torch.cat([a, b], 0), a.long().sort(1).values, a.bool().cummax(1))

        a, b = torch.randn(0, 5), torch.randn(0, 5)
        out = torch.compile(f, backend="neuron", fullgraph=True)(a.to("neuron"), b.to("neuron"))
        flat = lambda t: [t] if isinstance(t, torch.Tensor) else [y for x in t for y in flat(x)]
        for o, r in zip(flat(out), flat(f(a, b)), strict=True):
            assert o.dtype == r.dtype and o.shape == r.shape and torch.equal(o.cpu(), r), (o, r)
        print("ok")
    """,
        timeout=240,
    )


def test_lerp_of_a_non_contiguous_input_matches_cpu():
    """The core lerp decomposition ends in prims.copy_strided for a non-contiguous input,
    which did not lower (decompositions_elementwise.py: a copy)."""
    x = (torch.arange(15.0).reshape(5, 3) / 7).t()
    y = torch.linspace(-3, 3, 15).reshape(3, 5)
    assert not x.to("neuron").is_contiguous()
    _run(
        lambda a, b: (torch.lerp(a, b, 0.3), torch.lerp(a, b, b.sigmoid())),
        x,
        y,
        rtol=1e-6,
        atol=1e-6,
    )


def test_trunc_keeps_the_sign_of_zero_as_cpu():
    x = torch.tensor([-0.0, 0.0, -0.3, 0.3, -2.5, 2.5, _NAN, -_INF, 1e10])
    _run(
        lambda a: (
            a.trunc(),
            a.frac(),
            a.double().trunc(),
            a.bfloat16().trunc(),
            torch.div(a, 2.0, rounding_mode="trunc"),
        ),
        x,
    )


def test_addmv_beta_zero_ignores_nan_in_self():
    # addmv had no lowering; PyTorch's decomposition keeps ATen's beta=0 rule
    m, v = torch.randn(3, 4), torch.randn(4)
    s = torch.tensor([float("nan"), 1.0, 2.0])
    f = lambda s, m, v: torch.addmv(s, m, v, beta=0, alpha=2)  # noqa: E731
    got = torch.compile(f, backend="neuron")(s.to("neuron"), m.to("neuron"), v.to("neuron"))
    torch.testing.assert_close(got.cpu(), f(s, m, v))
