"""A check's result as typed objects: ``CheckResult`` (the whole run), ``Phase1Result``
(does it run on the device), in ``result_phases.py`` ``Phase2Result`` (accuracy) and
``Phase3Result`` (performance), in ``result_training.py`` ``TrainingResult``, in
``result_cost.py`` ``CostResult``, in ``result_projection.py`` ``ProjectionResult``, in
``result_compile.py`` phase 1's ``CompileCheckResult``, in ``result_exact.py``
``ExactResult`` (the exact quantities per pass) and in ``result_baseline.py``
``BaselineComparison`` (``--baseline``), in ``result_profile.py`` ``ProfileResult``
(``--profile``). Runner, baseline and reports read their attributes;
``to_dict`` gives the dict the ``--json`` file holds (same keys, same order), ``from_dict``
reads it back.

Still plain dicts (their keys: docs/check.md, "Outputs"): the nested parts of the typed results (an output's comparison, a side's summary, a traced pass, a training step's
row, a core's projection, the compile check's error record, a latency comparison, the exact
gates' rows, a profile's spans and top operators)."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any

from .result_base import fields_dict, known
from .result_baseline import BaselineComparison
from .result_compile import CompileCheckResult
from .result_cost import CostResult
from .result_exact import ExactResult
from .result_phases import Phase2Result, Phase3Result
from .result_profile import ProfileResult
from .result_projection import ProjectionResult
from .result_training import TrainingResult

SCHEMA = "torchneuron.check.result/1"


def jsonable(x: Any) -> Any:
    """A copy of ``x`` that ``json.dumps(allow_nan=False)`` accepts: NaN and infinities
    become None, tuples lists, other objects (dtypes, devices) their ``str``. Keys
    starting with ``_`` are private and left out."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return jsonable(x.to_dict())
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items() if not str(k).startswith("_")}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, bool) or x is None or isinstance(x, (int, str)):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    return str(x)


@dataclass
class Phase1Result:
    """Phase 1: does the model run on the device (``phases/phase1.py`` fills it).

    Fields set only when phase 1 got that far are None before (and absent from the JSON):
    ``cold_latency_s``, ``uncomparable_outputs``, ``determinism`` (the eager passes ran),
    ``op_profile`` and ``op_profile_note`` (the eager passes passed)."""

    #: "pass" or "fail"
    status: str
    #: the device checked, e.g. "neuron:0"
    device: str
    #: always "eager": phase 1's own passes (the compiled check is ``compile``)
    mode: str
    #: None, or the failure: stage, type, op, message, short_message, hint, traceback, ...
    error: dict | None
    #: the CPU-fallback mode in force: "warn", "error" or the process's setting
    fallback_mode: str
    #: wall seconds of the first (cold) forward pass on the device
    cold_latency_s: float | None = None
    #: outputs that are not tensors: [{"name", "type"}]
    uncomparable_outputs: list[dict] | None = None
    #: whether two device runs gave bitwise identical outputs: {"identical", ...}
    determinism: dict | None = None
    #: device warnings caught during phase 1 (sorted, unique)
    warnings: list[str] = field(default_factory=list)
    #: each output tensor: {"name", "shape", "dtype", ...}
    outputs: list[dict] = field(default_factory=list)
    #: host time per operator over one pass: [{"op", "self_host_s", ...}] (seconds)
    op_profile: list[dict] | None = None
    #: what ``op_profile`` measures, or why profiling failed
    op_profile_note: str | None = None
    #: the compile check (``phases/compiled.py``); empty (``{}`` in the JSON) until phase 1 sets it
    compile: CompileCheckResult = field(default_factory=CompileCheckResult)
    #: CPU fallbacks: {"ops": {op: {"calls", "seconds", "share"}}, "total_seconds", "share", ...}
    fallback: dict = field(default_factory=dict)
    #: 64-bit narrowing counts by op of the eager passes
    narrowing: dict = field(default_factory=dict)
    #: peak device memory (bytes): in order, run ahead, reserved, weights, capacity, compiled
    memory: dict = field(default_factory=dict)

    _OPTIONAL = (
        "cold_latency_s",
        "uncomparable_outputs",
        "determinism",
        "op_profile",
        "op_profile_note",
    )

    def to_dict(self) -> dict[str, Any]:
        """The ``phase1`` object of the JSON, keys in the order it has always had."""
        d = fields_dict(self, self._OPTIONAL)
        if self.op_profile is None:
            # a failed eager pass skips the compile check: its entry was written last
            d["compile"] = d.pop("compile")
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Phase1Result:
        """The phase 1 object of a ``to_dict`` (or of a ``--json`` file). Raises
        ``ValueError`` naming keys that are not fields."""
        d = known(cls, d, "phase1")
        if isinstance(d.get("compile"), dict):
            d["compile"] = CompileCheckResult.from_dict(d["compile"])
        return cls(**d)


