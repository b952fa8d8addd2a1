"""Valid inputs that failed to compile or gave other auxiliary outputs than eager
(decompositions_nn.py): clamp/fmin/fmax with broadcasting operands, batch/layer norm
statistics in eager's shape and dtype, nn.TransformerEncoder's eval fast path."""

import pytest
import torch
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401

aten = torch.ops.aten

BINARY = {
    "clamp_min widens": (lambda a, b: torch.clamp_min(a, b), (4,), (3, 4)),
    "clamp_max widens": (lambda a, b: torch.clamp_max(a, b), (3, 1), (1, 4)),
    "clamp tensors widen": (lambda a, b: torch.clamp(a, b, b + 1), (4,), (2, 4)),
    "fmin": (torch.fmin, (3, 4), (4,)),
    "fmax": (torch.fmax, (4,), (3, 1)),
}


@pytest.mark.parametrize("name", list(BINARY))
def test_broadcasting_bounds_match_cpu(name):
    f, sa, sb = BINARY[name]
    torch.manual_seed(0)
    a, b = torch.randn(sa), torch.randn(sb)
    a[0] = float("nan")
    got = torch.compile(f, backend="neuron")(a.to("neuron"), b.to("neuron")).cpu()
    torch.testing.assert_close(got, f(a, b), equal_nan=True)


NORMS = {
    "batch_norm eval": lambda x: aten.native_batch_norm(
        x,
        None,
        None,
        torch.zeros(4, device=x.device),
        torch.ones(4, device=x.device),
        False,
        0.1,
        1e-5,
    ),
    "batch_norm train": lambda x: aten.native_batch_norm(
        x, None, None, None, None, True, 0.1, 1e-5
    ),
    "layer_norm": lambda x: aten.native_layer_norm(x, [3], None, None, 1e-5),
}


@pytest.mark.parametrize("name", list(NORMS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_norm_statistics_as_eager(name, dtype):
    f = NORMS[name]
    torch.manual_seed(0)
    x = torch.randn(2, 4, 3).to(dtype)
    got = torch.compile(f, backend="neuron")(x.to("neuron"))
    for g, w in zip(got, f(x)):
        assert (g.shape, g.dtype) == (w.shape, w.dtype)
        tol = {"rtol": 1.6e-2, "atol": 1e-2} if dtype == torch.bfloat16 else {}  # the sweep's
        torch.testing.assert_close(g.cpu(), w, **tol)


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_eval_fast_path_matches_cpu(norm_first):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, norm_first=norm_first)
    m = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        want = m(x)
        got = torch.compile(m.to("neuron"), backend="neuron")(x.to("neuron")).cpu()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
