"""The Trainium projection of a check as a typed object: ``ProjectionResult``
(``phases/projection.py`` fills it). ``to_dict`` gives the ``projection`` object of the
``--json`` file (same keys, same order), ``from_dict`` reads it back (``ValueError`` naming
unknown keys). Each core's projection (``roofline.project``) is still a plain dict."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .result_base import fields_dict, known


@dataclass
class ProjectionResult:
    """``--projection``: the model lowered to StableHLO and its Trainium2/Trainium3 time and
    cost projected on a roofline (an ESTIMATE, never a verdict). A skipped or failed
    projection has ``status`` and ``reason`` only (the other fields None, absent from the
    JSON)."""

    #: "pass", "fail" or "skipped"
    status: str
    #: how the model was lowered (the exporter), in words
    how: str | None = None
    #: wall seconds of the lowering
    lower_s: float | None = None
    #: why it failed or was skipped; None when it passed
    reason: str | None = None
    #: what the figures are (an estimate, its fixed costs), in words
    note: str | None = None
    #: Trainium2's projection: latency_s_per_core (seconds), throughput, price, usd_per_million, ...
    trn2: dict | None = None
    #: Trainium3's projection, as ``trn2``
    trn3: dict | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``projection`` object of the JSON, keys in the order it has always had."""
        return fields_dict(self, ("how", "lower_s", "note", "trn2", "trn3"))

    @classmethod
    def from_dict(cls, d: dict) -> ProjectionResult:
        """The projection object of a ``to_dict`` (or of a ``--json`` file). Raises
        ``ValueError`` naming keys that are not fields."""
        return cls(**known(cls, d, "projection"))

    def core(self, key: str) -> dict:
        """The projection of one core: ``key`` "trn2" or "trn3"."""
        return {"trn2": self.trn2, "trn3": self.trn3}[key]
