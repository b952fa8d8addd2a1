"""bfloat16/float16 reductions in compiled graphs accumulate in float32, as the CPU's
(passes/semantics/upcast_low_precision_reductions.py): exact agreement with the CPU kernels."""

import pytest
import torch
import torch.nn.functional as F

import torchneuron  # noqa: F401

torch.manual_seed(0)
_X = torch.randn(4, 1024) + 0.5

_CASES = {
    "sum": lambda a: a.sum(-1),
    "sum all": lambda a: a.sum(),
    "mean": lambda a: a.mean(-1, keepdim=True),
    "cumsum": lambda a: a.cumsum(-1),
    "vector_norm": lambda a: torch.linalg.vector_norm(a, dim=-1),
    "vector_norm all": lambda a: torch.linalg.vector_norm(a * 4),  # float16: sum > 65504
    "vector_norm 1": lambda a: torch.linalg.vector_norm(a, 1, dim=-1),
    "vector_norm 3": lambda a: torch.linalg.vector_norm(a, 3, dim=(0, 1)),
    "norm": lambda a: torch.norm(a, dim=1, keepdim=True),
    "norm all": lambda a: a.norm(),
}
# within the dtype's tolerance: their decompositions round intermediates (var's mean)
_CLOSE = {
    "var": lambda a: a.var(-1),
    "normalize": lambda a: F.normalize(a, dim=-1),  # 1 float16 ulp: divides the rounded norm
    "cross_entropy": lambda a: F.cross_entropy(a, torch.arange(4, device=a.device)),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", list(_CASES) + list(_CLOSE))
def test_low_precision_reductions_match_cpu(name, dtype):
    f = _CASES.get(name) or _CLOSE[name]
    x = _X.to(dtype)
    out = torch.compile(f, backend="neuron")(x.to("neuron"))
    ref = f(x)
    assert out.dtype == ref.dtype
    tol = {} if name in _CLOSE else {"rtol": 0, "atol": 0}
    torch.testing.assert_close(out.cpu(), ref, **tol)


def test_bfloat16_sum_gradient_matches_cpu():
    def f(a):
        return (a.sum(-1) * torch.arange(4.0, device=a.device)).sum()

    a = _X.bfloat16().requires_grad_()
    an = _X.bfloat16().to("neuron").requires_grad_()
    torch.compile(f, backend="neuron")(an).backward()
    f(a).backward()
    torch.testing.assert_close(an.grad.cpu(), a.grad, rtol=0, atol=0)
