"""Adaptive eager execution's buffering (TORCH_NEURONX_ENABLE_CONCATENATION=1,
csrc/aten/concatenation.h): native kernels wait in their stream's buffer, and every way the
host or another stream can observe their results flushes it first. Each case runs in a child
process (the variables are read once) and compares with the same program on the CPU."""

import os
import subprocess
import sys
import textwrap

import pytest

_PRELUDE = """
import json, threading, torch, torchneuron
def run(dev):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(256, 256, generator=g).to(dev)
    x = a
    for _ in range(20):  # keeps the stream busy: what follows is buffered
        x = (x @ a).tanh()
    return a, x
"""

CASES = {
    # a host read (.cpu(): a device-to-host copy, itself a launch) flushes the stream
    "host_read": """
def prog(dev):
    a, x = run(dev)
    for _ in range(100):
        x = x * 1.001 + 0.001
    return x.cpu()
""",
    # an event recorded on one stream and waited on by another orders the second
    # stream's kernels after the first's buffered ones
    "streams_and_events": """
def prog(dev):
    if dev == "cpu":
        a, x = run(dev)
        return (x * 2 + 1).sum(0)
    s1, s2 = torch.neuron.Stream(), torch.neuron.Stream()
    with torch.neuron.stream(s1):
        a, x = run(dev)
        y = x * 2
        e = torch.neuron.Event()
        e.record(s1)
    with torch.neuron.stream(s2):
        s2.wait_event(e)
        z = (y + 1).sum(0)
    torch.neuron.synchronize()
    return z.cpu()
""",
    # in-place ops and views on buffered results, then a reduction read as a Python number
    "in_place_and_views": """
def prog(dev):
    a, x = run(dev)
    x[0].mul_(3.0)
    x.t()[1:4].add_(1.0)
    v = x.view(-1)[::7]
    v.clamp_(max=0.5)
    return torch.tensor([x.sum().item(), v.mean().item()])
""",
    # autograd: the backward's kernels are buffered too; the gradient is read by the host
    "autograd": """
def prog(dev):
    a, x = run(dev)
    w = a.clone().requires_grad_()
    loss = ((x @ w).relu() ** 2).mean()
    loss.backward()
    return torch.cat([loss.detach().reshape(1).cpu(), w.grad.cpu().reshape(-1)[:100]])
""",
    # random draws keep the generator's order (reseeding waits for queued draws)
    "random": """
def prog(dev):
    a, x = run(dev)
    torch.manual_seed(5)
    d = torch.nn.functional.dropout(x, 0.5)
    torch.manual_seed(5)
    e = torch.nn.functional.dropout(x, 0.5)
    return torch.stack([(d - e).abs().max(), ((d == 0) == (e == 0)).all().float()]).cpu()
""",
    # another thread issuing to the same device, joined before the read
    "threads": """
def prog(dev):
    a, x = run(dev)
    out = {}
    def worker():
        out["y"] = (x * 3 - 1).sum()
    t = threading.Thread(target=worker); t.start(); t.join()
    return torch.stack([out["y"], (x * 2).sum()]).cpu()
""",
}


def _run(body: str, env: dict) -> subprocess.CompletedProcess:
    code = (
        _PRELUDE
        + textwrap.dedent(body)
        + """
cpu = prog("cpu")
torch.neuron.reset_concatenation_stats()
got = prog("neuron")
print(json.dumps({"stats": torch.neuron.concatenation_stats(),
                  "diff": float((got.double() - cpu.double()).abs().max())}))
"""
    )
    # the case's variables alone (make test-concatenation runs this file with its own set)
    mine = ("TORCH_NEURONX_ENABLE_CONCATENATION", "TORCH_NEURONX_CONCATENATION_", "NEURON_LAUNCH_B")
    base = {k: v for k, v in os.environ.items() if not k.startswith(mine)}
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _result(body, **env):
    import json

    p = _run(body, {"TORCH_NEURONX_ENABLE_CONCATENATION": "1", **env})
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", sorted(CASES))
def test_buffered_kernels_give_the_cpu_result(case):
    # threshold 0: every native kernel is buffered until a flush point
    r = _result(CASES[case], TORCH_NEURONX_CONCATENATION_QUEUE_LOW_THRESHOLD="0")
    assert r["diff"] <= 1e-4, r
    assert r["stats"]["buffered"] > 40 and r["stats"]["direct"] == 0, r
    assert sum(r["stats"]["flushes"].values()) >= 1, r


def test_buffer_limit_and_default_threshold():
    r = _result(
        CASES["host_read"],
        TORCH_NEURONX_CONCATENATION_QUEUE_LOW_THRESHOLD="0",
        TORCH_NEURONX_CONCATENATION_BUFFER_SIZE_LIMIT="16",
    )
    assert r["diff"] <= 1e-4 and r["stats"]["flushes"]["limit"] >= 10, r
    # the default threshold (15 queued kernels): the first kernels go at once
    r = _result(CASES["host_read"])
    assert r["diff"] <= 1e-4 and r["stats"]["direct"] >= 15, r


