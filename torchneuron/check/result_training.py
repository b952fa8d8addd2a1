"""The training check as a typed object: ``TrainingResult`` (``phases/training.py`` fills it;
its ``compiled`` section is one too). ``to_dict`` gives the ``training`` object of the
``--json`` file (same keys, same order), ``from_dict`` reads it back (``ValueError`` naming
unknown keys). Per-step rows, parameter figures and step times are still plain dicts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .result_base import known

#: The key order of a check that ran eager steps (or was skipped, or a compiled section that
#: compared its steps): a field is written when set; status and reason always.
EAGER_ORDER = (
    "steps",
    "optimizer",
    "tol",
    "form",
    "modes",
    "per_step",
    "loss_atol",
    "grad_norm_atol",
    "final_params",
    "step_time",
    "peak_allocated_bytes",
    "device_warnings",
    "warnings",
    "status",
    "reason",
    "graph_runs",
    "exact",
    "eager_verdict",
    "compiled",
)
#: ``--mode compile``: no eager steps, their verdict set before the compiled steps ran.
COMPILE_ORDER = (
    "steps",
    "optimizer",
    "tol",
    "form",
    "modes",
    "status",
    "reason",
    "device_warnings",
    "warnings",
    "note",
    "eager_verdict",
    "exact",
    "compiled",
)
#: A compiled section whose steps were not compared (no compiled graph ran, or compiling raised).
FAILED_ORDER = ("status", "error", "reason", "graph_runs", "device_warnings")


@dataclass
class TrainingResult:
    """The training check: a few optimizer steps on the device, the reference and in float64
    (``phases/training.py``). Fields other than ``status`` and ``reason`` are None where that
    run did not set them (and absent from the JSON): a skipped check has only those two."""

    #: "pass", "fail" or "skipped"
    status: str
    #: why it failed or was skipped; None when it passed
    reason: str | None = None
    #: optimizer steps run
    steps: int | None = None
    #: the optimizer, in words
    optimizer: str | None = None
    #: the relative tolerance of the rule (a fraction)
    tol: float | None = None
    #: how a step is taken: "loss_fn(output)" or "step(model, inputs)"
    form: str | None = None
    #: the modes stepped: ["eager"], ["compile"] or both
    modes: list[str] | None = None
    #: per step: loss and gradient norms on each side, verdicts, step seconds
    per_step: list[dict] | None = None
    #: the loss's absolute tolerance
    loss_atol: float | None = None
    #: each parameter group's gradient-norm absolute tolerance
    grad_norm_atol: dict | None = None
    #: the parameter updates compared: compared, compared_as, failed, atol, worst
    final_params: dict | None = None
    #: step seconds: device_p50_s, reference_p50_s, first_step_device_s
    step_time: dict | None = None
    #: peak allocated device memory with the optimizer's state (bytes)
    peak_allocated_bytes: int | None = None
    #: device warnings caught during the steps
    device_warnings: list[str] | None = None
    #: what the rule cannot judge (non-finite on both sides)
    warnings: list[str] | None = None
    #: ``--mode compile``: why no eager steps ran
    note: str | None = None
    #: a compiled section's compile failure (stage, op, source as phase 1 reports them)
    error: dict | None = None
    #: a compiled section's compiled graphs run in its steps
    graph_runs: int | None = None
    #: the last step's kernel trace per mode: {"eager": ..., "compiled": ...}
    exact: dict | None = None
    #: eager's own verdict: {"status", "reason"} (``status`` also carries compiled's)
    eager_verdict: dict | None = None
    #: the compiled steps (``--mode compile|both``), the same fields
    compiled: TrainingResult | None = None

    def _order(self) -> tuple[str, ...]:
        if self.modes == ["compile"]:
            return COMPILE_ORDER
        if self.per_step is None and (self.error is not None or self.graph_runs is not None):
            return FAILED_ORDER
        return EAGER_ORDER

    def to_dict(self) -> dict[str, Any]:
        """The ``training`` object of the JSON (or its ``compiled`` section), keys in the order
        the check has always set them."""
        d: dict[str, Any] = {}
        for name in self._order():
            v = getattr(self, name)
            if v is not None or name in ("status", "reason"):
                d[name] = v.to_dict() if isinstance(v, TrainingResult) else v
        return d

    @classmethod
    def from_dict(cls, d: dict) -> TrainingResult:
        """The training object of a ``to_dict`` (or of a ``--json`` file). Raises
        ``ValueError`` naming keys that are not fields."""
        d = known(cls, d, "training")
        if d.get("compiled") is not None:
            d["compiled"] = cls.from_dict(d["compiled"])
        return cls(**d)
