"""The comparison with ``--baseline`` as a typed object: ``BaselineComparison``
(``baseline/compare.py`` fills it; the runner, when phase 1 failed, its compile part only).
``to_dict`` gives the ``baseline`` object of the ``--json`` file (same keys, same order),
``from_dict`` reads it back (``ValueError`` naming unknown keys). Its parts (each output's
accuracy, a latency comparison, the compiled model's, the exact gates, memory, training, the
changes) are still the plain dicts docs/check.md ("Outputs") describes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .result_base import known

#: The keys of a full comparison, in the order ``compare`` has always set them.
FULL_ORDER = (
    "path",
    "created_utc",
    "regressions",
    "accuracy",
    "latency",
    "memory",
    "changes",
    "compiled",
    "exact",
    "training",
    "status",
)
#: Phase 1 failed: only whether the model still compiles was compared (``reason`` says so).
COMPILE_ONLY_ORDER = ("path", "created_utc", "status", "regressions", "compiled", "reason")


@dataclass
class BaselineComparison:
    """This run against the baseline it was given. A full comparison has every field but
    ``reason`` (None there, and absent from the JSON); after phase 1 failed only ``path``,
    ``created_utc``, ``status``, ``regressions``, ``compiled`` (its compile part) and
    ``reason`` are set and written."""

    #: the baseline's folder (``--baseline``)
    path: str
    #: when the baseline was saved (UTC, ISO 8601); None when it does not say
    created_utc: str | None
    #: one line per regression (each fails the check), without the "regression: " prefix
    regressions: list[str] = field(default_factory=list)
    #: per output name: phase 2's comparison against the baseline's reference and fp64
    #: outputs, and ``identical_to_baseline_device``
    accuracy: dict[str, dict] | None = None
    #: the eager model's host latency against the baseline's (seconds; ``host_latency.py``),
    #: or {"regressed", "decision", "regressions", "note"} when not compared
    latency: dict | None = None
    #: peak allocated device memory against the baseline's (bytes; change a fraction), or
    #: {"regressed", "note"} when not compared; None when the baseline has no peak
    memory: dict | None = None
    #: listed without failing: new_fallback_ops, removed_fallback_ops, narrowing_changed,
    #: manifest (the entries that changed)
    changes: dict | None = None
    #: the compiled model: {"compile": whether it still compiles, "latency", "regressions"}
    compiled: dict | None = None
    #: the exact gates (``baseline/exact.py``): {"rows", "regressions", "notes", "by_op"}
    exact: dict | None = None
    #: the training check's peak memory (bytes) against the baseline's, step times beside
    training: dict | None = None
    #: "pass", "fail" (a regression) or "skipped" (phase 1 failed and the compile held)
    status: str | None = None
    #: why only part was compared (phase 1 failed); None for a full comparison
    reason: str | None = None

    @property
    def compile_only(self) -> bool:
        """Whether phase 1 failed and only the compile was compared."""
        return self.reason is not None

    def to_dict(self) -> dict[str, Any]:
        """The ``baseline`` object of the JSON, keys in the order it has always had."""
        order = COMPILE_ONLY_ORDER if self.compile_only else FULL_ORDER
        return {k: getattr(self, k) for k in order}

    @classmethod
    def from_dict(cls, d: dict) -> BaselineComparison:
        """The baseline object of a ``to_dict`` (or of a ``--json`` file). Raises
        ``ValueError`` naming keys that are not fields."""
        return cls(**known(cls, d, "baseline"))
