"""The persistent executable cache (TORCH_NEURONX_NEFF_CACHE_DIR): layout, a second
process hits it, corrupt entries are rebuilt, concurrent processes compile once,
switches that disable it."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch
from compile_support import fresh_compile_state  # noqa: F401
from conftest import run_python

import torchneuron  # noqa: F401
from torchneuron.compiler import cache

_CHILD = """
    import time, torch, torchneuron
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8)).to("neuron")
    c = torch.compile(m, backend="neuron")
    with torch.no_grad():
        y = c(torch.ones(4, 32, device="neuron")).cpu()
    r = torch.neuron.get_dynamo_metrics()[0]
    print(r["cache"], r["compile_us"], round(y.sum().item(), 4))
"""


def _entries(root):
    return sorted(
        os.path.relpath(os.path.join(d, f), root)
        for d, _, fs in os.walk(root)
        for f in fs
        if f.endswith(".neff")
    )


def test_second_process_hits_cache_layout(tmp_path):
    env = {"TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path)}
    cold = run_python(_CHILD, env=env).stdout.split()
    warm = run_python(_CHILD, env=env).stdout.split()
    assert cold[0] == "compiled" and warm[0] == "disk"
    assert cold[2] == warm[2]  # same result from the cached executable
    print(f"compile cold {float(cold[1]) / 1e3:.1f} ms, warm {float(warm[1]) / 1e3:.1f} ms")
    (entry,) = _entries(tmp_path)
    ab, cd, name = entry.split(os.sep)
    key = name[: -len(".neff")]
    assert len(key) == 64 and ab == key[:2] and cd == key[2:4]


def test_corrupt_entry_is_detected_warned_and_rebuilt(tmp_path):
    f = torch.compile(lambda x: (x @ x.T).relu(), backend="neuron")
    x = torch.randn(6, 5)
    ref = (x @ x.T).relu()
    assert torch.allclose(f(x.to("neuron")).cpu(), ref, atol=1e-5)
    root = os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"]
    (entry,) = _entries(root)
    path = os.path.join(root, entry)
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])  # truncated
    cache.clear_memory_cache()
    torch._dynamo.reset()
    with pytest.warns(RuntimeWarning, match="truncated or corrupt; rebuilding"):
        out = torch.compile(lambda x: (x @ x.T).relu(), backend="neuron")(x.to("neuron"))
    assert torch.allclose(out.cpu(), ref, atol=1e-5)
    assert torch.neuron.get_dynamo_metrics()[-1]["cache"] == "compiled"
    assert cache.decode(open(path, "rb").read()) is not None  # a valid entry again


def test_two_processes_started_together_compile_once(tmp_path):
    env = {k: v for k, v in os.environ.items()}
    env["TORCH_NEURONX_NEFF_CACHE_DIR"] = str(tmp_path)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(_CHILD)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    sources = sorted(o[0].split()[0] for o in outs)
    assert sources == ["compiled", "disk"]
    assert len(_entries(tmp_path)) == 1


@pytest.mark.parametrize(
    "var", ["TORCH_NEURONX_DISABLE_NEFF_CACHE", "TORCH_NEURONX_NEFF_DISABLE_CACHE"]
)
def test_disable_cache_writes_nothing(tmp_path, monkeypatch, var):
    monkeypatch.setenv(var, "1")
    out = torch.compile(lambda x: x * 5, backend="neuron")(torch.ones(2, device="neuron"))
    assert out.cpu().tolist() == [5.0, 5.0]
    assert _entries(os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"]) == []


def test_key_covers_compiler_settings():
    base = cache.cache_key("module", [[], []], "trn2", 2, 2, ["-O2"], "v1")
    assert base != cache.cache_key("module", [[], []], "trn2", 2, 3, ["-O3"], "v1")
    assert base != cache.cache_key("module", [[], []], "trn1", 2, 2, ["-O2"], "v1")
    assert base != cache.cache_key("module", [[], []], "trn2", 1, 2, ["-O2"], "v1")
    assert base != cache.cache_key("module", [[], []], "trn2", 2, 2, ["-O2"], "v2")
    assert base != cache.cache_key("module2", [[], []], "trn2", 2, 2, ["-O2"], "v1")
    assert base != cache.cache_key("module", [[[1], "f32"], []], "trn2", 2, 2, ["-O2"], "v1")


def test_save_and_load_cache_artifacts_carry_executables(tmp_path):
    code = """
        import sys, torch, torchneuron
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU()).to("neuron")
        if sys.argv[-1] == "load":
            torch.compiler.load_cache_artifacts(open(r"{blob}", "rb").read())
        with torch.no_grad():
            y = torch.compile(m, backend="neuron")(torch.ones(4, 32, device="neuron"))
        print(torch.neuron.get_dynamo_metrics()[0]["cache"], round(y.sum().item(), 4))
        if sys.argv[-1] == "save":
            blob, info = torch.compiler.save_cache_artifacts()
            open(r"{blob}", "wb").write(blob)
    """.format(blob=tmp_path / "artifacts.bin")
    import subprocess
    import sys as _sys

    outs = []
    for i, mode in enumerate(("save", "load")):
        env = dict(os.environ, TORCH_NEURONX_NEFF_CACHE_DIR=str(tmp_path / f"cache{i}"))
        p = subprocess.run(
            [_sys.executable, "-c", textwrap.dedent(code), mode],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert p.returncode == 0, p.stderr[-3000:]
        outs.append(p.stdout.split())
    assert outs[0][0] == "compiled" and outs[1][0] == "disk"  # the other cache was empty
    assert outs[0][1] == outs[1][1]