@dataclass
class CheckResult:
    """One ``torchneuron check`` run (``runner.run`` fills it, in this order).

    The phases' results are typed (``result*.py``). ``profile`` and
    ``inconclusive`` are None unless set, and then absent from the JSON."""

    #: the JSON's schema name and version
    schema: str = SCHEMA
    #: "pass", "fail" or "inconclusive"; None until decided
    verdict: str | None = None
    #: 0 pass, 1 fail or regression, 3 inconclusive (errors.py); None until decided
    exit_code: int | None = None
    #: one line per failure (phases, training, regressions, cost budget)
    failures: list[str] = field(default_factory=list)
    #: the check's warnings (phases 2 and 3, training, baseline)
    warnings: list[str] = field(default_factory=list)
    #: every option (``CheckConfig.to_dict``)
    config: dict = field(default_factory=dict)
    #: the model: name, parameters, batch_size, dtype, seed, fingerprint, ...
    model: dict = field(default_factory=dict)
    #: versions, device stack, host, environment (``manifest.collect``)
    manifest: dict = field(default_factory=dict)
    #: the regression thresholds in force (fractions; bytes)
    thresholds: dict = field(default_factory=dict)
    #: phase 1: does it run
    phase1: Phase1Result | None = None
    #: phase 2: is it accurate (``phases/phase2.py``)
    phase2: Phase2Result | None = None
    #: phase 3: performance, seconds (``phases/phase3.py``)
    phase3: Phase3Result | None = None
    #: ``--profile``: one steady-state iteration (``phases/profile.py``)
    profile: ProfileResult | None = None
    #: the exact quantities per pass (``phases/exact.py``)
    exact: ExactResult | None = None
    #: the training check (``phases/training.py``)
    training: TrainingResult | None = None
    #: the Trainium projection (``phases/projection.py``)
    projection: ProjectionResult | None = None
    #: the comparison with ``--baseline`` (``baseline/compare.py``); None without one
    baseline: BaselineComparison | None = None
    #: cost per million samples, USD (``projection/cost.py``)
    cost: CostResult | None = None
    #: why the verdict is inconclusive
    inconclusive: str | None = None
    #: wall seconds of the whole check
    elapsed_s: float | None = None
    #: the folder ``--save-baseline`` wrote, None when not saved
    baseline_saved: str | None = None

    _OPTIONAL = ("profile", "inconclusive")

    def to_dict(self) -> dict[str, Any]:
        """The dict the ``--json`` file holds (before ``jsonable``): same keys, same order."""
        return fields_dict(self, self._OPTIONAL)

    def to_json(self) -> str:
        """The ``--json`` file's text: strict, indented JSON."""
        return json.dumps(jsonable(self.to_dict()), indent=2, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, d: dict) -> CheckResult:
        """The result of a ``to_dict`` (or of a ``--json`` file read back). Raises
        ``ValueError`` for another schema (name or version: ``SCHEMA``) or for keys that
        are not fields (a file of another torchneuron version)."""
        d = known(cls, d, "result")
        if d.get("schema", SCHEMA) != SCHEMA:
            raise ValueError(
                f"check result: schema {d['schema']!r}, this torchneuron reads {SCHEMA!r}"
            )
        parts = {
            "phase1": Phase1Result,
            "phase2": Phase2Result,
            "phase3": Phase3Result,
            "training": TrainingResult,
            "projection": ProjectionResult,
            "cost": CostResult,
            "exact": ExactResult,
            "profile": ProfileResult,
            "baseline": BaselineComparison,
        }
        for name, part in parts.items():
            if d.get(name) is not None:
                d[name] = part.from_dict(d[name])
        return cls(**d)
