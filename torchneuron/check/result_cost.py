"""The cost section of a check as a typed object: ``CostResult`` (``projection/cost.py`` fills
it). ``to_dict`` gives the ``cost`` object of the ``--json`` file (same keys, same order),
``from_dict`` reads it back (``ValueError`` naming unknown keys). Each side's figures (price
and priced throughput) are still the plain dicts docs/check.md ("Outputs") describes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .result_base import fields_dict, known


@dataclass
class CostResult:
    """Cost per million samples at the measured throughput, in USD (on-demand prices).

    A side's dict holds its price (``instance``, ``usd_per_hour``, ``source``, ``as_of``) and,
    once phase 3 timed it, ``throughput_samples_per_s``, ``overhead_s`` (seconds),
    ``overhead_label``, ``usd_per_million`` (overhead amortized) and ``usd_per_million_steady``.
    ``compiled`` is None (and absent from the JSON) unless phase 3 timed the compiled model."""

    #: the device's price and figures
    device: dict
    #: the reference device's price and figures
    reference: dict
    #: samples the one-time overhead is amortized over (``--amortize-samples``)
    amortize_samples: int
    #: the cost formula, in words
    formula: str
    #: ``--max-cost-per-million`` (USD), None without a budget
    budget_usd_per_million: float | None = None
    #: whether the device's amortized cost exceeds the budget; None without one (or untimed)
    over_budget: bool | None = None
    #: what the figures are not (emulator, the priced instance, one core's share)
    notes: list[str] = field(default_factory=list)
    #: ``--mode both``: the compiled model's figures, priced at the device's price
    compiled: dict | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``cost`` object of the JSON, keys in the order it has always had."""
        return fields_dict(self, ("compiled",))

    @classmethod
    def from_dict(cls, d: dict) -> CostResult:
        """The cost object of a ``to_dict`` (or of a ``--json`` file). Raises ``ValueError``
        naming keys that are not fields."""
        return cls(**known(cls, d, "cost"))
