"""Attention kernels the compile path refused naming their op (decompositions_attention.py),
compiled against the CPU's eager kernels: values, and every output's shape and dtype
(the logsumexp included); and eager fusion, whose segments holding them were refused."""

import json
import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401

aten = torch.ops.aten


def _compare(f, *args, exact_nan=True):
    ref = f(*args)
    torch._dynamo.reset()
    dev = [a.to("neuron") if isinstance(a, torch.Tensor) else a for a in args]
    got = torch.compile(f, backend="neuron")(*dev)
    ref = ref if isinstance(ref, tuple) else (ref,)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        g = g.cpu()
        assert g.shape == r.shape and g.dtype == r.dtype, (g.shape, r.shape, g.dtype, r.dtype)
        torch.testing.assert_close(g, r, equal_nan=exact_nan, atol=2e-6, rtol=2e-5)
        assert torch.equal(g.isnan(), r.isnan())


def _masks():
    g = torch.Generator().manual_seed(1)
    src = torch.rand(4, 4, generator=g) > 0.6
    src[1] = True  # a query row masked throughout: NaN on the CPU
    pad = torch.tensor([[False, False, True, False], [True, True, True, True]])
    full = torch.rand(2, 3, 4, 4, generator=g) > 0.5
    full[0, 0, 1] = True
    full[1, 2, :, 3] = True
    return src, pad, full


@pytest.mark.parametrize(
    "kind,dim",
    [
        ("src", None),  # mask_type 0: (L, L) read as (1, 1, L, L)
        ("src", 2),
        ("src", 1),
        ("pad", None),  # mask_type 1: (B, L) read as (B, 1, 1, L)
        ("pad", 2),
        ("full", None),  # mask_type 2 (and None): the input's shape
        ("full", 2),
        ("full", 1),
        ("none", -1),
    ],
)
def test_masked_softmax(kind, dim):
    x = torch.randn(2, 3, 4, 4, generator=torch.Generator().manual_seed(0))
    src, pad, full = _masks()
    mask, mask_type = {"src": (src, 0), "pad": (pad, 1), "full": (full, 2)}.get(kind, (full, None))
    ref = aten._masked_softmax(x, mask, dim, mask_type)
    if dim is None:  # each mask holds a row masked throughout: NaN, as the CPU gives
        assert ref.isnan().any()
    _compare(lambda x, m: aten._masked_softmax(x, m, dim, mask_type), x, mask)


def test_masked_softmax_of_a_3d_input():
    g = torch.Generator().manual_seed(2)
    x, m = torch.randn(2, 5, 6, generator=g), torch.rand(2, 5, 6, generator=g) > 0.5
    _compare(lambda x, m: aten._masked_softmax(x, m, 1, None), x, m)


@pytest.mark.parametrize("t,d,heads", [(5, 8, 2), (7, 12, 4), (3, 6, 1)])
def test_transform_bias_rescale_qkv(t, d, heads):
    g = torch.Generator().manual_seed(3)
    qkv, b = torch.randn(2, t, 3 * d, generator=g), torch.randn(3 * d, generator=g)
    _compare(lambda x, b: aten._transform_bias_rescale_qkv(x, b, heads), qkv, b)


def _qkv(lq=5, lk=7, e=4, seed=4):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(2, 3, n, e, generator=g) for n in (lq, lk, lk))


def _float_mask(lq=5, lk=7):
    keep = torch.rand(2, 1, lq, lk, generator=torch.Generator().manual_seed(5)) > 0.3
    keep[:, :, :, 0] = True
    keep[0, 0, 2] = False  # a row masked throughout: output and logsumexp 0 on the CPU
    return torch.zeros(keep.shape).masked_fill(~keep, float("-inf"))


_FLASH_CASES = {
    "causal": dict(is_causal=True),
    "causal_square": dict(is_causal=True, lk=5),
    "plain": dict(),
    "scale": dict(scale=0.3),
    "float_mask": dict(mask=True),
    "causal_mask_scale": dict(is_causal=True, mask=True, scale=0.7),
}


def _flash_args(case):
    c = dict(_FLASH_CASES[case])
    lk = c.pop("lk", 7)
    q, k, v = _qkv(lk=lk)
    mask = _float_mask(lk=lk) if c.pop("mask", False) else None
    return q, k, v, mask, c.get("is_causal", False), c.get("scale")


