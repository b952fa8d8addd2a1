"""Adaptive eager execution with fusion (TORCH_NEURONX_ENABLE_CONCATENATION=1,
TORCHNEURON_CONCATENATION_FUSE=1; csrc/aten/concatenation_fuse.h, compiler/fused.py): runs of
buffered ops become one compiled executable at their signature's second sight and are
replayed after. Each case runs in a child process (the variables are read once): the
program runs three times on neuron (first sight: unfused; second: compiled; third: the cached
executable) and each result is compared with the same program on the CPU."""

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

_PRELUDE = """
import json, torch, torchneuron
torch.manual_seed(0)
def data(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
"""

_MAIN = """
cpu = prog("cpu")
torch.neuron.reset_concatenation_stats()
diffs = []
for _ in range(3):
    got = prog("neuron")
    cpu_t = cpu if isinstance(cpu, (list, tuple)) else [cpu]
    got_t = got if isinstance(got, (list, tuple)) else [got]
    assert len(cpu_t) == len(got_t)
    diffs.append(max(float((g.double() - c.double()).abs().max()) for g, c in zip(got_t, cpu_t)))
from torchneuron.compiler import fused
print(json.dumps({"stats": torch.neuron.concatenation_stats()["fused"], "diffs": diffs,
                  "refusals": fused.refusals()}))
"""

