"""HBM statistics of ``torch.neuron`` (bytes), as ``torch.cuda``'s memory API.

The figures come from the runtime's caching allocator through
``torch.accelerator``, so both APIs report the same numbers.
"""
from __future__ import annotations

import pickle
import sys
from collections import OrderedDict
from typing import Any

import torch

from . import _C
from ._utils import _get_device_index


def _dev(device: Any) -> int:
    return _get_device_index(device, optional=True)


def memory_stats(device: Any = None) -> "OrderedDict[str, Any]":
    """Flat dict with ``torch.cuda.memory_stats`` keys, e.g.
    ``"allocated_bytes.all.current"``, ``"reserved_bytes.large_pool.peak"``,
    ``"num_ooms"``."""
    return torch.accelerator.memory_stats(_dev(device))


def memory_allocated(device: Any = None) -> int:
    """Bytes currently occupied by tensors on the NeuronCore."""
    return torch.accelerator.memory_allocated(_dev(device))


def max_memory_allocated(device: Any = None) -> int:
    return torch.accelerator.max_memory_allocated(_dev(device))


def memory_reserved(device: Any = None) -> int:
    """Bytes held by the caching allocator (allocated plus cached)."""
    return torch.accelerator.memory_reserved(_dev(device))


def max_memory_reserved(device: Any = None) -> int:
    return torch.accelerator.max_memory_reserved(_dev(device))


def reset_peak_memory_stats(device: Any = None) -> None:
    torch.accelerator.reset_peak_memory_stats(_dev(device))


def reset_accumulated_memory_stats(device: Any = None) -> None:
    torch.accelerator.reset_accumulated_memory_stats(_dev(device))


def empty_cache() -> None:
    """Release cached, unused HBM of every NeuronCore (after draining its streams)."""
    torch.accelerator.empty_cache()


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes: capacity minus reserved, and capacity."""
    return torch.accelerator.get_memory_info(_dev(device))


def _fmt(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """A readable table of the allocator statistics of one NeuronCore."""
    idx = _dev(device)
    s = memory_stats(idx)
    props = _C._core_properties(idx)
    rows = [
        ("Allocated memory", "allocated_bytes", _fmt),
        ("Active memory", "active_bytes", _fmt),
        ("Requested memory", "requested_bytes", _fmt),
        ("Reserved memory", "reserved_bytes", _fmt),
        ("Non-releasable memory", "inactive_split_bytes", _fmt),
        ("Allocations", "allocation", str),
        ("Active allocs", "active", str),
        ("Reserved segments", "segment", str),
    ]
    pools = ["all"] if abbreviated else ["all", "large_pool", "small_pool"]
    width = 78
    lines = ["=" * width,
             f" neuron:{idx} memory summary ({props['name']}, capacity {_fmt(props['total_memory'])})",
             "-" * width,
             f" {'Metric':<32}{'Cur Usage':>11}{'Peak Usage':>12}{'Tot Alloc':>11}{'Tot Freed':>11}",
             "-" * width]
    for title, key, fmt in rows:
        for pool in pools:
            name = title if pool == "all" else f"  from {pool.replace('_', ' ')}"
            vals = [s.get(f"{key}.{pool}.{k}", 0) for k in ("current", "peak", "allocated", "freed")]
            lines.append(f" {name:<32}" + "".join(f"{fmt(v):>11} " for v in vals).rstrip())
    lines.append("-" * width)
    lines.append(f" OOMs: {s.get('num_ooms', 0)}   cache flushes: {s.get('num_alloc_retries', 0)}   "
                 f"device allocs/frees: {s.get('num_device_alloc', 0)}/{s.get('num_device_free', 0)}")
    lines.append("=" * width)
    return "\n".join(lines) + "\n"


# ---- Memory history and snapshots, as torch.cuda.memory's ----
# The snapshot has torch.cuda.memory._snapshot()'s structure (segments with
# blocks, per-device traces of alloc/free/segment events, Python stack
# frames), so torch.cuda._memory_viz and pytorch.org/memory_viz read it.
# Differences, from the emulator's allocator: one stream pool (stream 0), and
# a freed block is free at once (its last kernel has run), so free_requested
# and free_completed are recorded together and no block is
# "active_awaiting_free".

def _record_memory_history(enabled: str | None = "all", context: str | None = "all",
                           stacks: str = "python", max_entries: int = sys.maxsize,
                           device: Any = None) -> None:
    """Start (``enabled="all"`` or ``"state"``) or stop (``enabled=None``)
    recording the allocator's history on every NeuronCore, as
    ``torch.cuda.memory._record_memory_history``.

    ``"all"`` keeps the newest ``max_entries`` alloc/free/segment/oom events
    per core and the Python stack of each live allocation; ``"state"`` only the
    stacks of live allocations. ``context=None`` records no stacks. ``stacks``
    is ``"python"`` or ``"all"`` (C++ frames are not gathered: Python only).
    Stopping clears the history. ``device`` is accepted for torch.cuda's
    signature; recording covers every core.

    Raises ValueError on an unknown ``enabled``, ``context`` or ``stacks``, or
    a negative ``max_entries``.
    """
    if enabled not in (None, "state", "all"):
        raise ValueError(f"_record_memory_history: enabled must be None, 'state' or 'all', got {enabled!r}")
    if context not in (None, "state", "alloc", "all"):
        raise ValueError(f"_record_memory_history: context must be None, 'state', 'alloc' or 'all', "
                         f"got {context!r}")
    if stacks not in ("python", "all"):
        raise ValueError(f"_record_memory_history: stacks must be 'python' or 'all', got {stacks!r}")
    if not isinstance(max_entries, int) or max_entries < 0:
        raise ValueError(f"_record_memory_history: max_entries must be an int >= 0, got {max_entries!r}")
    if device is not None:
        _dev(device)  # validates the index
    if enabled is None:
        _C._record_memory_history(False, 0, False)
        return
    entries = max_entries if enabled == "all" else 0
    _C._record_memory_history(True, min(entries, 2**62), context is not None)


def _snapshot(device: Any = None) -> dict:
    """The allocator state of every NeuronCore: ``{"segments": [...],
    "device_traces": [[...] per core], "allocator_settings": {...}}`` with
    torch.cuda's keys (addresses and sizes in bytes, ``time_us`` since the
    Unix epoch). Like torch.cuda's, it does not wait for queued work: a block
    whose last kernel has not run yet is still allocated (synchronize first
    to compare with ``memory_stats``)."""
    return _C._memory_snapshot()


def memory_snapshot() -> list:
    """The segments of every NeuronCore's allocator (``_snapshot()["segments"]``)."""
    return _snapshot()["segments"]


def _dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    """Pickle ``_snapshot()`` to ``filename``, the file torch.cuda's
    ``_dump_snapshot`` writes (open it at pytorch.org/memory_viz or with
    ``python -m torch.cuda._memory_viz``)."""
    s = _snapshot()
    with open(filename, "wb") as f:
        pickle.dump(s, f)
