"""HBM statistics of ``torch.neuron`` (bytes), as ``torch.cuda``'s memory API.

The figures come from the runtime's caching allocator through
``torch.accelerator``, so both APIs report the same numbers.
"""
from __future__ import annotations

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
