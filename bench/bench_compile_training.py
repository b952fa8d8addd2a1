"""A compiled GPT-2 training step vs eager neuron and Inductor, measured in one run (issue 24).

GPT-2 (transformers' architecture, 2 layers, 128 wide, 4 heads, vocabulary 1000), batch
8 x 64 tokens, language-model loss, AdamW (foreach). One training step is
``loss = model(ids, labels=ids).loss; loss.backward(); opt.step(); opt.zero_grad()``
run three ways, iterations alternating (same machine load):

- eager on `neuron`;
- ``torch.compile(step, backend="neuron")`` on `neuron` (forward and backward graphs of
  the model, and the optimizer step as its own graph);
- ``torch.compile(step)`` (Inductor) on the CPU.

Prints the median step time of each and the ratios compiled/eager (target <= 0.85) and
compiled/Inductor (target <= 1). Run:
`.venv/bin/python bench/bench_compile_training.py [--iters N] [--profile]`.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import tempfile
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TORCH_NEURONX_NEFF_CACHE_DIR", tempfile.mkdtemp(prefix="bench_neff_"))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="bench_inductor_"))

import torch  # noqa: E402

import torchneuron  # noqa: E402,F401
from torchneuron import models  # noqa: E402


def train_step(model, opt, ids):
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


def setup(device: str, batch: int = 8, seq: int = 64):
    """(model, AdamW, ids) on ``device``: the 2-layer GPT-2 in train mode, dropout off
    (so that the three runners compute the same function)."""
    model, _ = models.gpt2_tiny()
    model.config.use_cache = False
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    model = copy.deepcopy(model).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (batch, seq), generator=g).to(device)
    return model, opt, ids


def _time(fn, device):
    if device == "neuron":
        torch.neuron.synchronize()
    t0 = time.perf_counter()
    fn()
    if device == "neuron":
        torch.neuron.synchronize()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="print the compiled step's graphs")
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    print(f"load average {os.getloadavg()}, torch threads {torch.get_num_threads()}")
    me, oe, ie = setup("neuron")
    mc, oc, ic = setup("neuron")
    mi, oi, ii = setup("cpu")
    torch._dynamo.reset()
    torch.neuron.reset_dynamo_metrics()
    comp = torch.compile(train_step, backend="neuron")
    ind = torch.compile(train_step)
    runs = [
        ("eager neuron", lambda: train_step(me, oe, ie), "neuron"),
        ("compiled neuron", lambda: comp(mc, oc, ic), "neuron"),
        ("Inductor CPU", lambda: ind(mi, oi, ii), "cpu"),
    ]
    first = [_time(f, d) for _, f, d in runs]
    print("first step s: " + ", ".join(f"{n} {t:.2f}" for (n, _, _), t in zip(runs, first)))
    if a.profile:
        for r in torch.neuron.get_dynamo_metrics():
            print(f"  graph {r['graph_name']}: {r['graph_node_count']} nodes, cache {r['cache']}")
    times = [[] for _ in runs]
    for i in range(a.warmup + a.iters):
        for k, (_, f, d) in enumerate(runs):
            t = _time(f, d)
            if i >= a.warmup:
                times[k].append(t)
    med = [statistics.median(t) * 1e3 for t in times]
    print(
        f"step ms (median of {a.iters}): "
        + ", ".join(f"{n} {m:.2f}" for (n, _, _), m in zip(runs, med))
    )
    print(
        f"  compiled/eager {med[1] / med[0]:.2f} (target <= 0.85), "
        f"compiled/Inductor {med[1] / med[2]:.2f} (target <= 1)"
    )


if __name__ == "__main__":
    main()
