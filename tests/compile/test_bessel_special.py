"""Bessel, Airy, ndtri, Hurwitz zeta and the Hermite/Laguerre/Legendre polynomials
compiled against the CPU (decompositions_bessel.py, decompositions_polynomials.py), erf
of integers and frexp (decompositions_elementwise.py): each was refused naming its op
before. Also the sweep's bfloat16 acceptance rule (opinfo_compile_sweep._error_within_cpu)."""

import opinfo_compile_sweep as sw
import pytest
import torch
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401

_INF, _NAN = float("inf"), float("nan")
_EDGES = [0.0, -0.0, 1e-30, 1e-6, 1e-3, 0.5, 2.0, 2.09, 3.0, 5.0, 7.99, 8.0, 8.01]
_EDGES += [20.0, 50.0, 100.0, 103.9, 300.0, 1e3, 1e4, 1e5, 1e6, 1e8, 1e20, 1e30]
_EDGES += [-1e-30, -1.0, -2.5, -30.0, -1e3, -1e6, _INF, -_INF, _NAN]
_X = torch.cat([torch.linspace(-12, 12, 961), torch.tensor(_EDGES)])

_UNARY = [
    "bessel_j0",
    "bessel_j1",
    "bessel_y0",
    "bessel_y1",
    "modified_bessel_i0",
    "modified_bessel_i1",
    "modified_bessel_k0",
    "modified_bessel_k1",
    "scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1",
    "spherical_bessel_j0",
]


def _compiled(f, *args):
    torch._dynamo.reset()
    out = torch.compile(f, backend="neuron")(*(a.to("neuron") for a in args))
    return tuple(o.cpu() for o in out) if isinstance(out, tuple) else out.cpu()


def _close(got, ref):
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("name", _UNARY)
def test_bessel_against_the_cpu(name):
    f = getattr(torch.special, name)
    _close(_compiled(f, _X), f(_X))
    x = torch.arange(-9, 10)  # int64: float32 results
    got = _compiled(f, x)
    assert got.dtype == torch.float32
    _close(got, f(x))


def test_bessel_j1_keeps_the_sign_of_zero():
    got = _compiled(torch.special.bessel_j1, torch.tensor([0.0, -0.0]))
    assert torch.equal(got.signbit(), torch.tensor([False, True]))


def test_airy_ai_against_the_cpu():
    # below about -130 float32's rounding of the phase 2/3 |x|^1.5 moves the value by
    # more than the tolerance, and XLA:CPU's sqrt and division round otherwise than the
    # CPU's: both are phase noise about the true value there (the module's docstring)
    x = _X[(_X >= -100) | _X.isnan() | _X.isinf()]
    _close(_compiled(torch.special.airy_ai, x), torch.special.airy_ai(x))


def test_ndtri_against_the_cpu():
    p = torch.cat([torch.linspace(0, 1, 2001), torch.tensor([1e-37, 1e-30, 1e-20, 1e-10, 1e-5])])
    p = torch.cat([p, torch.tensor([1 - 1e-7, 0.999, 0.92, 0.08, -0.1, 1.1, _NAN, _INF])])
    _close(_compiled(torch.special.ndtri, p), torch.special.ndtri(p))


def test_zeta_against_the_cpu():
    x = torch.tensor([1.0, 0.5, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 7.0, 9.0, 12.5, 30.0, 60.0])
    x = torch.cat([x, torch.tensor([_INF, _NAN])])[:, None]
    q = torch.tensor([0.0, -1.0, -1.5, -0.25, -3.7, -10.5, -7.3, 0.1, 0.5, 1.0, 2.0, 5.5])
    q = torch.cat([q, torch.tensor([11.0, 100.0, 1e4, _INF])])[None, :]
    _close(_compiled(torch.special.zeta, x, q), torch.special.zeta(x, q))
    xi, qi = torch.arange(-2, 10)[:, None], torch.arange(-3, 8)[None, :]
    _close(_compiled(torch.special.zeta, xi, qi), torch.special.zeta(xi, qi))


_POLYNOMIALS = ["hermite_polynomial_h", "hermite_polynomial_he"]
_POLYNOMIALS += ["laguerre_polynomial_l", "legendre_polynomial_p"]


@pytest.mark.parametrize("name", _POLYNOMIALS)
def test_orthogonal_polynomials_against_the_cpu(name):
    f = getattr(torch.special, name)
    x = torch.tensor([-8.5, -3.0, -1.5, -1.0, -0.7, -0.2, 0.0, -0.0, 0.3, 0.5, 0.9, 1.0, 1.2, 2.5])
    x = x[:, None]
    n = torch.cat([torch.arange(-2, 40.0), torch.tensor([3.7, -0.5, 60, 127, 128, _NAN, _INF])])
    _close(_compiled(f, x, n[None, :]), f(x, n[None, :]))
    xi, ni = torch.arange(-8, 10)[:, None], torch.arange(-1, 9)[None, :]
    _close(_compiled(f, xi, ni), f(xi, ni))


@pytest.mark.parametrize("name", ["hermite_polynomial_h", "hermite_polynomial_he"])
def test_hermite_past_its_limit_is_nan(name):
    f = getattr(torch.special, name)
    x, n = torch.tensor([0.3, -2.0]), torch.tensor([129.0, 500.0])
    assert _compiled(f, x, n).isnan().all() and f(x, n).isnan().all()


def test_erf_of_integers():
    x = torch.arange(-9, 10)
    got = _compiled(torch.erf, x)
    assert got.dtype == torch.float32
    _close(got, torch.erf(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_frexp_against_the_cpu(dtype):
    x = torch.tensor([0.0, -0.0, _INF, -_INF, 1e-40, -3e-45, 3.0, -0.75, 1e38, 0.5, -123.456])
    x = torch.cat([x, torch.linspace(-50, 50, 101)]).to(dtype)
    m, e = _compiled(torch.frexp, x)
    rm, re = torch.frexp(x)
    assert m.dtype == rm.dtype and e.dtype == re.dtype
    assert torch.equal(e, re) and torch.equal(m, rm)


def test_bfloat16_rule_accepts_rounding_and_rejects_a_wrong_value():
    g = torch.Generator().manual_seed(0)
    t = torch.randn(4096, generator=g) * 100  # the float32 computation
    cpu = t.bfloat16().float()  # the CPU's bfloat16 result: rounded
    # another rounding: each element to a bfloat16 neighbour of t, never farther than
    # the CPU's largest error
    up, down = (t * (1 + 2**-9)).bfloat16().float(), (t * (1 - 2**-9)).bfloat16().float()
    other = torch.where(torch.arange(4096) % 2 == 0, up, down)
    other = torch.where((other - t).abs() <= (cpu - t).abs().max(), other, cpu)
    assert sw._error_within_cpu(other, cpu, t)
    wrong = cpu.clone()
    wrong[7] += 50.0  # one wrong value
    assert not sw._error_within_cpu(wrong, cpu, t)
    nan = cpu.clone()
    nan[3] = _NAN  # NaN where the float32 result is finite
    assert not sw._error_within_cpu(nan, cpu, t)
