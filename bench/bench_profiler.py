"""Cost of the profiler hooks, measured in one run (issue 9: "profiling off
costs nothing measurable").

Three states alternate round after round, so all see the same machine load:
  off    - no profiler (the runtime's activity flag is off: a launch pays one
           relaxed atomic load, a kernel two steady-clock reads for the busy
           counter);
  cpu    - torch.profiler with ProfilerActivity.CPU only (our Kineto session
           is not configured: device tracing stays off);
  device - torch.profiler with CPU and PrivateUse1 (every kernel recorded).
Workloads: a burst of 2000 small adds (per-launch overhead) and a MiniLM
forward pass (batch 8, real weights). Printed: median time per round of each
state and the ratios cpu/off and device/off (medians of per-round ratios).

"off" against a build without the hooks is a comparison across builds, not
measurable in one run: run this on each build and compare their "off" columns
(no such figure is recorded in the README yet).

Run: .venv/bin/python bench/bench_profiler.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import torchneuron  # noqa: E402,F401


def _adds(x, n=2000):
    def run():
        for _ in range(n):
            x.add_(1.0)
        torch.neuron.synchronize()

    return run


def _minilm():
    from torchneuron.models import minilm

    model, inputs = minilm(batch_size=8)
    model = model.to("neuron").eval()
    inputs = {k: v.to("neuron") for k, v in inputs.items()}

    def run():
        with torch.no_grad():
            model(**inputs)
        torch.neuron.synchronize()

    return run


def _timed(fn, state):
    if state == "off":
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.PrivateUse1] if state == "device" else [])
    with profile(activities=acts):
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t  # the region itself, not the trace processing


def bench(name, fn, rounds):
    for _ in range(3):
        fn()
    times = {s: [] for s in ("off", "cpu", "device")}
    for _ in range(rounds):
        for s in times:
            times[s].append(_timed(fn, s))
    med = {s: statistics.median(v) for s, v in times.items()}
    ratio = {
        s: statistics.median(a / b for a, b in zip(times[s], times["off"]))
        for s in ("cpu", "device")
    }
    print(
        f"{name:<28} off {med['off'] * 1e3:8.2f} ms   cpu {med['cpu'] * 1e3:8.2f} ms   "
        f"device {med['device'] * 1e3:8.2f} ms   cpu/off {ratio['cpu']:.3f}   device/off {ratio['device']:.3f}"
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--skip-minilm", action="store_true")
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    bench("2000 x add_ (1000 floats)", _adds(torch.zeros(1000, device="neuron")), a.rounds)
    if not a.skip_minilm:
        bench("MiniLM forward, batch 8", _minilm(), a.rounds)


if __name__ == "__main__":
    main()
