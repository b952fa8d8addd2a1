"""The exact quantities of a check as a typed object: ``ExactResult`` (``phases/exact.py``
fills it, the runner when it is skipped). ``to_dict`` gives the ``exact`` object of the
``--json`` file and of a saved baseline's metrics (same keys, same order), ``from_dict``
reads it back (``ValueError`` naming unknown keys). Each side's pass (``trace.summarize``:
kernels, fallbacks, copies, signatures, the eager projection) is still a plain dict; a
baseline's saved ``exact`` is compared as the dict it was read as (``baseline/exact.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .result_base import fields_dict, known


@dataclass
class ExactResult:
    """What the device ran per forward pass, eager and compiled: counts that do not depend on
    the host's load, so baselines gate on them. A skipped trace has ``status`` and ``reason``
    only; a traced one every field from ``status`` to ``compiled`` (None where not measured)
    and, when its trace raised, ``error`` after them."""

    #: "pass", "error" (the trace raised: nothing is compared) or "skipped"
    status: str
    #: the cost of one launch the eager projection priced (microseconds)
    launch_us: float | None = None
    #: phase 1's compile check: {"compiled_graphs", "graph_breaks", "recompiles"}; None when
    #: not checked
    compile: dict | None = None
    #: phase 1's peak allocated device memory (bytes; ``memory.measured_peak``)
    peak_allocated_bytes: int | None = None
    #: what that peak is: "in order" or "run ahead" (eager), "compiled" (``--mode compile``)
    peak_allocated_basis: str | None = None
    #: the eager model's second traced pass (``trace.summarize``): kernels, kernels_by_op,
    #: signatures, graphs, fused_segments, fused_kernels, fallback_calls, fallbacks_by_op,
    #: copies, new_signatures, projection (Trainium seconds), concatenation
    eager: dict | None = None
    #: the compiled model's second traced pass, as ``eager`` without projection and
    #: concatenation; None when no compiled model ran
    compiled: dict | None = None
    #: why the trace failed ("Type: message"); None unless it raised
    error: str | None = None
    #: why it was skipped; None when traced
    reason: str | None = None

    @property
    def passed(self) -> bool:
        """Whether the trace ran: the only state whose figures are compared and saved."""
        return self.status == "pass"

    def why_not(self) -> str | None:
        """Why there are no figures: the trace's error or the skip's reason."""
        return self.error or self.reason

    def side(self, name: str) -> dict | None:
        """One side's pass: ``name`` "eager" or "compiled"."""
        return {"eager": self.eager, "compiled": self.compiled}[name]

    def sides(self) -> list[str]:
        """The sides traced, eager first."""
        return [s for s in ("eager", "compiled") if self.side(s)]

    def eager_projection(self, core: str = "trn2") -> dict | None:
        """The eager pass's projection on ``core`` ("trn2", "trn3"; seconds), None without."""
        return ((self.eager or {}).get("projection") or {}).get(core)

    def to_dict(self) -> dict[str, Any]:
        """The ``exact`` object of the JSON, keys in the order it has always had."""
        if self.status == "skipped":
            return {"status": self.status, "reason": self.reason}
        return fields_dict(self, ("error", "reason"))

    @classmethod
    def from_dict(cls, d: dict) -> ExactResult:
        """The exact object of a ``to_dict`` (or of a ``--json`` file). Raises
        ``ValueError`` naming keys that are not fields."""
        return cls(**known(cls, d, "exact"))
