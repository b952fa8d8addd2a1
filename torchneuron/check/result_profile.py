"""``--profile``'s result as a typed object: ``ProfileResult`` (``phases/profile.py`` fills
it, the runner when phase 1 failed). ``to_dict`` gives the ``profile`` object of the
``--json`` file (same keys, same order as before it was typed), ``from_dict`` reads it back
(``ValueError`` naming unknown keys). A timeline span and a top operator are plain dicts
(their keys below)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .result_base import known

#: The JSON's keys, in the order each status has always written them.
_ORDER = {
    "ok": (
        "timeline",
        "rows",
        "span_us",
        "top_ops",
        "device_time_us",
        "fallback_time_us",
        "table",
        "status",
        "elapsed_s",
    ),
    "error": (
        "status",
        "error",
        "timeline",
        "top_ops",
        "rows",
        "span_us",
        "device_time_us",
        "fallback_time_us",
        "elapsed_s",
    ),
    "skipped": ("status", "reason"),
}


@dataclass
class ProfileResult:
    """One steady-state iteration under ``torch.profiler`` (times in microseconds from the
    iteration's first event). ``ok``: every field but ``error`` and ``reason``; ``error``
    (profiling raised: nothing measured): no ``table``; ``skipped`` (phase 1 failed):
    ``status`` and ``reason`` only."""

    #: "ok", "error" or "skipped"
    status: str
    #: spans {"row", "name", "start_us", "dur_us", "kind"}; kind "cpu_op", "kernel",
    #: "memcpy" or "cpu_fallback"
    timeline: list[dict] = field(default_factory=list)
    #: the timeline's rows: "host dispatch", then each NeuronCore stream, then the host row
    rows: list[str] = field(default_factory=list)
    #: from the first event to the end of the last span (µs)
    span_us: float = 0.0
    #: the CPU ops with the most self device time (at most ``TOP_OPS``): {"op", "calls",
    #: "self_device_us", "device_total_us", "self_cpu_us", "cpu_fallback"}
    top_ops: list[dict] = field(default_factory=list)
    #: device time of the kernels and copies, CPU fallbacks excluded (µs)
    device_time_us: float = 0.0
    #: device-stream time of the CPU fallbacks (µs)
    fallback_time_us: float = 0.0
    #: ``prof.key_averages().table(sort_by="self_device_time_total")``'s text
    table: str | None = None
    #: what profiling raised ("Type: message"); None unless it did
    error: str | None = None
    #: why it was skipped; None unless it was
    reason: str | None = None
    #: wall seconds the profiling took; None when skipped
    elapsed_s: float | None = None

    @property
    def ok(self) -> bool:
        """Whether the iteration was profiled."""
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        """The ``profile`` object of the JSON, keys in the order its status has always had."""
        return {k: getattr(self, k) for k in _ORDER[self.status]}

    @classmethod
    def from_dict(cls, d: dict) -> ProfileResult:
        """The result of a ``to_dict``; ``ValueError`` for a key that is not a field."""
        return cls(**known(cls, d, "profile"))
