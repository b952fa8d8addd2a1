"""Special functions and integer/bit ops that had no lowering
(torchneuron/compiler/decompositions_special.py), compiled against the CPU over wide
grids: beyond the sweep's values, large arguments, poles, the tails of erfc/erfinv,
subnormal steps of nextafter, gcd/lcm at each integer width's extremes, polygamma(n, x)
for 2 <= n <= 12 (against mpmath, where the CPU's own series cancels), and the
gradients of digamma (trigamma, polygamma(1, x)), trigamma (polygamma(2, x)) and i0
(special_i1)."""

import pytest
import torch
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401

_NAN, _INF = float("nan"), float("inf")
_SPECIAL = [
    _NAN,
    _INF,
    -_INF,
    -0.0,
    0.0,
    1.0,
    -1.0,
    2.0,
    -2.0,
    -3.0,
    -100.0,
    1e30,
    -1e30,
    1e-30,
    -1e-30,
    0.5,
    -0.5,
    0.9999,
    -0.9999,
    1.0001,
    3.75,
    -3.75,
    30.0,
    88.0,
    1e4,
]


def _grid(dtype):
    x = torch.cat(
        [torch.linspace(-12, 12, 2401), torch.linspace(-0.999, 0.999, 401), torch.tensor(_SPECIAL)]
    )
    return x.to(dtype)


def _compiled(f, *xs):
    return torch.compile(f, backend="neuron", fullgraph=True)(*(x.to("neuron") for x in xs))


# (rtol, atol) per dtype
_TOL = {torch.float32: (2e-5, 2e-5), torch.float16: (1e-3, 1e-3), torch.bfloat16: (1.6e-2, 1e-2)}
_UNARY = {
    "erfc": torch.erfc,
    "lgamma": torch.lgamma,
    "digamma": torch.digamma,
    "erfinv": torch.erfinv,
    "i0": torch.i0,
    "trigamma": lambda a: torch.polygamma(1, a),
    "i1": torch.special.i1,
    "polygamma2": lambda a: torch.polygamma(2, a),
    "polygamma3": lambda a: torch.polygamma(3, a),
}
_ATEN = {
    "trigamma": "polygamma",
    "i1": "special_i1",
    "polygamma2": "polygamma",
    "polygamma3": "polygamma",
}  # the op's name where it differs
_POLES = ("digamma", "trigamma", "polygamma2", "polygamma3")


