"""Special functions and integer/bit ops that had no lowering
(torchneuron/compiler/decompositions_special.py), compiled against the CPU over wide
grids: beyond the sweep's values, large arguments, poles, the tails of erfc/erfinv,
subnormal steps of nextafter, and gcd/lcm at each integer width's extremes."""
import pytest
import torch

import torchneuron  # noqa: F401

from compile_support import fresh_compile_state  # noqa: F401

_NAN, _INF = float("nan"), float("inf")
_SPECIAL = [_NAN, _INF, -_INF, -0.0, 0.0, 1.0, -1.0, 2.0, -2.0, -3.0, -100.0, 1e30, -1e30,
            1e-30, -1e-30, 0.5, -0.5, 0.9999, -0.9999, 1.0001, 3.75, -3.75, 30.0, 88.0, 1e4]


def _grid(dtype):
    x = torch.cat([torch.linspace(-12, 12, 2401), torch.linspace(-0.999, 0.999, 401),
                   torch.tensor(_SPECIAL)])
    return x.to(dtype)


def _compiled(f, *xs):
    return torch.compile(f, backend="neuron", fullgraph=True)(*(x.to("neuron") for x in xs))


# (rtol, atol) per dtype
_TOL = {torch.float32: (2e-5, 2e-5), torch.float16: (1e-3, 1e-3), torch.bfloat16: (1.6e-2, 1e-2)}
_UNARY = {"erfc": torch.erfc, "lgamma": torch.lgamma, "digamma": torch.digamma,
          "erfinv": torch.erfinv, "i0": torch.i0}


@pytest.mark.parametrize("name", list(_UNARY))
def test_float64_special_functions_do_not_lower_with_float32_grade_formulas(name):
    # eager gives these at full width (erfinv narrowed only under the 64-bit switch, which a
    # graph compiled once cannot follow): a float32-grade result (~1e-7) would differ from
    # it silently, so the lowering fails naming the op, and fallback_execution runs it eagerly
    x = torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64)
    with pytest.raises(Exception, match=f"aten.{name}"):
        _compiled(_UNARY[name], x)
    torch._dynamo.reset()
    g = torch.compile(_UNARY[name], backend="neuron", options={"fallback_execution": True})
    out = g(x.to("neuron")).cpu()   # as eager: erfinv narrowed to float32, the others CPU kernels
    torch.testing.assert_close(out, _UNARY[name](x), rtol=1e-6 if name == "erfinv" else 1e-15, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_special_functions_match_cpu(dtype):
    x = _grid(dtype)
    names = list(_UNARY)
    out = _compiled(lambda a: [_UNARY[n](a) for n in names], x)
    for n, o in zip(names, out):
        r = _UNARY[n](x)
        o = o.cpu()
        if n == "digamma":   # near the poles -pi/tan(pi x) is ill-conditioned: absolute
            near = (x - x.round()).abs() < 1e-3
            o, r = o[~near], r[~near]
        rtol, atol = _TOL[dtype]
        torch.testing.assert_close(o, r, rtol=rtol, atol=atol, equal_nan=True, msg=n)
        z = (r == 0) & (o == 0)
        assert torch.equal(o[z].signbit(), r[z].signbit()), n


def test_erfc_tail_keeps_relative_precision():
    """1 - erf(x) is 0 past 4 in float32; erfc(9) is 4.1e-37."""
    x = torch.linspace(4, 9.1, 200)
    torch.testing.assert_close(_compiled(torch.erfc, x).cpu(), torch.erfc(x), rtol=2e-5,
                               atol=0)


def test_integer_inputs_of_special_functions_match_cpu():
    x = torch.tensor([-3, -1, 0, 1, 2, 5, 100], dtype=torch.int32)
    out = _compiled(lambda a: (torch.erfc(a), torch.lgamma(a), torch.i0(a.clamp(-5, 5))), x)
    ref = (torch.erfc(x), torch.lgamma(x), torch.i0(x.clamp(-5, 5)))
    for o, r in zip(out, ref):
        torch.testing.assert_close(o.cpu(), r, rtol=2e-5, atol=2e-5, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16,
                                   torch.bfloat16])
def test_nextafter_is_bit_exact(dtype):
    fi = torch.finfo(dtype)
    v = [0.0, -0.0, 1.0, -1.0, fi.tiny, -fi.tiny, fi.smallest_normal / 4, fi.max, -fi.max,
         _INF, -_INF, _NAN, 3.5, -2.25, 1e-3]
    x = torch.tensor([a for a in v for _ in v], dtype=dtype)
    y = torch.tensor([b for _ in v for b in v], dtype=dtype)
    o = _compiled(torch.nextafter, x, y).cpu()
    r = torch.nextafter(x, y)
    assert torch.equal(o.isnan(), r.isnan())
    ok = ~r.isnan()
    assert torch.equal(o[ok].view(torch.uint8), r[ok].view(torch.uint8)), (x, y, o, r)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8,
                                   torch.uint8])
def test_gcd_lcm_match_cpu(dtype):
    info = torch.iinfo(dtype)
    fib = [1, 1]
    while fib[-1] + fib[-2] <= info.max:
        fib.append(fib[-1] + fib[-2])
    # the CPU's own gcd raises SIGFPE at INT_MIN of int32/int64 (C's INT_MIN % -1)
    low = info.min if info.bits <= 16 else info.min + 1
    v = sorted({0, 1, 2, 3, 6, 12, 18, 35, 100, info.max, low, info.min + 1,
                fib[-1], fib[-2], -fib[-1], -7, -12})
    v = [a for a in v if info.min <= a <= info.max]
    a = torch.tensor([p for p in v for _ in v], dtype=dtype)
    b = torch.tensor([q for _ in v for q in v], dtype=dtype)
    out = _compiled(lambda a, b: (torch.gcd(a, b), torch.lcm(a, b)), a, b)
    assert torch.equal(out[0].cpu(), torch.gcd(a, b))
    assert torch.equal(out[1].cpu(), torch.lcm(a, b))
