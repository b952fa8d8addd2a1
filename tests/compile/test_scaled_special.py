"""``special_i0e``/``special_i1e``/``special_erfcx`` (and ``special_log_ndtr``, written
with ``erfcx``) compiled against the CPU over a wide grid: both sides of each formula's
branch point, large arguments (no overflow: the scaling is folded in), +-inf, NaN, -0.0
(decompositions_scaled.py; each failed to lower naming its op before)."""

import pytest
import torch
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401

_GRID = torch.cat(
    [
        torch.linspace(-30, 30, 601),
        torch.tensor([3.75, -3.75, 10.0, -10.0, 0.5, -0.5, -9.2, 100.0, -100.0, 1e4, 1e30]),
        torch.tensor([float("inf"), -float("inf"), float("nan"), -0.0, 0.0, 1e-30]),
    ]
)


@pytest.mark.parametrize(
    "f",
    [torch.special.i0e, torch.special.i1e, torch.special.erfcx, torch.special.log_ndtr],
    ids=["i0e", "i1e", "erfcx", "log_ndtr"],
)
def test_against_the_cpu(f):
    torch._dynamo.reset()
    got = torch.compile(f, backend="neuron")(_GRID.to("neuron")).cpu()
    # log_ndtr's far right tail (-1e-19 at 9) is 2.1e-6 off: log1p of the erfc fit
    rtol = 5e-6 if f is torch.special.log_ndtr else 2e-6
    torch.testing.assert_close(got, f(_GRID), rtol=rtol, atol=1e-30, equal_nan=True)


@pytest.mark.parametrize("f", [torch.special.i0e, torch.special.i1e], ids=["i0e", "i1e"])
def test_bfloat16_and_int64(f):
    for x in (_GRID.bfloat16(), torch.arange(-20, 21)):
        torch._dynamo.reset()
        got = torch.compile(f, backend="neuron")(x.to("neuron")).cpu()
        torch.testing.assert_close(got, f(x), equal_nan=True)
