"""An ``out=`` tensor that ATen resizes takes the layout the CPU gives it: TensorIterator
restrides a resized output like its inputs (a transposed input gives a transposed
``out``, a channels-last one a channels-last ``out``), other kernels make it contiguous.
The same values and strides as the CPU, on the cached (geometry) and synchronous paths."""

import warnings

import pytest
import torch

DEV = "neuron"


def _inputs():
    g = torch.Generator().manual_seed(0)
    base = torch.randn(4, 3, generator=g)
    nchw = torch.randn(2, 3, 4, 5, generator=g)
    return {
        "transposed": base.t(),
        "contiguous": base,
        "sliced": torch.randn(6, 8, generator=g)[::2, 1::2],
        "channels_last": nchw.to(memory_format=torch.channels_last),
        "expanded": torch.randn(3, 1, generator=g).expand(3, 4),
    }


OPS = {
    "add": lambda x, out: torch.add(x, 1.5, out=out),
    "mul": lambda x, out: torch.mul(x, x, out=out),
    "neg": lambda x, out: torch.neg(x, out=out),
    "exp": lambda x, out: torch.exp(x, out=out),
    "clamp": lambda x, out: torch.clamp(x, min=-0.5, max=0.5, out=out),
    "lerp": lambda x, out: torch.lerp(x, x * 2, 0.25, out=out),
    "where": lambda x, out: torch.where(x > 0, x, x * 0.5, out=out),
    "sum_dim": lambda x, out: torch.sum(x, 0, out=out),
    "cumsum": lambda x, out: torch.cumsum(x, 0, out=out),
    "masked_select": lambda x, out: torch.masked_select(x, x > 0, out=out),
}


@pytest.mark.parametrize("layout", list(_inputs()))
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("out_shape", [(0,), (7,)], ids=["empty", "wrong_shape"])
def test_resized_out_has_the_cpus_layout(op, layout, out_shape):
    x = _inputs()[layout]
    f = OPS[op]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the resize warning of a wrong-shaped out
        cpu_out = torch.empty(out_shape)
        f(x, cpu_out)
        for _ in range(2):  # the probe's call, then the cached geometry's
            dev_out = torch.empty(out_shape, device=DEV)
            f(x.to(DEV) if layout != "expanded" else x.to(DEV)[:, :1].expand(3, 4), dev_out)
            assert dev_out.shape == cpu_out.shape
            assert dev_out.stride() == cpu_out.stride(), (dev_out.stride(), cpu_out.stride())
            torch.testing.assert_close(dev_out.cpu(), cpu_out)
