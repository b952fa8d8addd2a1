"""The Chebyshev polynomials (four kinds, plain and shifted) and ``addbmm`` of bfloat16
and int64 compiled against the CPU (decompositions_polynomials.py,
decompositions_matmul.py; each failed to lower naming its op before)."""

import pytest
import torch
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401

_KINDS = ["t", "u", "v", "w"]
_X = torch.tensor([-8.5, -3.0, -1.5, -1.0, -0.7, -0.2, 0.0, 0.3, 0.5, 0.9, 1.0, 1.2, 2.5, 7.0])
_N = torch.arange(-2, 14, dtype=torch.float32)


def _f(kind, shifted):
    name = f"{'shifted_' if shifted else ''}chebyshev_polynomial_{kind}"
    return getattr(torch.special, name)


@pytest.mark.parametrize("shifted", [False, True], ids=["plain", "shifted"])
@pytest.mark.parametrize("kind", _KINDS)
def test_chebyshev_against_the_cpu(kind, shifted):
    f = _f(kind, shifted)
    x = _X / 2 + 0.5 if shifted else _X  # shifted: x == 0 and x == 1 are the edges
    x, n = x[:, None], _N[None, :]  # every x with every n (trig forms past n = 4..8)
    got = torch.compile(f, backend="neuron")(x.to("neuron"), n.to("neuron")).cpu()
    torch.testing.assert_close(got, f(x, n), rtol=1e-5, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("kind", _KINDS)
def test_chebyshev_int64_and_large_n(kind):
    f = _f(kind, False)
    x, n = torch.arange(-4, 5)[:, None], torch.arange(-1, 8)[None, :]
    got = torch.compile(f, backend="neuron")(x.to("neuron"), n.to("neuron")).cpu()
    torch.testing.assert_close(got, f(x, n), rtol=1e-5, atol=1e-5)
    # past the unrolled steps (32), |x| > 1: the closed form, within the rounding that
    # ATen's loop accumulates over n steps; overflow as ATen's loop (inf, then NaN)
    x = torch.tensor([-1.3, -1.01, 1.0001, 1.05, 2.0, -2.0, 9.0])[:, None]
    n = torch.tensor([33.0, 40.0, 41.0, 60.0])[None, :]
    torch._dynamo.reset()
    got = torch.compile(f, backend="neuron")(x.to("neuron"), n.to("neuron")).cpu()
    torch.testing.assert_close(got, f(x, n), rtol=2e-5, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.int64, torch.float32])
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.6, 0.2), (0, 2)])
def test_addbmm_against_the_cpu(dtype, beta, alpha):
    g = torch.Generator().manual_seed(0)
    x, b1, b2 = (torch.randn(s, generator=g) * 3 for s in [(5, 10), (6, 5, 7), (6, 7, 10)])
    x[0, 0] = float("nan")  # beta == 0 ignores it
    x, b1, b2 = (t.to(dtype) for t in (x, b1, b2))
    if not dtype.is_floating_point:
        x[0, 0] = 3

    def f(x, b1, b2):
        return torch.addbmm(x, b1, b2, beta=beta, alpha=alpha)

    got = torch.compile(f, backend="neuron")(*(t.to("neuron") for t in (x, b1, b2))).cpu()
    # float32: sums of products up to ~100 cancel to ~1; the batch order is ATen's, the
    # dot products' summation order XLA's
    tol = {"rtol": 1e-5, "atol": 1e-4} if dtype == torch.float32 else {}
    torch.testing.assert_close(got, f(x, b1, b2), equal_nan=True, **tol)