@pytest.mark.parametrize("name", list(_UNARY))
def test_float64_special_functions_do_not_lower_with_float32_grade_formulas(name):
    # eager gives these at full width (erfinv narrowed only under the 64-bit switch, which a
    # graph compiled once cannot follow): a float32-grade result (~1e-7) would differ from
    # it silently, so the lowering fails naming the op, and fallback_execution runs it eagerly
    x = torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64)
    with pytest.raises(Exception, match=f"aten.{_ATEN.get(name, name)}"):
        _compiled(_UNARY[name], x)
    torch._dynamo.reset()
    g = torch.compile(_UNARY[name], backend="neuron", options={"fallback_execution": True})
    out = g(x.to("neuron")).cpu()  # as eager: erfinv narrowed to float32, the others CPU kernels
    torch.testing.assert_close(
        out, _UNARY[name](x), rtol=1e-6 if name == "erfinv" else 1e-15, atol=0
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_special_functions_match_cpu(dtype):
    x = _grid(dtype)
    names = list(_UNARY)
    out = _compiled(lambda a: [_UNARY[n](a) for n in names], x)
    for n, o in zip(names, out):
        # ATen's float trigamma takes sin(pi x) of an unreduced x: 2e-4 off at -11.99
        r = _UNARY[n](x.double()).to(dtype) if n == "trigamma" else _UNARY[n](x)
        o = o.cpu()
        if n in _POLES:  # near the poles -pi/tan(pi x) is ill-conditioned; the CPU's
            # float64 is a pole where x is an integer; trigamma's next test checks near them
            near = (x - x.round()).abs() < 1e-3
            o, r = o[~near], r[~near]
        rtol, atol = _TOL[dtype]
        torch.testing.assert_close(o, r, rtol=rtol, atol=atol, equal_nan=True, msg=n)
        z = (r == 0) & (o == 0)
        assert torch.equal(o[z].signbit(), r[z].signbit()), n


def _near_poles_and_extremes():
    k = torch.arange(-30.0, 1.0).repeat_interleave(6)
    d = torch.tensor([1e-6, -1e-6, 1e-4, -1e-4, 0.01, -0.49]).repeat(31)
    far = torch.tensor(
        [
            1e-37,
            1e-30,
            1e-19,
            3e-19,
            1e-3,
            0.3,
            1.4616,
            7.0,
            9.99,
            10.01,
            50.0,
            87.0,
            88.7,
            1e4,
            1e30,
            -1e3 + 0.5,
            -1e5 + 0.25,
            -7.5,
        ]
    )
    x = torch.cat([k + d, far, -far[:14]])
    return x[(x - x.round()).abs() > 0]


@pytest.mark.parametrize("name", ["trigamma", "i1"])
def test_trigamma_and_i1_match_float64_near_poles_and_at_extremes(name):
    """Against the CPU's float64 (the float32 kernels are the less accurate side near
    trigamma's poles): within 2e-6 relative, overflow where float32 overflows."""
    x = _near_poles_and_extremes()
    o = _compiled(_UNARY[name], x).cpu()
    r = _UNARY[name](x.double())
    if name == "i1":  # as ATen's float kernel: exp(x) overflows past 88.72
        r = torch.where(x.abs() > 88.72, r * float("inf"), r)
    torch.testing.assert_close(o, r.float(), rtol=2e-6, atol=0)


def test_trigamma_and_i1_special_values():
    x = torch.tensor([_NAN, _INF, -_INF, 0.0, -0.0, -1.0, -30.0, -1e30, 1e30])
    out = _compiled(lambda a: (torch.polygamma(1, a), torch.special.i1(a)), x)
    # trigamma: ATen's float kernels give a large finite value at the negative poles
    # (their sin(pi x) is not reduced); the pole is inf
    inf, nan = _INF, _NAN
    torch.testing.assert_close(
        out[0].cpu(), torch.tensor([nan, 0, nan, inf, inf, inf, inf, inf, 1e-30]), equal_nan=True
    )
    r = torch.special.i1(x)  # NaN at +-inf (ATen's inf * 0), +0.0 at -0.0
    torch.testing.assert_close(out[1].cpu(), r, equal_nan=True)
    assert torch.equal(out[1].cpu().signbit(), r.signbit())


def test_polygamma_orders():
    x = torch.tensor([-2.5, -0.3, 0.2, 1.0, 3.5, 25.0])
    out = _compiled(lambda a: torch.polygamma(0, a), x).cpu()
    torch.testing.assert_close(out, torch.polygamma(0, x), rtol=2e-5, atol=2e-5)
    torch._dynamo.reset()
    with pytest.raises(Exception, match="aten.polygamma"):  # n > 12: not decomposed
        _compiled(lambda a: torch.polygamma(13, a), x)
    torch._dynamo.reset()
    g = torch.compile(
        lambda a: torch.polygamma(13, a), backend="neuron", options={"fallback_execution": True}
    )
    assert torch.equal(g(x.to("neuron")).cpu(), torch.polygamma(13, x))  # eagerly, exact


def _mpmath_polygamma(n, x):
    import mpmath  # pinned in requirements.txt (torch needs it through sympy)

    with mpmath.workdps(40):
        return torch.tensor(
            [float(mpmath.psi(n, mpmath.mpf(v))) for v in x.tolist()], dtype=torch.float64
        )


@pytest.mark.parametrize("n", range(2, 13))
def test_polygamma_high_orders_match_mpmath_near_poles_and_at_extremes(n):
    """Against mpmath at 40 digits: the CPU sums the series from x, which cancels on the
    negative axis (float64 psi_12(-9.5) is 3.5e-4, the value -3.7e-5; psi_6(-999.5)
    -2.3e-12, the value -1.2e-16). Within 2e-6 relative where the value is a normal
    float32 (below, compiled graphs flush subnormals); inf where it overflows."""
    x = torch.cat(
        [
            _near_poles_and_extremes(),
            torch.linspace(-12.01, 12.01, 241),
            torch.tensor([-1e3 + 0.5, -1e3 + 0.25, -1e5 + 0.5, -9.5, -2.5]),
        ]
    )
    o = _compiled(lambda a: torch.polygamma(n, a), x).cpu().double()
    r = _mpmath_polygamma(n, x)
    big = r.abs() > torch.finfo(torch.float32).max
    assert torch.equal(o[big], r[big].sign() * _INF)
    ok = ~big & (r.abs() > 1e-30)
    torch.testing.assert_close(o[ok], r[ok], rtol=2e-6, atol=0)


def test_polygamma_high_orders_special_values_as_cpu():
    x = torch.tensor([_NAN, _INF, -_INF, 0.0, -0.0, -1.0, -30.0, -1e30, 1e30])
    out = _compiled(lambda a: [torch.polygamma(n, a) for n in (2, 3, 12)], x)
    for n, o in zip((2, 3, 12), out):  # poles +-inf by n's parity, NaN at +inf, +-0.0 far
        r = torch.polygamma(n, x)
        assert torch.equal(o.cpu().isnan(), r.isnan()), n
        ok = ~r.isnan()
        o = o.cpu()[ok]
        assert torch.equal(o, r[ok]) and torch.equal(o.signbit(), r[ok].signbit()), n


def _grad_inputs():
    x = torch.cat([torch.linspace(-6.45, 14.55, 211), torch.tensor([0.05, 1e-3, 30.0, 100.0])])
    return x[(x - x.round()).abs() > 1e-2]


@pytest.mark.parametrize("name", ["digamma", "i0", "both", "trigamma"])
def test_gradients_of_digamma_and_i0_match_cpu(name):
    """digamma's backward is polygamma(1, x), i0's special_i1, trigamma's polygamma(2, x):
    each failed to lower."""
    f = {
        "digamma": lambda a, b: torch.digamma(a).sum(),
        "trigamma": lambda a, b: (torch.polygamma(1, a) * b).sum(),
        "i0": lambda a, b: (torch.i0(b) * a).sum(),
        "both": lambda a, b: (torch.digamma(a) * torch.i0(b).log()).sum(),
    }[name]
    a = _grad_inputs()
    b = torch.linspace(-85.0, 85.0, a.numel())
    cpu = [a.clone().requires_grad_(), b.clone().requires_grad_()]
    dev = [t.to("neuron").requires_grad_() for t in (a, b)]
    f(*cpu).backward()
    torch.compile(f, backend="neuron")(*dev).backward()
    for d, c in zip(dev, cpu):
        if c.grad is None:  # "digamma" does not use b
            assert d.grad is None
            continue
        torch.testing.assert_close(d.grad.cpu(), c.grad, rtol=2e-5, atol=1e-6)
    assert all(r["fallback"] is None for r in torch.neuron.get_dynamo_metrics())


def test_erfc_tail_keeps_relative_precision():
    """1 - erf(x) is 0 past 4 in float32; erfc(9) is 4.1e-37."""
    x = torch.linspace(4, 9.1, 200)
    torch.testing.assert_close(_compiled(torch.erfc, x).cpu(), torch.erfc(x), rtol=2e-5, atol=0)


def test_integer_inputs_of_special_functions_match_cpu():
    x = torch.tensor([-3, -1, 0, 1, 2, 5, 100], dtype=torch.int32)
    out = _compiled(lambda a: (torch.erfc(a), torch.lgamma(a), torch.i0(a.clamp(-5, 5))), x)
    ref = (torch.erfc(x), torch.lgamma(x), torch.i0(x.clamp(-5, 5)))
    for o, r in zip(out, ref):
        torch.testing.assert_close(o.cpu(), r, rtol=2e-5, atol=2e-5, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_nextafter_is_bit_exact(dtype):
    fi = torch.finfo(dtype)
    v = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        fi.tiny,
        -fi.tiny,
        fi.smallest_normal / 4,
        fi.max,
        -fi.max,
        _INF,
        -_INF,
        _NAN,
        3.5,
        -2.25,
        1e-3,
    ]
    x = torch.tensor([a for a in v for _ in v], dtype=dtype)
    y = torch.tensor([b for _ in v for b in v], dtype=dtype)
    o = _compiled(torch.nextafter, x, y).cpu()
    r = torch.nextafter(x, y)
    assert torch.equal(o.isnan(), r.isnan())
    ok = ~r.isnan()
    assert torch.equal(o[ok].view(torch.uint8), r[ok].view(torch.uint8)), (x, y, o, r)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8])
def test_gcd_lcm_match_cpu(dtype):
    info = torch.iinfo(dtype)
    fib = [1, 1]
    while fib[-1] + fib[-2] <= info.max:
        fib.append(fib[-1] + fib[-2])
    # the CPU's own gcd raises SIGFPE at INT_MIN of int32/int64 (C's INT_MIN % -1)
    low = info.min if info.bits <= 16 else info.min + 1
    v = sorted(
        {
            0,
            1,
            2,
            3,
            6,
            12,
            18,
            35,
            100,
            info.max,
            low,
            info.min + 1,
            fib[-1],
            fib[-2],
            -fib[-1],
            -7,
            -12,
        }
    )
    v = [a for a in v if info.min <= a <= info.max]
    a = torch.tensor([p for p in v for _ in v], dtype=dtype)
    b = torch.tensor([q for _ in v for q in v], dtype=dtype)
    out = _compiled(lambda a, b: (torch.gcd(a, b), torch.lcm(a, b)), a, b)
    assert torch.equal(out[0].cpu(), torch.gcd(a, b))
    assert torch.equal(out[1].cpu(), torch.lcm(a, b))
