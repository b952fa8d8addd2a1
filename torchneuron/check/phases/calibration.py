"""Calibration: fixed workloads timed between measured iterations, on the host CPU and
on the device.

The host workload's time tracks the host's momentary speed (other processes, frequency
scaling), so the reference's time divided by it changes only when the model or its inputs
changed. The device workload is the same work on the device: its time tracks what the
host's load does to the device's own time (the emulated device's stream hand-offs and
dispatch slow down under CPU contention far more than a single-threaded CPU forward), so
the device's time divided by it changes when the model's device work changed. The
workload is small PyTorch work like a model's forward (matmuls, an activation, a
reduction) on fixed, seeded float32 tensors: about 0.2-1 ms on a current x86 core.

That workload is mostly per-operator dispatch. A second one, ``make_matmul_step``, is
compute-bound (four 128x256 @ 256x256 matmuls with tanh: 0.5-0.7 ms of CPU a run on the
loaded 2-core development host): the host calibration of the work-time statistic is the sum
of both, because a CPU forward's time on a loaded host moves with both its dispatch and its
arithmetic, and the small-op workload alone did not track it (perfstats.WORK_STATISTICS
gives the measured figures).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from ..model import tensors as T

#: Workload shape: ``ROWS x WIDTH`` activations through ``LAYERS`` ``WIDTH x WIDTH`` matmuls.
ROWS, WIDTH, LAYERS = 32, 128, 4

#: The compute-bound workload: ``MM_ROWS x MM_WIDTH`` activations through ``MM_LAYERS``
#: ``MM_WIDTH x MM_WIDTH`` matmuls with tanh (67 MFLOP of matmul; weights 1 MiB, inside
#: a core's L2 as a small model's layers are).
MM_ROWS, MM_WIDTH, MM_LAYERS = 128, 256, 4


def make_step(device: str = "cpu") -> Callable[[], float]:
    """A callable that runs the calibration workload once on ``device`` (synchronized
    before and after) and returns its wall seconds."""
    return _make(device, ROWS, WIDTH, LAYERS, torch.nn.functional.gelu, 1234, reduce=True)


def make_matmul_step(device: str = "cpu") -> Callable[[], float]:
    """The compute-bound calibration workload (``MM_*``), as ``make_step``."""
    return _make(device, MM_ROWS, MM_WIDTH, MM_LAYERS, torch.tanh, 4321, reduce=False)


def _make(
    device: str, rows: int, width: int, layers: int, act, seed: int, reduce: bool
) -> Callable[[], float]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, width, generator=g).to(device)
    ws = [(torch.randn(width, width, generator=g) / width**0.5).to(device) for _ in range(layers)]
    sync = T.synchronizer(device)

    def step() -> float:
        sync()
        t0 = time.perf_counter()
        with torch.no_grad():
            h = x
            for w in ws:
                h = act(h @ w)
            if reduce:
                h.sum()
        sync()
        return time.perf_counter() - t0

    return step