CASES = {
    # views of one input merged into a flat input with a storage offset: a write through a
    # row then a read of a column (the write landed 2 elements off), and a read-only
    # strided view after a dropped one (read 2 elements off): as_strided addresses the
    # storage, so the engine gives it absolute offsets; a write through it is refused
    "row_write_column_read": """
def prog(dev):
    a = torch.arange(12.).reshape(3, 4).to(dev)
    a[1].mul_(2)
    r = a[:, 2].neg()
    return [a.cpu(), r.cpu()]
""",
    "strided_reads_of_one_input": """
def prog(dev):
    p0, p1 = data(6, 6).to(dev), data(6, 6, seed=1).to(dev)
    a = (p0 * 2).clamp(-50, 50)
    z = p1[:, 2].abs()
    del z
    return (a[1:3, ::2] + p1[1:3, ::2]).cpu()
""",
    # layers of a model: views of results between matmuls (reshapes of addmm's output)
    "layers": """
def prog(dev):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.LayerNorm(64),
                            torch.nn.Linear(64, 16)).to(dev)
    x = data(4, 8, 32).to(dev)
    with torch.no_grad():
        y = m(x)
        return (y * 2 + 1).relu().cpu()
""",
    # in-place writes to the segment's inputs, directly and through views
    "inplace_inputs": """
def prog(dev):
    x = data(8, 6).to(dev)
    w = data(6, 6, seed=1).to(dev)
    y = x @ w
    x.add_(1)
    x[:, 1].mul_(3)
    x.t()[2].sub_(y[:, 0])
    z = x * 2 + y
    return [x.cpu(), z.cpu()]
""",
    # a result read through a permuted view and written through a view
    "views_of_results": """
def prog(dev):
    a = data(6, 8).to(dev)
    b = data(8, 10, seed=1).to(dev)
    y = a @ b
    y[:, :2].zero_()
    t = y.t() + 1
    u = t.reshape(5, 12).sum(1)
    y[1].fill_(3.0)
    return [y.cpu(), u.cpu(), (t * 2).cpu()]
""",
    # inputs dense in another order: a Linear's transposed weight and a permuted tensor
    # (passed in memory order, permuted back in the graph), and a transposed input the
    # segment writes (passed as it is)
    "transposed_inputs": """
def prog(dev):
    w = data(16, 8).to(dev)
    v = data(4, 6, 5, seed=1).to(dev).permute(2, 0, 1)
    u = data(8, 6, seed=2).to(dev)
    x = data(5, 16, seed=3).to(dev)
    y = torch.nn.functional.linear(x, w.t())
    ut = u.t()
    ut.mul_(2)
    z = y @ ut.t()
    return [y.cpu(), z.cpu(), (v * 2).sum(0).cpu(), u.cpu()]
""",
    # attention: its CPU kernel's result has permuted strides, read through reshapes
    "attention": """
def prog(dev):
    q, k, v = (data(2, 4, 16, 8, seed=s).to(dev) for s in range(3))
    mask = torch.ones(16, 16, dtype=torch.bool).tril().to(dev)
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    o = o.transpose(1, 2).reshape(2, 16, 32)
    return (o @ data(32, 8, seed=4).to(dev)).tanh().cpu()
""",
    # Python numbers are part of the signature: each value its own executable; bools
    # stay unfused
    "python_numbers": """
def prog(dev):
    x = data(16).to(dev)
    outs = []
    for i in range(3):
        x = (x * (i + 1.5) - i).sin()
        outs.append(x.cpu())
    # a Python bool stays outside segments (a segment with it failed to compile)
    m = ((x > 0) & True) | (x < -0.5)
    outs.append((x * m).cos().cpu())
    return outs
""",
    # overlapping inputs (two views of one storage), one written
    "overlapping_inputs": """
def prog(dev):
    base = data(6, 8).to(dev)
    a, b = base[:, :4], base[:, 2:6]
    c = a * 2
    a.add_(b)
    d = b * c
    return [base.cpu(), d.cpu()]
""",
    # random ops stay unfused: the same numbers as unfused eager and the CPU
    "random_between": """
def prog(dev):
    torch.manual_seed(3)
    x = data(64).to(dev)
    y = (x * 2).sin()
    z = torch.nn.functional.dropout(y, 0.5, training=True)
    return (z + 1).cos().cpu()
""",
    # 64-bit tensors stay unfused (the compile path narrows them)
    "int64_between": """
def prog(dev):
    x = data(10, 4).to(dev)
    idx = torch.tensor([3, 1, 4, 1, 5], device=dev)
    y = (x * 3).exp()
    z = y.index_select(0, idx)
    return (z.log() + 1).cpu()
""",
    # an op the compile path refuses: the eager attention fast path's masked softmax with its
    # decomposition taken out (decompositions_attention.py lowers it; it was
    # replication_pad1d_backward, then _masked_softmax itself, until the compile path lowered
    # each; no other op eager neuron runs inside a segment was found still refused): torch-mlir's
    # "failed to legalize" refusal, the signature unfusable, results unfused and right
    "refused_op": """
from torchneuron.compiler.decompositions import decomposition_table
decomposition_table().pop(torch.ops.aten._masked_softmax.default)
def prog(dev):
    x = data(2, 3, 4).to(dev) * 2
    mask = (data(2, 3, 4, seed=1) > 0).to(dev)
    r = torch.ops.aten._masked_softmax(x, mask, None, None)
    return (r + 1).sin().cpu()
""",
    # a flush while a Python dispatch mode is active (the first call of a compiled function
    # runs under one): the record of `a * 1.5` read its Python number through the mode and
    # failed, and the buffer was lost (`a` all zeros)
    "under_a_dispatch_mode": """
def prog(dev):
    from torch.utils._python_dispatch import TorchDispatchMode
    class Passthrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
    x = data(8).to(dev)
    a = x
    for _ in range(8):
        a = a * 1.5 + 0.1
    with Passthrough():
        if dev == "neuron":
            torch.neuron.synchronize()
    f = torch.compile(lambda t: t.sin() * 2, backend="neuron") if dev == "neuron" else (
        lambda t: t.sin() * 2)
    b = a
    for _ in range(8):
        b = b * 0.5 + 0.2
    return [a.cpu(), f(b).cpu()]
""",
    # a training loop: backward ops (the autograd engine's thread) and AdamW join too
    "training": """
def prog(dev):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4)).to(dev)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    x, t = data(8, 16).to(dev), data(8, 4, seed=1).to(dev)
    losses = []
    for _ in range(3):
        loss = ((m(x) - t) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach().cpu())
    return losses + [p.detach().cpu() for p in m.parameters()]
""",
}


