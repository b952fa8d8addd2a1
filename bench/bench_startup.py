"""Start-up cost of the device: a whole process that does its first
``x @ x + x`` on ``neuron`` against the same process on the CPU (issue 7,
section 5; target: at most 0.3 s more).

Each launch is a fresh ``python -c`` (import torch, which autoloads
torchneuron; build a 256x256 float32 tensor; ``(x @ x + x).cpu()``) timed
from spawn to exit. CPU and neuron launches alternate so both see the same
machine load; printed are the medians, their difference (s) and ratio, for
wall time and for the process's CPU time (user + system, from getrusage;
less sensitive to a shared machine's load than wall time).
Run: ``.venv/bin/python bench/bench_startup.py [--launches N]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

PROGRAM = """
import torch
x = torch.ones(256, 256, device="{device}") / 256
y = (x @ x + x).cpu()
assert float(y[0, 0]) == 1.0 / 256 + 1.0 / 256
"""


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def launch(device: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one process."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    c0, t0 = _children_cpu(), time.perf_counter()
    subprocess.run([sys.executable, "-c", PROGRAM.format(device=device)], check=True, env=env)
    return time.perf_counter() - t0, _children_cpu() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=7, help="launches per device (median)")
    args = ap.parse_args()
    launch("neuron")  # warm the page cache for both
    cpu, dev = [], []
    for _ in range(args.launches):
        cpu.append(launch("cpu"))
        dev.append(launch("neuron"))
    print(f"load average: {os.getloadavg()[0]:.2f}")
    print(f"process with a first x @ x + x, median of {args.launches} launches:")
    for i, what in enumerate(("wall", "CPU time")):
        c = statistics.median(r[i] for r in cpu)
        d = statistics.median(r[i] for r in dev)
        print(
            f"  {what:8s} cpu {c:.3f} s, neuron {d:.3f} s: neuron - cpu = {d - c:+.3f} s "
            f"(target <= 0.3), neuron / cpu = {d / c:.2f}"
        )


if __name__ == "__main__":
    main()
