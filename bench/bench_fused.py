"""Adaptive eager execution with fusion against unfused eager and the CPU (issue 26).

Three workloads, each run in two child processes, one per mode:

- ``unfused``: plain eager on `neuron` (no variable set);
- ``fused``: ``TORCH_NEURONX_ENABLE_CONCATENATION=1 TORCHNEURON_CONCATENATION_FUSE=1``
  with ``TORCH_NEURONX_CONCATENATION_QUEUE_LOW_THRESHOLD=0`` (buffer every native op: the
  segments are then cut at the same ops every iteration, so their executables are
  replayed) and ``TORCH_NEURONX_CONCATENATION_BUFFER_SIZE_LIMIT`` (``--limit``, default
  1024 as TorchNeuron's: each segment runs to a host read or the step's end; 64 launches a
  segment while the host issues the next, and measured slower: more launches and more
  results copied out of XLA, docs/design/concatenation-engine.md); ``--threshold`` sets
  the queue threshold (default 0).

Workloads: BERT with all-MiniLM-L6-v2's weights, batch 32 (inference; targets: fused <=
0.6x CPU eager, unfused <= 0.95x); a GPT-2 block, 256 wide, batch 8 x 128 (inference;
fused <= 0.5x); a 2-layer GPT-2 training step with AdamW, batch 8 x 64 (fused faster than
unfused, the same losses over 10 steps).

Each child alternates CPU and `neuron` iterations (the same machine load), and prints
the median of the per-pair ratios neuron/CPU after warm-up (which compiles the fused
segments), the largest difference from the CPU's result, and the engine's counters. The
parent prints the ratios side by side; fused/unfused for training is the ratio of the two
children's neuron/CPU medians. Run: `.venv/bin/python bench/bench_fused.py [--iters N]`.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

WORKLOADS = ("minilm_b32", "gpt2_block", "gpt2_train")


def _models(name: str):
    import torch

    from torchneuron import models

    if name == "minilm_b32":
        return models.minilm(batch_size=32)
    from transformers import GPT2Config
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

    torch.manual_seed(0)
    cfg = GPT2Config(n_embd=256, n_head=8, n_layer=1, attn_implementation="sdpa")
    cfg.resid_pdrop = cfg.attn_pdrop = cfg.embd_pdrop = 0.0
    block = GPT2Block(cfg).eval()

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.block = block

        def forward(self, hidden):
            out = self.block(hidden)
            return out[0] if isinstance(out, tuple) else out

    g = torch.Generator().manual_seed(0)
    return Block().eval(), {"hidden": torch.randn(8, 128, 256, generator=g)}


def _timed(fn, device: str) -> float:
    import torch

    if device == "neuron":
        torch.neuron.synchronize()
    t0 = time.perf_counter()
    result = fn()  # held until the device is done: a result nobody holds is never written
    if device == "neuron":
        torch.neuron.synchronize()
    t = time.perf_counter() - t0
    del result
    return t


def _child_inference(name: str, iters: int, warmup: int) -> dict:
    import torch

    model, inputs = _models(name)
    dev_model = copy.deepcopy(model).to("neuron")
    dev_inputs = {k: v.to("neuron") for k, v in inputs.items()}
    times = {"cpu": [], "neuron": []}
    with torch.no_grad():
        ref = model(**inputs)
        for i in range(warmup + iters):
            for dev, m, x in (("cpu", model, inputs), ("neuron", dev_model, dev_inputs)):
                t = _timed(lambda m=m, x=x: m(**x), dev)
                if i >= warmup:
                    times[dev].append(t)
        diff = (dev_model(**dev_inputs).cpu() - ref).abs().max().item()
    return _summary(times, diff)


def _child_train(iters: int, warmup: int) -> dict:
    # the compiled-training benchmark's step: GPT-2 (2 layers, 128 wide), AdamW, dropout off
    from bench_compile_training import setup
    from bench_compile_training import train_step as step

    runs = {d: setup(d) for d in ("cpu", "neuron")}
    losses = [step(*runs["neuron"]).item() for _ in range(10)]
    cpu_losses = [step(*runs["cpu"]).item() for _ in range(10)]
    times = {"cpu": [], "neuron": []}
    for i in range(warmup + iters):
        for dev in ("cpu", "neuron"):
            t = _timed(lambda dev=dev: step(*runs[dev]), dev)
            if i >= warmup:
                times[dev].append(t)
    out = _summary(times, max(abs(a - b) for a, b in zip(losses, cpu_losses)))
    out["losses"] = losses
    return out


def _summary(times: dict, diff: float) -> dict:
    import torch

    return {
        "cpu_ms": statistics.median(times["cpu"]) * 1e3,
        "neuron_ms": statistics.median(times["neuron"]) * 1e3,
        "ratio": statistics.median(n / c for c, n in zip(times["cpu"], times["neuron"])),
        "max_diff_vs_cpu": diff,
        "fused": torch.neuron.concatenation_stats().get("fused", {}),
    }


def child(name: str, iters: int, warmup: int) -> None:
    warnings.simplefilter("ignore")
    import torchneuron  # noqa: F401

    out = (
        _child_train(iters, warmup)
        if name == "gpt2_train"
        else _child_inference(name, iters, warmup)
    )
    print("RESULT " + json.dumps(out))


def _run_child(name: str, mode: str, args) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TORCH_NEURONX_CONCATENATION", "TORCHNEURON_CONCATENATION"))
    }
    env.pop("TORCH_NEURONX_ENABLE_CONCATENATION", None)
    if mode == "fused":
        env.update(
            TORCH_NEURONX_ENABLE_CONCATENATION="1",
            TORCHNEURON_CONCATENATION_FUSE="1",
            TORCH_NEURONX_CONCATENATION_QUEUE_LOW_THRESHOLD=str(args.threshold),
            TORCH_NEURONX_CONCATENATION_BUFFER_SIZE_LIMIT=str(args.limit),
        )
    cmd = [sys.executable, __file__, "--child", name, "--iters", str(args.iters)]
    cmd += ["--warmup", str(args.warmup)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{name} {mode} failed:\n{proc.stderr[-3000:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=4, help="untimed iterations (compiles)")
    ap.add_argument("--limit", type=int, default=1024, help="ops per fused segment at most")
    ap.add_argument(
        "--threshold", type=int, default=0, help="queued kernels below which a segment leaves"
    )
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.iters, args.warmup)
        return
    unknown = [n for n in args.only.split(",") if n not in WORKLOADS]
    if unknown:  # a child would run some default model under the wrong name
        ap.error(
            f"--only: unknown workload {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}"
        )
    print(f"load average {os.getloadavg()[0]:.1f}; medians of {args.iters} pairs")
    targets = {"minilm_b32": 0.6, "gpt2_block": 0.5}
    for name in args.only.split(","):
        res = {mode: _run_child(name, mode, args) for mode in ("unfused", "fused")}
        u, f = res["unfused"], res["fused"]
        st = f["fused"]
        print(
            f"{name}: neuron/cpu unfused {u['ratio']:.3f} ({u['neuron_ms']:.1f} ms), "
            f"fused {f['ratio']:.3f} ({f['neuron_ms']:.1f} ms; cpu {f['cpu_ms']:.1f} ms); "
            f"fused/unfused {f['ratio'] / u['ratio']:.3f}; max diff vs cpu: unfused "
            f"{u['max_diff_vs_cpu']:.2e}, fused {f['max_diff_vs_cpu']:.2e}"
        )
        print(
            f"  segments {st.get('segments')}, ops fused {st.get('ops_fused')}, unfused "
            f"{st.get('ops_unfused')}, hits {st.get('cache_hits')}, compiles "
            f"{st.get('compiles')} ({st.get('compile_s', 0):.1f} s), unfusable {st.get('unfusable')}"
        )
        if name in targets:
            t = targets[name]
            print(f"  target fused <= {t}x cpu: {'met' if f['ratio'] <= t else 'MISSED'}")
        if name == "gpt2_train":
            d = max(abs(a - b) for a, b in zip(u["losses"], f["losses"]))
            print(f"  losses over 10 steps, fused vs unfused: max difference {d:.2e}")


if __name__ == "__main__":
    main()
