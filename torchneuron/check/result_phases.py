"""Phases 2 and 3 of a check as typed objects: ``Phase2Result`` (is it accurate) and
``Phase3Result`` (performance). ``to_dict`` gives the ``phase2``/``phase3`` object of the
``--json`` file (same keys, same order), ``from_dict`` reads it back (``ValueError`` naming
unknown keys). Their nested parts (one output's comparison, one side's latency summary, the
samples) are still the plain dicts docs/check.md ("Outputs") describes."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .result_base import fields_dict, known


@dataclass
class Phase2Result:
    """Phase 2: are the device's results accurate (``phases/phase2.py`` fills it).

    ``compiled`` is None (and absent from the JSON) unless ``--mode both`` compared the
    compiled model's outputs too."""

    #: "pass", "fail" or "skipped"
    status: str
    #: why phase 2 was skipped; None when it ran
    reason: str | None
    #: the reference device, e.g. "cpu"
    reference_device: str
    #: the check's ``--dtype``, e.g. "float32"
    dtype: str
    #: the relative tolerance of the rule (a fraction)
    tol: float
    #: where ``tol`` came from: "--tol" or "default for <dtype>"
    tol_source: str
    #: the RMSE multiplier ``m`` of the rule: 2 (float32) or 3 (bfloat16/float16)
    multiplier: float
    #: the accuracy rule, in words
    rule: str
    #: per output name, its comparison (``phase2.compare``): passed, decided_by, max_abs, ...
    outputs: dict[str, dict] = field(default_factory=dict)
    #: phase 2's warnings (non-finite elements on both sides)
    warnings: list[str] = field(default_factory=list)
    #: ``--mode both``: the compiled model's comparison: {"status", "outputs"}
    compiled: dict | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``phase2`` object of the JSON, keys in the order it has always had."""
        return fields_dict(self, ("compiled",))

    @classmethod
    def from_dict(cls, d: dict) -> Phase2Result:
        """The phase 2 object of a ``to_dict`` (or of a ``--json`` file). Raises
        ``ValueError`` naming keys that are not fields."""
        return cls(**known(cls, d, "phase2"))


#: Phase 3's keys written only once phase 3 (or the runner) set them, in the JSON's order.
PHASE3_OPTIONAL = (
    "device_name",
    "cold",
    "busy_time_sides",
    "compiled_cpu_clock",
    "compiled_work_time_basis",
    "compiled",
    "measure_wall_s",
    "device_calibration",
    "calibration_matmul",
    "cold_basis",
    "baseline_processes",
)


@dataclass
class Phase3Result:
    """Phase 3: stable performance after warm-up (``phases/phase3.py`` fills it). Times are
    seconds; samples are per-iteration seconds by side (index i = the same iteration).

    The fields after ``work_time_basis`` are None before phase 3 (or the runner) sets them,
    and then absent from the JSON; ``put`` sets one that may be None yet present."""

    #: "pass", "fail" or "skipped"
    status: str
    #: why phase 3 was skipped or failed; None when it passed
    reason: str | None
    #: samples (batch size) per iteration
    samples_per_iteration: int
    #: iterations, seconds, max_warmup, cv_window, cv_threshold in force
    settings: dict
    #: what one timed iteration is, in words
    timing: str
    #: how the median's 95% confidence interval is computed, in words
    ci_method: str
    #: the device's latency summary (seconds): p50_s, median_ci95_s, throughput, warmup, ...
    device: dict | None = None
    #: the reference device's summary (seconds), as ``device``
    reference: dict | None = None
    #: the host calibration workload's summary (seconds)
    calibration: dict | None = None
    #: device over reference: p50 latency and throughput ratios
    ratio: dict | None = None
    #: phase 3's warnings (a warm-up that never became stable)
    warnings: list[str] = field(default_factory=list)
    #: interleaved rounds measured and pooled
    rounds: int = 0
    #: wall seconds per iteration by side ("device", "reference", "calibration", ...)
    samples: dict | None = None
    #: CPU seconds per iteration by side (``workclock``)
    cpu_samples: dict | None = None
    #: the device step's host seconds inside its forward call, per iteration
    launch_samples: dict | None = None
    #: which CPU clock ``cpu_samples`` is read on
    cpu_clock: str | None = None
    #: why the latency statistic may use the work-time basis; None when it may not
    work_time_basis: str | None = None
    #: the device timed, e.g. "neuron:0"
    device_name: str | None = None
    #: cold (first call) seconds: {"device", "reference", "compiled"}
    cold: dict | None = None
    #: sides whose work time is the device's busy time (``--mode compile``)
    busy_time_sides: list[str] | None = None
    #: ``--mode both``: the clock of the compiled model's CPU samples
    compiled_cpu_clock: str | None = None
    #: ``--mode both``: the compiled model's work-time basis, None when it has none
    compiled_work_time_basis: str | None = None
    #: ``--mode both``: the compiled model's summary (seconds), or {"status", "reason"} of its failure
    compiled: dict | None = None
    #: wall seconds of the measured rounds
    measure_wall_s: float | None = None
    #: the device calibration workload's summary (seconds)
    device_calibration: dict | None = None
    #: the host matmul calibration's summary (seconds)
    calibration_matmul: dict | None = None
    #: what the cold figure is: "eager first pass" or "compiled first call (compile included)"
    cold_basis: str | None = None
    #: ``--baseline-runs``: the processes' figures (``baseline/runs.py``)
    baseline_processes: dict | None = None
    #: optional fields present with the value None (not written itself)
    _null: set[str] = field(default_factory=set, repr=False)

    def put(self, name: str, value: Any) -> None:
        """Set the optional field ``name``, written to the JSON even when ``value`` is None."""
        setattr(self, name, value)
        if value is None:
            self._null.add(name)
        else:
            self._null.discard(name)

    def to_dict(self) -> dict[str, Any]:
        """The ``phase3`` object of the JSON, keys in the order phase 3 has always set them:
        a compiled model that failed its warm-up right after the clocks, its summary after
        the calibrations."""
        d: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "_null" or (
                f.name in PHASE3_OPTIONAL and v is None and f.name not in self._null
            ):
                continue
            d[f.name] = v
        if "compiled" in d and "status" not in (d["compiled"] or {}):
            c = d.pop("compiled")
            rest = {k: d.pop(k) for k in ("cold_basis", "baseline_processes") if k in d}
            d["compiled"] = c
            d.update(rest)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Phase3Result:
        """The phase 3 object of a ``to_dict`` (or of a ``--json`` file). Raises
        ``ValueError`` naming keys that are not fields."""
        d = known(cls, d, "phase3")
        null = {k for k in PHASE3_OPTIONAL if k in d and d[k] is None}
        return cls(**d, _null=null)
