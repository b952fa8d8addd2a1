"""Does a non_blocking copy from pinned memory overlap with compute? (issue 7, section 2)

An input pipeline step: copy a batch host -> device with non_blocking=True, then compute on
it. Three variants, alternated in one run, medians of --repeats:
  pageable: the batch is pageable memory (the copy stages it on the host first, as CUDA does)
  pinned:   the batch is pinned (the copy is queued unstaged; the host goes on at once)
  serial:   pinned, but the host waits for each copy before queuing compute (no overlap)
Printed: seconds per step of each, and the ratios pinned/pageable and pinned/serial
(< 1 means the copy overlapped with host work and device compute).

Usage: .venv/bin/python bench/bench_pinned_overlap.py [--repeats N] [--steps N] [--mib M]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

import torchneuron  # noqa: F401


def run(batches, w, steps, serial):
    torch.neuron.synchronize()
    t0 = time.perf_counter()
    acc = None
    for i in range(steps):
        x = batches[i % len(batches)].to("neuron", non_blocking=True)
        if serial:
            torch.neuron.synchronize()
        y = (x @ w).relu_()
        acc = y.sum() if acc is None else acc + y.sum()
    acc.item()
    return (time.perf_counter() - t0) / steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--mib", type=float, default=16, help="batch size in MiB (float32)")
    a = ap.parse_args()
    cols = 512
    rows = int(a.mib * 2**20 / 4 / cols)
    pageable = [torch.randn(rows, cols) for _ in range(4)]
    pinned = [b.pin_memory() for b in pageable]
    w = torch.randn(cols, cols, device="neuron")
    times = {"pageable": [], "pinned": [], "serial": []}
    run(pinned, w, 2, False)  # warm-up
    for _ in range(a.repeats):
        times["pageable"].append(run(pageable, w, a.steps, False))
        times["pinned"].append(run(pinned, w, a.steps, False))
        times["serial"].append(run(pinned, w, a.steps, True))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"batch {rows}x{cols} float32 ({a.mib} MiB), {a.steps} steps x {a.repeats} repeats, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    for k, v in med.items():
        print(f"  {k:9s} {v * 1e3:8.2f} ms/step")
    print(f"pinned / pageable = {med['pinned'] / med['pageable']:.3f}")
    print(f"pinned / serial   = {med['pinned'] / med['serial']:.3f}")


if __name__ == "__main__":
    main()
