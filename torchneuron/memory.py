"""HBM statistics of ``torch.neuron`` (bytes), as ``torch.cuda``'s memory API.

The figures come from the runtime's caching allocator through
``torch.accelerator``, so both APIs report the same numbers.
"""

from __future__ import annotations

import inspect
import pickle
import sys
from collections import OrderedDict
from typing import Any

import torch

from . import _C
from ._utils import _get_device_index


def _dev(device: Any) -> int:
    return _get_device_index(device, optional=True)


def memory_stats(device: Any = None) -> OrderedDict[str, Any]:
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


def reset_max_memory_allocated(device: Any = None) -> None:
    """Reset the peak of allocated bytes (as torch.cuda's, which resets every peak:
    this calls ``reset_peak_memory_stats``)."""
    reset_peak_memory_stats(device)


def reset_max_memory_cached(device: Any = None) -> None:
    """Reset the peak of reserved bytes (torch.cuda's deprecated name; resets every peak)."""
    reset_peak_memory_stats(device)


def ipc_collect() -> None:
    """Nothing to release: neuron memory is not shared between processes by IPC handles
    (torch.multiprocessing passes neuron tensors through host memory)."""


def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
    """Limit this process's HBM on the NeuronCore to ``fraction`` of its capacity
    (float in (0, 1]); an allocation that would reserve more raises
    torch.OutOfMemoryError, as CUDA's caching allocator does. TypeError for a
    non-float, ValueError outside (0, 1] (CUDA's message)."""
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _C._set_memory_fraction(_dev(device), fraction)


def get_per_process_memory_fraction(device: Any = None) -> float:
    """The fraction set by ``set_per_process_memory_fraction`` (1.0 by default)."""
    return _C._memory_fraction(_dev(device))


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
    lines = [
        "=" * width,
        f" neuron:{idx} memory summary ({props['name']}, capacity {_fmt(props['total_memory'])})",
        "-" * width,
        f" {'Metric':<32}{'Cur Usage':>11}{'Peak Usage':>12}{'Tot Alloc':>11}{'Tot Freed':>11}",
        "-" * width,
    ]
    for title, key, fmt in rows:
        for pool in pools:
            name = title if pool == "all" else f"  from {pool.replace('_', ' ')}"
            vals = [
                s.get(f"{key}.{pool}.{k}", 0) for k in ("current", "peak", "allocated", "freed")
            ]
            lines.append(f" {name:<32}" + "".join(f"{fmt(v):>11} " for v in vals).rstrip())
    lines.append("-" * width)
    lines.append(
        f" OOMs: {s.get('num_ooms', 0)}   cache flushes: {s.get('num_alloc_retries', 0)}   "
        f"device allocs/frees: {s.get('num_device_alloc', 0)}/{s.get('num_device_free', 0)}"
    )
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

# c10's TraceEntry actions, in the runtime's order (MemoryEvent::Action);
# "snapshot" is accepted for torch.cuda's signature and never recorded here.
_ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom")
_CONTEXT_LEVELS = {None: 0, "state": 1, "alloc": 2, "all": 3}  # c10's RecordContext


def _record_memory_history(enabled: str | bool | None = "all", *args: Any, **kwargs: Any) -> None:
    """Start (``enabled="all"`` or ``"state"``) or stop (``enabled=None``)
    recording the allocator's history on every NeuronCore, with
    ``torch.cuda.memory._record_memory_history``'s signature and meanings.

    ``enabled="all"`` keeps the newest ``max_entries`` alloc/free/segment/oom
    events per core; ``"state"`` only the live allocations. ``context``: which
    Python stacks are kept: ``None`` none, ``"state"`` those of live
    allocations, ``"alloc"`` also on alloc events (a free event carries its
    allocation's stack), ``"all"`` also the stack of each free. ``stacks`` is
    ``"python"`` or ``"all"`` (C++ frames are not gathered: Python only).
    ``clear_history`` drops the events recorded so far; stopping always does.
    ``skip_actions``: event kinds not to record (``"alloc"``,
    ``"free_requested"``, ``"free_completed"``, ``"segment_alloc"``,
    ``"segment_free"``, ``"oom"``, ``"snapshot"``). ``device``,
    ``compile_context`` and ``global_record_annotations`` are accepted for
    torch.cuda's signature; recording covers every core. A bool ``enabled``
    takes torch.cuda's legacy form (``record_context``,
    ``trace_alloc_max_entries``, ``trace_alloc_record_context``,
    ``record_context_cpp``).

    Raises RuntimeError on an unknown ``enabled``, ``context``, ``stacks`` or
    action name, TypeError on a negative ``max_entries`` (as torch.cuda).
    """
    if isinstance(enabled, bool):
        return _record_memory_history_legacy(enabled, *args, **kwargs)
    return _record_memory_history_impl(enabled, *args, **kwargs)