@pytest.mark.parametrize("case", sorted(_FLASH_CASES))
def test_flash_attention_for_cpu_and_its_logsumexp(case):
    q, k, v, mask, causal, scale = _flash_args(case)

    def f(q, k, v, *m):
        return aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, 0.0, causal, attn_mask=m[0] if m else None, scale=scale
        )

    args = (q, k, v) + ((mask,) if mask is not None else ())
    out, lse = f(*args)
    assert lse.shape == (2, 3, 5) and lse.dtype == torch.float32
    _compare(f, *args)


@pytest.mark.parametrize("case", sorted(_FLASH_CASES))
def test_flash_attention_for_cpu_backward(case):
    q, k, v, mask, causal, scale = _flash_args(case)
    kw = dict(attn_mask=mask, scale=scale)
    out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, **kw)
    go = torch.randn(out.shape, generator=torch.Generator().manual_seed(6))

    def f(go, q, k, v, out, lse, *m):
        return aten._scaled_dot_product_flash_attention_for_cpu_backward(
            go, q, k, v, out, lse, 0.0, causal, attn_mask=m[0] if m else None, scale=scale
        )

    args = (go, q, k, v, out, lse) + ((mask,) if mask is not None else ())
    _compare(f, *args)


def test_flash_attention_for_cpu_of_bfloat16_keeps_a_float32_logsumexp():
    q, k, v = (t.bfloat16() for t in _qkv())

    def f(q, k, v):
        return aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, True)

    ref = f(q, k, v)
    torch._dynamo.reset()
    got = torch.compile(f, backend="neuron")(*(t.to("neuron") for t in (q, k, v)))
    for g, r in zip(got, ref):
        assert g.shape == r.shape and g.dtype == r.dtype
        torch.testing.assert_close(g.cpu(), r, atol=2e-2, rtol=2e-2)
    assert math.isfinite(float(got[1].cpu().abs().max()))


# Eager fusion (docs/design/concatenation-engine.md), as tests/device/test_fused_segments.py
# runs it: a child process, the program three times on neuron against the CPU.
_PRELUDE = """
import json, torch, torchneuron
import torch.nn.functional as F
def data(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
"""

_MAIN = """
cpu = prog("cpu")
torch.neuron.reset_concatenation_stats()
diffs = []
for _ in range(3):
    got = prog("neuron")
    diffs.append(max(float((g.double() - c.double()).abs().max()) for g, c in zip(got, cpu)))
from torchneuron.compiler import fused
print(json.dumps({"stats": torch.neuron.concatenation_stats()["fused"], "diffs": diffs,
                  "refusals": fused.refusals()}))
"""

_FUSED = {
    # the eager MultiheadAttention fast path's kernels between ops of the run
    "fast_path": """
def prog(dev):
    x = data(2, 5, 24).to(dev) * 0.5
    b = data(24, seed=1).to(dev)
    q, k, v = torch.ops.aten._transform_bias_rescale_qkv(x, b, 2)
    s = q @ k.transpose(-1, -2)
    pad = torch.tensor([[False] * 5, [False, False, True, False, True]]).to(dev)
    p = torch.ops.aten._masked_softmax(s, pad, None, 1)
    return [((p @ v) * 2).sin().cpu()]
""",
    # a causal SDPA under autograd: its logsumexp is held for the flash-attention backward
    "sdpa_training": """
def prog(dev):
    q, k, v = (data(2, 2, 8, 4, seed=s).to(dev).requires_grad_() for s in range(3))
    o = F.scaled_dot_product_attention(q * 1.5, k, v, is_causal=True)
    (o.sin() * 2).sum().backward()
    return [q.grad.cpu(), k.grad.cpu(), v.grad.cpu(), o.detach().cpu()]
""",
}


def _run_fused(body: str) -> dict:
    mine = (
        "TORCH_NEURONX_ENABLE_CONCATENATION",
        "TORCH_NEURONX_CONCATENATION_",
        "TORCHNEURON_CONC",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(mine)}
    env.update(
        TORCH_NEURONX_ENABLE_CONCATENATION="1",
        TORCHNEURON_CONCATENATION_FUSE="1",
        TORCH_NEURONX_CONCATENATION_QUEUE_LOW_THRESHOLD="0",
        TORCHNEURON_CONCATENATION_MIN_OPS="2",
    )
    code = _PRELUDE + textwrap.dedent(body) + _MAIN
    p = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", sorted(_FUSED))
def test_fused_segments_holding_attention_kernels_are_not_refused(case):
    r = _run_fused(_FUSED[case])
    assert max(r["diffs"]) <= 1e-5, r
    st = r["stats"]
    assert st["unfusable"] == 0 and not r["refusals"], r
    assert st["cache_hits"] >= 1 and st["ops_fused"] >= 2, r