def _run(body: str, env: dict, main: str = _MAIN) -> dict:
    code = _PRELUDE + textwrap.dedent(body) + main
    mine = (
        "TORCH_NEURONX_ENABLE_CONCATENATION",
        "TORCH_NEURONX_CONCATENATION_",
        "TORCHNEURON_CONC",
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith(mine)}
    env = {
        "TORCH_NEURONX_ENABLE_CONCATENATION": "1",
        "TORCHNEURON_CONCATENATION_FUSE": "1",
        "TORCH_NEURONX_CONCATENATION_QUEUE_LOW_THRESHOLD": "0",
        "TORCHNEURON_CONCATENATION_MIN_OPS": "2",
        **env,
    }
    p = subprocess.run(
        [sys.executable, "-c", code],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


# Cases whose every run must fuse something from its third run on (the others test what
# stays unfused: their ops around the boundary may or may not form runs).
_FUSES = {
    "layers",
    "inplace_inputs",
    "views_of_results",
    "transposed_inputs",
    "attention",
    "overlapping_inputs",
    "under_a_dispatch_mode",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_segments_give_the_cpu_result(case):
    r = _run(CASES[case], {})
    assert max(r["diffs"]) <= 1e-5, r
    st = r["stats"]
    if case in _FUSES or case == "training":
        assert st["cache_hits"] >= 1 and st["ops_fused"] >= 2, r
    if case == "refused_op":
        assert st["unfusable"] >= 1 and any("_masked_softmax" in e for e in r["refusals"]), r
    if case == "row_write_column_read":  # a write through as_strided of a merged input
        assert st["unfusable"] >= 1 and any("as_strided" in e for e in r["refusals"]), r
    elif case != "refused_op":
        assert st["unfusable"] == 0, r


def test_fusion_needs_both_variables():
    # TORCHNEURON_CONCATENATION_FUSE=1 alone, or the buffering alone, fuses nothing
    for env in (
        {"TORCH_NEURONX_ENABLE_CONCATENATION": "0"},
        {"TORCHNEURON_CONCATENATION_FUSE": "0"},
    ):
        r = _run(CASES["layers"], env)
        assert max(r["diffs"]) == 0.0 and r["stats"]["segments"] == 0, r


def test_a_result_nobody_holds_is_not_written_and_one_held_is():
    # skip-intermediate: y is dropped before the flush, z is held; z right, the run fused
    body = """
def prog(dev):
    x = data(32, 32).to(dev)
    y = (x @ x).sin()
    z = (y * 2).cos()
    del y
    return z.cpu()
"""
    r = _run(body, {})
    assert max(r["diffs"]) <= 1e-5 and r["stats"]["cache_hits"] >= 1, r


def test_the_profiler_shows_a_fused_segment_as_one_kernel_of_its_ops():
    # flushed by a device-to-host copy, the fused launch had been recorded inside the
    # copy's row ("Memcpy DtoH", the copy's correlation id)
    main = """
from torch.profiler import profile, ProfilerActivity
x = data(8, 8).to("neuron")
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as p:
    for i in range(4):
        ((x * 2).exp() + x).softmax(-1).cpu()
dev = [e for e in p.events() if e.device_type != torch.autograd.DeviceType.CPU]
copies = [e.device_time_total for e in dev if e.name.startswith("Memcpy DtoH")]
print(json.dumps({"names": sorted({e.name for e in dev}), "copies": copies,
                  "stats": torch.neuron.concatenation_stats()["fused"]}))
"""
    r = _run("", {}, main)
    fused = [n for n in r["names"] if n.startswith("fused_")]
    # the ops, then 8 hex digits of the signature (the same in every process)
    assert len(fused) == 1, r
    assert re.fullmatch(r"fused_mul_exp_add__softmax_[0-9a-f]{8}_0_inference_0", fused[0]), r
    assert r["stats"]["cache_hits"] >= 1 and len(r["copies"]) == 4, r
    # the executable writes the result tensors eager handed out: no copy after it
    assert not any(n.startswith("Memcpy DtoD") for n in r["names"]), r


def test_only_read_only_inputs_dense_in_another_order_are_permuted():
    import torch

    from torchneuron.compiler import fused

    w = torch.randn(16, 8)
    v = torch.randn(4, 6, 5).permute(2, 0, 1)
    ins = [w.t(), v, w, w.t(), torch.randn(1, 8).expand(4, 8), w[:, ::2].t()]
    assert fused.memory_orders(ins, written={3}) == {0: [1, 0], 1: [1, 2, 0]}
    for i, perm in fused.memory_orders(ins, set()).items():
        assert ins[i].permute(perm).is_contiguous()


_FLOATS_MAIN = """
cpu = prog("cpu")
torch.neuron.reset_concatenation_stats()
got = prog("neuron")
from torchneuron.compiler import fused
diffs = [max(float((g.double() - c.double()).abs().max()) for g, c in zip(gs, cs))
         for gs, cs in zip(got, cpu)]
print(json.dumps({"diffs": diffs, "stats": torch.neuron.concatenation_stats()["fused"],
                  "refusals": fused.refusals()}))
"""

# Python floats that change every step (an optimizer's step size and bias corrections,
# AdamW's default capturable=False): inputs of the fused executable, not constants of its
# signature, so the steps replay one executable with each step's values. Six steps: each
# signature is seen first at step 0 (run unfused), compiled at step 1, replayed after.
_CHANGING_FLOATS = """
def step(xs, gs, i):
    s = 1.0 + 0.37 * i
    torch._foreach_div_(xs, [s, 2 * s])                # div_.Tensor, a wrapped number
    torch._foreach_mul_(xs, 0.9)                       # mul_.Scalar
    torch._foreach_lerp_(xs, gs, 0.1 + 0.05 * i)       # lerp_.Scalar
    torch._foreach_addcdiv_(xs, gs, [g.abs() + 1 for g in gs], [-0.01 * s, 0.02 * s])
    torch._foreach_addcmul_(xs, gs, gs, 0.5 / s)
    xs[0].add_(gs[0], alpha=0.3 * s)
    xs[1].sub_(gs[1], alpha=-0.2 / s)
    return [x * (1.5 + i) for x in xs]                 # mul.Tensor, a wrapped number

def prog(dev):
    xs = [data(6, 5).to(dev), data(7, seed=1).to(dev)]
    gs = [data(6, 5, seed=2).to(dev), data(7, seed=3).to(dev)]
    return [[t.cpu() for t in step(xs, gs, i)] + [x.cpu().clone() for x in xs] for i in range(6)]
"""


def test_changing_python_floats_replay_one_executable():
    r = _run(_CHANGING_FLOATS, {}, _FLOATS_MAIN)
    assert max(r["diffs"]) <= 1e-5, r
    st = r["stats"]
    # keyed by value, every step's run was a first sight: no hit, all unfused
    assert st["cache_misses"] == st["compiles"] and st["cache_hits"] >= 4 * st["compiles"] > 0, r
    # one segment a step: every op joins it (_foreach_mul_/_foreach_lerp_ reach the device
    # as mul_.Scalar/lerp_.Scalar, native; through ATen's out= forms they did not join)
    assert st["compiles"] == 1 and st["unfusable"] == 0, r


def test_addcdiv_with_a_float_input_keeps_the_cpu_order():
    # ATen computes self + (value * t1) / t2: value * t1 overflows where t1 / t2 does not
    body = """
def prog(dev):
    x = torch.zeros(4).to(dev)
    t1 = torch.tensor([1e10, 3.0, 1e20, 1e-20]).to(dev)
    return [[torch.addcdiv(x, t1, t1, value=1e30 * (1 + i)).neg().cpu()] for i in range(6)]
"""
    main = _FLOATS_MAIN.replace(
        "max(float((g.double() - c.double()).abs().max())", "max(float(not torch.equal(g, c))"
    )
    r = _run(body, {}, main)
    assert r["diffs"] == [0.0] * 6 and r["stats"]["cache_hits"] >= 4, r


def test_adamw_default_replays_its_segments():
    body = """
def prog(dev):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    m = m.to(dev)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2, foreach=True)  # capturable=False
    x, t = data(8, 16).to(dev), data(8, 4, seed=1).to(dev)
    out = []
    for _ in range(6):
        loss = ((m(x) - t) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        out.append([loss.detach().cpu()] + [p.detach().cpu().clone() for p in m.parameters()])
    return out
"""
    r = _run(body, {}, _FLOATS_MAIN)
    assert max(r["diffs"]) <= 1e-5, r
    st = r["stats"]
    # step 0 also makes the optimizer's state (a signature of its own); steps 1 to 5 share
    # theirs: first sight at step 1, compiled at step 2, replayed at steps 3 to 5
    assert st["cache_hits"] >= 3 * st["compiles"] > 0 and st["unfusable"] == 0, r
    assert st["cache_misses"] <= 2 * st["compiles"], r


def test_16_bit_tensors_keep_their_floats_in_the_signature():
    # bfloat16 with a Python float computes in float32 in ATen's CPU kernels: such a value
    # stays a constant of the signature (each step's is new: run unfused, the CPU's bits)
    r = _run(_CHANGING_FLOATS.replace(".to(dev)", ".to(dev, torch.bfloat16)"), {}, _FLOATS_MAIN)
    assert max(r["diffs"]) == 0.0, r
    assert r["stats"]["cache_hits"] == 0 and r["stats"]["cache_misses"] >= 6, r