def test_eager_ops_after_compiled_ones_at_the_default_threshold():
    # an eager op issued while a compiled graph's kernel was queued hung at once: its
    # direct enqueue waits (a queued compiled kernel takes the GIL), and the wait's flush
    # took the buffer's lock this thread held. Also from two threads at once.
    body = """
def prog(dev):
    import threading
    f = (lambda t: (t @ t).tanh() @ t) if dev == "cpu" else torch.compile(
        lambda t: (t @ t).tanh() @ t, backend="neuron")
    x = torch.randn(96, 96, generator=torch.Generator().manual_seed(0)).to(dev) / 10
    outs = []
    def eager():
        z = x
        for _ in range(300):
            z = (z * 0.999).tanh()
        outs.append(z)
    t = threading.Thread(target=eager)
    t.start()
    for _ in range(20):
        w = f(x) + 1
    t.join()
    return (w + outs[0]).cpu()
"""
    r = _result(body)
    assert r["diff"] <= 1e-4 and r["stats"]["buffered"] > 0, r


def test_buffered_kernels_go_when_the_stream_runs_low_without_a_host_launch():
    # the host issues work and turns to something else: when the stream's queue runs
    # low, the buffered kernels are enqueued then (the flusher), not at the next launch
    # or wait (they had sat in the buffer while the device was idle)
    body = """
def prog(dev):
    import time
    a, x = run(dev)
    for _ in range(200):
        x = (x * 1.001).tanh()
    if dev == "neuron":
        deadline = time.monotonic() + 120
        while torch.neuron.concatenation_stats()["flushes"]["queue_low"] == 0:
            assert time.monotonic() < deadline, "no queue_low flush"
            time.sleep(0.01)
        f = torch.neuron.concatenation_stats()["flushes"]
        assert f["wait"] == f["launch"] == f["event"] == 0, f
    return x.cpu()
"""
    r = _result(body)
    assert r["diff"] <= 1e-4 and r["stats"]["buffered"] > 0, r
    assert r["stats"]["flushes"]["queue_low"] >= 1, r


@pytest.mark.parametrize(
    "env",
    [
        {"TORCH_NEURONX_ENABLE_CONCATENATION": "true"},
        {"TORCH_NEURONX_CONCATENATION_BUFFER_SIZE_LIMIT": "1e3"},
        {"TORCH_NEURONX_CONCATENATION_QUEUE_LOW_THRESHOLD": "abc"},
        {"TORCH_NEURONX_CONCATENATION_QUEUE_LOW_THRESHOLD": "-1"},
    ],
)
def test_a_bad_value_is_an_error_naming_the_variable(env):
    # read silently before: "1e3" as 1, "abc" as the default, "true" as off
    code = """
import torch, torchneuron
try:
    (torch.ones(4, device="neuron") + 1).cpu()
    print("no error")
except ValueError as e:
    print("ValueError", e)
"""
    full = {"TORCH_NEURONX_ENABLE_CONCATENATION": "1", **env}
    mine = ("TORCH_NEURONX_ENABLE_CONCATENATION", "TORCH_NEURONX_CONCATENATION_")
    base = {k: v for k, v in os.environ.items() if not k.startswith(mine)}
    p = subprocess.run(
        [sys.executable, "-c", code],
        env={**base, **full},
        capture_output=True,
        text=True,
        timeout=120,
    )
    name, value = next(iter(env.items()))
    assert f"ValueError {name}='{value}'" in p.stdout, p.stdout + p.stderr[-2000:]


def test_off_by_default_and_under_launch_blocking():
    import json

    for env in ({}, {"TORCH_NEURONX_ENABLE_CONCATENATION": "1", "NEURON_LAUNCH_BLOCKING": "1"}):
        p = _run(CASES["host_read"], env)
        assert p.returncode == 0, p.stderr[-3000:]
        r = json.loads(p.stdout.strip().splitlines()[-1])
        assert r["diff"] <= 1e-4 and r["stats"]["buffered"] == r["stats"]["direct"] == 0, r


def test_kernels_after_the_exit_drain_are_not_buffered():
    # an atexit handler registered before torchneuron's import runs after its drain: its
    # kernels must still run (a buffered one would be dropped with the process)
    code = textwrap.dedent(
        """
        import atexit
        def late():
            import torch
            x = torch.ones(64, device="neuron")
            for _ in range(50):
                x = x * 2.0
            print("late", float(x[0].cpu()), torch.neuron.concatenation_stats()["direct"])
        atexit.register(late)  # before `import torch`, which loads torchneuron
        import torch
        a = torch.randn(128, 128, device="neuron")
        for _ in range(20):
            a = (a @ a).tanh()
        """
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_NEURONX_")}
    env = {**base, "TORCH_NEURONX_ENABLE_CONCATENATION": "1"}
    env["TORCH_NEURONX_CONCATENATION_QUEUE_LOW_THRESHOLD"] = "0"
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"late {2.0**50}" in p.stdout and int(p.stdout.split()[-1]) >= 50, p.stdout


def test_a_forked_child_exits_cleanly_with_its_parents_buffered_kernels():
    # the child inherits the buffers; freeing their storages there would call the runtime
    # it is refused (it aborted at exit)
    code = textwrap.dedent(
        """
        import os, sys, torch
        a = torch.randn(256, 256, device="neuron")
        for _ in range(20):
            a = (a @ a).tanh()
        b = a * 2
        assert torch.neuron.concatenation_stats()["buffered"] > 0
        pid = os.fork()
        if pid == 0:
            sys.exit(0)
        print("child", os.waitpid(pid, 0)[1], torch.allclose(b.cpu(), a.cpu() * 2))
        """
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_NEURONX_")}
    env = {**base, "TORCH_NEURONX_ENABLE_CONCATENATION": "1"}
    env["TORCH_NEURONX_CONCATENATION_QUEUE_LOW_THRESHOLD"] = "0"
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert p.returncode == 0 and "child 0 True" in p.stdout, p.stdout + p.stderr[-3000:]
