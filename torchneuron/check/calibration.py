"""Calibration: a fixed workload timed between measured iterations, on the host CPU and
on the device.

The host workload's time tracks the host's momentary speed (other processes, frequency
scaling), so the reference's time divided by it changes only when the model or its inputs
changed. The device workload is the same work on the device: its time tracks what the
host's load does to the device's own time (the emulated device's stream hand-offs and
dispatch slow down under CPU contention far more than a single-threaded CPU forward), so
the device's time divided by it changes when the model's device work changed. The
workload is small PyTorch work like a model's forward (matmuls, an activation, a
reduction) on fixed, seeded float32 tensors: about 0.2-1 ms on a current x86 core.
"""
from __future__ import annotations

import time
from typing import Callable

import torch

#: Workload shape: ``ROWS x WIDTH`` activations through ``LAYERS`` ``WIDTH x WIDTH`` matmuls.
ROWS, WIDTH, LAYERS = 32, 128, 4


def make_step(device: str = "cpu") -> Callable[[], float]:
    """A callable that runs the calibration workload once on ``device`` (synchronized
    before and after) and returns its wall seconds."""
    from . import tensors as T

    g = torch.Generator().manual_seed(1234)
    x = torch.randn(ROWS, WIDTH, generator=g).to(device)
    ws = [(torch.randn(WIDTH, WIDTH, generator=g) / WIDTH ** 0.5).to(device) for _ in range(LAYERS)]
    sync = T.synchronizer(device)

    def step() -> float:
        sync()
        t0 = time.perf_counter()
        with torch.no_grad():
            h = x
            for w in ws:
                h = torch.nn.functional.gelu(h @ w)
            h.sum()
        sync()
        return time.perf_counter() - t0

    return step
