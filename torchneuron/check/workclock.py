"""The CPU clocks phase 3 reads for the work-time statistic (``perfstats.work_times``).

- Host sides (the reference, the host calibrations): the calling thread's CPU time
  (``time.thread_time``, CLOCK_THREAD_CPUTIME_ID): dispatch and CPU kernels, all on that
  thread with one intra-op thread.
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
from typing import Callable, Iterable, Optional

import torch

from . import perfstats

DESCRIPTION = ("device sides: the NeuronCore's busy time (its stream workers' CPU time inside kernels); "
               "host sides: the calling thread's CPU time")


def device_busy_clock(device: str) -> Optional[Callable[[], float]]:
    """Seconds of kernel CPU time the core of ``device`` has accumulated (while counted);
    None when this build of the extension has no such counter."""
    import torchneuron

    read = getattr(torchneuron._C, "_device_kernel_cpu_ns", None)
    if read is None or not hasattr(torchneuron._C, "_set_count_kernel_cpu"):
        return None
    index = torch.device(device).index or 0
    return lambda: read(index) * 1e-9


def clocks(device: str, names: Iterable[str]) -> Optional[dict[str, Callable[[], float]]]:
    """The clock of each side named: busy time for ``perfstats.BUSY_TIME_SIDES``, the calling
    thread's CPU time for the others. None when the device has no busy-time counter."""
    busy = device_busy_clock(device)
    if busy is None:
        return None
    return {k: busy if k in perfstats.BUSY_TIME_SIDES else time.thread_time for k in names}


@contextlib.contextmanager
def counting():
    """Kernel CPU time counted for the duration (off otherwise: it costs two thread-clock
    reads, system calls, per kernel); the previous setting is restored."""
    import torchneuron

    switch = getattr(torchneuron._C, "_set_count_kernel_cpu", None)
    before = switch(True) if switch else None
    try:
        yield
    finally:
        if switch:
            switch(before)
