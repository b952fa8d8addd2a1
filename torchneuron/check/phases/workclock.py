"""The CPU clocks phase 3 reads for the work-time statistic (``perfstats.work_times``).

- Host sides (the reference, the host calibrations): the calling thread's CPU time
  (``time.thread_time``, CLOCK_THREAD_CPUTIME_ID): dispatch and CPU kernels, all on that
  thread with one intra-op thread.
- The compiled model (``COMPILED_SIDES``): the **process's** CPU time (``time.process_time``,
  CLOCK_PROCESS_CPUTIME_ID, all threads). Its graphs run in XLA:CPU's own thread pool, which
  no thread clock of ours sees: over 100 forwards of the ``blocks`` fixture the stream
  worker and the caller consumed 34 ms of CPU, the process 122 ms. Every step is
  synchronized before and after and the sides run one at a time, so nothing else of the
  process works during it. Measured on ``blocks`` (150 interleaved steps per setting, 2
  cores already at load 6): compiled/reference on wall time read x0.97-x7.4 with 0-4 CPU
  burners added, on this clock x0.93-x1.06.
- Device sides (``perfstats.BUSY_TIME_SIDES``: the device, the device calibration): the
  emulated core's **busy time**, its stream workers' CPU time inside kernels
  (``torchneuron._C._device_kernel_cpu_ns``, counted only inside ``counting()``), as a real
  NeuronCore's profiler reports its busy time. Not the host thread's dispatch CPU, nor the
  workers' CPU outside kernels: both are mostly hand-offs (lock and futex wake-ups, context
  switches) whose cost follows the scheduling, not the work. On the ``blocks`` fixture
  under two CPU burners, within one process, the host thread's CPU per device step read
  0.27-0.79 ms between checks of an unchanged build, against 1.4-2.4 ms of kernels, and the
  planted device slowdown (3 blocks more) did not raise it measurably.

Time slices lost to other processes are on no CPU clock."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable

import torch

import torchneuron

from ..stats import perfstats

DESCRIPTION = (
    "device sides: the NeuronCore's busy time (its stream workers' CPU time inside kernels); "
    "host sides: the calling thread's CPU time"
)
#: The compiled model's clock (``COMPILED_SIDES``), recorded apart: baselines saved before it
#: have ``DESCRIPTION`` alone and their compiled CPU samples are the calling thread's.
COMPILED_DESCRIPTION = "the compiled model: the process's CPU time (all threads)"

#: Steps timed on the process's CPU time (all threads): the compiled model's (``--mode both``).
COMPILED_SIDES = ("compiled",)


def device_busy_clock(device: str) -> Callable[[], float] | None:
    """Seconds of kernel CPU time the core of ``device`` has accumulated (while counted);
    None when this build of the extension has no such counter."""
    read = getattr(torchneuron._C, "_device_kernel_cpu_ns", None)
    if read is None or not hasattr(torchneuron._C, "_set_count_kernel_cpu"):
        return None
    index = torch.device(device).index or 0
    return lambda: read(index) * 1e-9


def clocks(
    device: str, names: Iterable[str], compiled_device: bool = False
) -> dict[str, Callable[[], float]] | None:
    """The clock of each side named: busy time for ``perfstats.BUSY_TIME_SIDES``, the process's
    CPU time for ``COMPILED_SIDES`` (and for ``device`` when ``compiled_device``: under
    ``--mode compile`` the device step is the compiled model), the calling thread's CPU time
    for the others. None when the device has no busy-time counter."""
    busy = device_busy_clock(device)
    if busy is None:
        return None
    process = set(COMPILED_SIDES) | ({"device"} if compiled_device else set())
    return {
        k: time.process_time
        if k in process
        else busy
        if k in perfstats.BUSY_TIME_SIDES
        else time.thread_time
        for k in names
    }


def description(compiled_device: bool = False) -> str:
    """``cpu_clock`` of a run: ``DESCRIPTION``, plus the compiled model's clock when it is
    the device step (``--mode compile``), spelled as a ``--mode both`` run's compiled view
    spells it, so that the two compare."""
    return f"{DESCRIPTION}; {COMPILED_DESCRIPTION}" if compiled_device else DESCRIPTION


@contextlib.contextmanager
def counting():
    """Kernel CPU time counted for the duration (off otherwise: it costs two thread-clock
    reads, system calls, per kernel); the previous setting is restored."""
    switch = getattr(torchneuron._C, "_set_count_kernel_cpu", None)
    before = switch(True) if switch else None
    try:
        yield
    finally:
        if switch:
            switch(before)
