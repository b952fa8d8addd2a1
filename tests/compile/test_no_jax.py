"""The compile path runs on jaxlib alone (compiler/neuron_cc.py): `import jax` took ~0.95 s
of every process's first compiled call. Each case runs a fresh interpreter, compiles and
runs graphs (cold, then warm from the NEFF cache the first process left; also fused eager
segments) and asserts that no `jax` module was imported, that the results match the CPU
and that XLA printed nothing to stderr (jax used to set TF_CPP_MIN_LOG_LEVEL)."""

import json

from conftest import run_python

CHILD = """
import json, sys
import torch
import torchneuron  # noqa: F401

torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
x = torch.randn(8, 16)
ref = m(x)
f = torch.compile(m.to("neuron"), backend="neuron")
got = [f(x.to("neuron")).cpu()]
refs = [ref]

def pair(a):  # two outputs, one of them bfloat16 (numpy has no bfloat16)
    return (a * 2).sum(0), a.float().exp()

b = torch.randn(4, 8).to(torch.bfloat16)
got += [t.cpu() for t in torch.compile(pair, backend="neuron")(b.to("neuron"))]
refs += list(pair(b))

def aliased(a):  # outputs that alias each other, one a self-overlapping view
    y = a + 1
    return y, y[0].expand(3, 8), y.t()

got += [t.cpu() for t in torch.compile(aliased, backend="neuron")(b.float().to("neuron"))]
refs += list(aliased(b.float()))

def step(p, g):  # a mutated input (an optimizer-like update)
    p.sub_(g * 0.1)
    return p.sum()

p, g = torch.randn(32), torch.randn(32)
pn = p.to("neuron")
got += [torch.compile(step, backend="neuron")(pn, g.to("neuron")).cpu(), pn.cpu()]
refs += [step(p, g), p]
torch.neuron.synchronize()
print(json.dumps({
    "jax": sorted(k for k in sys.modules if k == "jax" or k.startswith("jax.")),
    "equal": [bool(torch.allclose(a, r, rtol=1e-2 if r.dtype == torch.bfloat16 else 1e-5,
                                  atol=1e-5)) and a.dtype == r.dtype and a.shape == r.shape
              for a, r in zip(got, refs)],
}))
"""


def _run(env):
    proc = run_python(CHILD, env=env, timeout=300)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["jax"] == [], out["jax"]
    assert all(out["equal"]), out["equal"]
    assert "pjrt_client" not in proc.stderr, proc.stderr[-2000:]
    return proc


def test_compiled_runs_cold_and_warm_without_importing_jax(tmp_path):
    env = {"TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path)}
    _run(env)  # cold: compiles, stores the executables
    _run(env)  # warm: deserializes them (the prefetch thread, then the graph index)


def test_fused_segments_run_without_importing_jax():
    # adaptive eager execution with fusion compiles its segments through neuron_cc too
    code = """
    import json, sys
    import torch, torchneuron
    def prog(dev):
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 16))
        x = torch.randn(4, 8, 32, generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            return (m.to(dev)(x.to(dev)) * 2 + 1).relu().cpu()
    ref = prog("cpu")
    got = [prog("neuron") for _ in range(3)]  # unfused, compiled, cached
    print(json.dumps({
        "jax": sorted(k for k in sys.modules if k == "jax" or k.startswith("jax.")),
        "fused": torch.neuron.concatenation_stats()["fused"],
        "diff": max(float((g - ref).abs().max()) for g in got),
    }))
    """
    env = {
        "TORCH_NEURONX_ENABLE_CONCATENATION": "1",
        "TORCHNEURON_CONCATENATION_FUSE": "1",
        "TORCH_NEURONX_CONCATENATION_QUEUE_LOW_THRESHOLD": "0",
        "TORCHNEURON_CONCATENATION_MIN_OPS": "2",
    }
    proc = run_python(code, env=env, timeout=300)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["jax"] == [] and out["diff"] <= 1e-5, out
    assert out["fused"]["cache_hits"] >= 1 and out["fused"]["ops_fused"] >= 2, out
    assert "pjrt_client" not in proc.stderr, proc.stderr[-2000:]
