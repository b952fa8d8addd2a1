"""all_reduce bandwidth of the c10d backend `neuron` against CPU tensors on
Gloo, measured in one run (issue 8).

Two processes (this script launches them with torchrun's environment);
float32 all_reduce (SUM) of 1, 16 and 64 MiB, each timed two ways:

- back to back, as NCCL's tests (nccl-tests) time bus bandwidth: one sample is
  K = max(2, 16 / size in MiB) all_reduce calls issued one after another, then
  completed (neuron: torch.neuron.synchronize(); CPU: each blocking call
  returns), divided by K; what a training loop's collectives see, where the
  next call's cross-rank check overlaps the current transfer;
- one at a time: each call after a barrier and completed before the next, so
  every call pays the whole latency (the cross-rank check's trip included);
  sizes under 16 MiB take 16 MiB / size times more samples.

Neuron and CPU samples come in pairs so both see the same machine load, and
each side goes first in half of the pairs (on a loaded host an operation that
follows a longer one runs slower, which favoured the side that always went
first). Bus bandwidth as nccl-tests define it: size x 2(n-1)/n / time. Printed
per way: the median bus bandwidth of each side and the median of the per-pair
ratios neuron / CPU (target >= 0.9: the device adds no copies).

Run: `.venv/bin/python bench/bench_allreduce.py [--iters N]` (or `make bench-dist`).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

SIZES_MIB = (1, 16, 64)
WORLD = 2


def _launch(iters: int) -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    procs = []
    for rank in range(WORLD):
        env = dict(
            os.environ,
            RANK=str(rank),
            LOCAL_RANK=str(rank),
            WORLD_SIZE=str(WORLD),
            LOCAL_WORLD_SIZE=str(WORLD),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=port,
        )
        procs.append(subprocess.Popen([sys.executable, __file__, "--iters", str(iters)], env=env))
    return max(p.wait() for p in procs)


def _worker(iters: int) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("cpu:gloo,neuron:neuron")
    rank = dist.get_rank()
    dev = torch.device("neuron", torch.neuron.current_device())
    cpu = dist.new_group(backend="gloo")
    if rank == 0:
        print(
            f"all_reduce float32 SUM, {WORLD} processes, {iters} samples per size and way "
            f"(one at a time: x 16 MiB / size below 16 MiB), "
            f"load average {os.getloadavg()[0]:.2f}"
        )
        print(f"{'':>8} {'back to back (nccl-tests)':^32} {'one at a time':^32}")
        print(
            f"{'size':>8} {'neuron GB/s':>12} {'cpu GB/s':>10} {'ratio':>7}  "
            f"{'neuron GB/s':>12} {'cpu GB/s':>10} {'ratio':>7}"
        )
    for mib in SIZES_MIB:
        n = mib * 2**20 // 4
        xn = torch.ones(n, device=dev)
        xc = torch.ones(n)
        for _ in range(2):  # warm-up: connections, allocator, pages
            dist.all_reduce(xn)
            torch.neuron.synchronize()
            dist.all_reduce(xc, group=cpu)

        def timed_neuron(calls, out):
            dist.barrier(group=cpu)
            t0 = time.perf_counter()
            for _ in range(calls):
                dist.all_reduce(xn)
            torch.neuron.synchronize()
            out.append((time.perf_counter() - t0) / calls)

        def timed_cpu(calls, out):
            dist.barrier(group=cpu)
            t0 = time.perf_counter()
            for _ in range(calls):
                dist.all_reduce(xc, group=cpu)
            out.append((time.perf_counter() - t0) / calls)

        figures = []
        for calls, samples in ((max(2, 16 // mib), iters), (1, iters * max(1, 16 // mib))):
            tn, tc = [], []
            for i in range(samples):
                # Each side goes first in half the pairs: an operation runs slower
                # after a longer one (the host gave the cores away meanwhile).
                first, second = (
                    (timed_neuron, timed_cpu) if i % 2 == 0 else (timed_cpu, timed_neuron)
                )
                first(calls, tn if first is timed_neuron else tc)
                second(calls, tn if second is timed_neuron else tc)
            bus = mib * 2**20 * 2 * (WORLD - 1) / WORLD / 1e9
            figures += [
                bus / statistics.median(tn),
                bus / statistics.median(tc),
                statistics.median(c / t for t, c in zip(tn, tc)),
            ]
        if rank == 0:
            print(
                f"{mib:>5} MiB {figures[0]:>12.2f} {figures[1]:>10.2f} {figures[2]:>7.2f}  "
                f"{figures[3]:>12.2f} {figures[4]:>10.2f} {figures[5]:>7.2f}",
                flush=True,
            )
    dist.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    if "RANK" in os.environ:
        _worker(args.iters)
    else:
        sys.exit(_launch(args.iters))


if __name__ == "__main__":
    main()
