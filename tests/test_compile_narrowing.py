"""The 64-bit policy in compiled graphs: float64 computed in 32 bits, outputs in their
original dtype, so compiled and eager agree (int64 stays int64: equal to eager while
values fit int32); TORCHNEURON_NARROW_64BIT=0 keeps full width."""
import torch

import torchneuron  # noqa: F401

from compile_support import fresh_compile_state  # noqa: F401
from conftest import run_python


def _f(x, idx):
    y = (x * 1.000000001).exp().cumsum(0)
    g = torch.gather(y, 0, idx)              # gather keeps int64 indices (exempt)
    return g, idx.sum() * 3, torch.arange(5, dtype=torch.int64) * 2


def test_float64_int64_graph_matches_eager_narrowed():
    x = torch.linspace(0, 1, 100, dtype=torch.float64)
    idx = torch.tensor([0, 5, 99], dtype=torch.int64)
    xd, idxd = x.to("neuron"), idx.to("neuron")
    eager = _f(xd, idxd)
    comp = torch.compile(_f, backend="neuron")(xd, idxd)
    for e, c in zip(eager, comp):
        assert c.dtype == e.dtype                      # original dtypes restored
        assert torch.allclose(c.cpu(), e.cpu(), rtol=2e-6, atol=0)   # float32's precision
    ref = _f(x, idx)[0]
    # computed in float32: off the float64 result by float32 rounding, not by 1e-15
    err = ((comp[0].cpu() - ref).abs() / ref.abs()).max().item()
    assert 1e-10 < err < 2e-6


def test_full_width_when_narrowing_off():
    out = run_python("""
        import torch, torchneuron
        x = torch.linspace(0, 1, 100, dtype=torch.float64)
        f = lambda x: (x * 1.000000001).exp().cumsum(0)
        c = torch.compile(f, backend="neuron")(x.to("neuron")).cpu()
        print(c.dtype, (c - f(x)).abs().max().item() < 1e-12)
    """, env={"TORCHNEURON_NARROW_64BIT": "0"})
    assert out.stdout.split() == ["torch.float64", "True"]