def _record_memory_history_impl(
    enabled: str | None = "all",
    context: str | None = "all",
    stacks: str = "python",
    max_entries: int = sys.maxsize,
    device: Any = None,
    clear_history: bool = False,
    compile_context: bool = False,
    global_record_annotations: bool = False,
    skip_actions: list[str] | None = None,
) -> None:
    # torch.cuda's messages (torch/csrc/cuda/memory_snapshot.cpp), RuntimeError as its TORCH_CHECK.
    if enabled not in (None, "state", "all"):
        raise RuntimeError(f"expected state to be 'state', 'all', or None, got {enabled!r}")
    if context not in _CONTEXT_LEVELS:
        raise RuntimeError(
            f"expected context to be 'state', 'alloc', 'all', or None, got {context!r}"
        )
    if stacks not in ("python", "all"):
        raise RuntimeError(f"expected stacks to be 'python', or 'all', got {stacks!r}")
    _set_history(
        enabled is not None,
        max_entries if enabled == "all" else 0,
        _CONTEXT_LEVELS[context] if enabled is not None else 0,
        device,
        clear_history,
        skip_actions,
    )


def _record_memory_history_legacy(
    enabled: bool,
    record_context: bool = True,
    trace_alloc_max_entries: int = 1,
    trace_alloc_record_context: bool = False,
    device: Any = None,
    record_context_cpp: bool = False,
    clear_history: bool = False,
    compile_context: bool = False,
    global_record_annotations: bool = False,
    skip_actions: list[str] | None = None,
) -> None:
    """torch.cuda's legacy form: ``_record_memory_history(True,
    trace_alloc_max_entries=n, trace_alloc_record_context=True)``."""
    level = 2 if trace_alloc_record_context else 1 if record_context else 0
    _set_history(
        enabled,
        trace_alloc_max_entries if enabled else 0,
        level if enabled else 0,
        device,
        clear_history,
        skip_actions,
    )


_record_memory_history.__signature__ = inspect.signature(_record_memory_history_impl)  # type: ignore[attr-defined]


def _set_history(
    enabled: bool,
    max_entries: Any,
    level: int,
    device: Any,
    clear: bool,
    skip_actions: list[str] | None,
) -> None:
    if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 0:
        raise TypeError(
            f"_record_memory_history: max_entries must be an int >= 0, got {max_entries!r}"
        )
    mask = 0
    for a in skip_actions or ():
        if a == "snapshot":
            continue
        if a not in _ACTIONS:
            raise RuntimeError(
                f"_record_memory_history: unknown action {a!r} in skip_actions; "
                f"expected one of {', '.join(_ACTIONS + ('snapshot',))}"
            )
        mask |= 1 << _ACTIONS.index(a)
    if device is not None:
        _dev(device)  # validates the index
    _C._record_memory_history(enabled, min(max_entries, 2**62), level, mask, bool(clear))


def _snapshot(device: Any = None) -> dict:
    """The allocator state of every NeuronCore: ``{"segments": [...],
    "device_traces": [[...] per core], "allocator_settings": {...}}`` with
    torch.cuda's keys (addresses and sizes in bytes, ``time_us`` since the
    Unix epoch). Like torch.cuda's, it does not wait for queued work: a block
    whose last kernel has not run yet is still allocated (synchronize first
    to compare with ``memory_stats``)."""
    return _C._memory_snapshot()


def memory_snapshot(mempool_id: Any = None, include_traces: bool = True) -> list:
    """The segments of every NeuronCore's allocator (``_snapshot()["segments"]``).
    ``mempool_id`` and ``include_traces`` are accepted for torch.cuda's
    signature: there is one pool, and segments hold no traces.

    Raises RuntimeError for a ``mempool_id`` other than None or (0, 0)."""
    if mempool_id is not None and tuple(mempool_id) != (0, 0):
        raise RuntimeError(
            f"memory_snapshot: neuron has no memory pool {tuple(mempool_id)} (one pool, (0, 0))"
        )
    return _snapshot()["segments"]


def _dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    """Pickle ``_snapshot()`` to ``filename``, the file torch.cuda's
    ``_dump_snapshot`` writes (open it at pytorch.org/memory_viz or with
    ``python -m torch.cuda._memory_viz``)."""
    s = _snapshot()
    with open(filename, "wb") as f:
        pickle.dump(s, f)
