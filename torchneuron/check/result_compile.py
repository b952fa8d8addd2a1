"""Phase 1's compile check as a typed object: ``CompileCheckResult`` (``phases/compiled.py``
and ``phases/phase1.py`` fill it). ``to_dict`` gives the ``phase1.compile`` object of the
``--json`` file (same keys, same order), ``from_dict`` reads it back (``ValueError`` naming
unknown keys). The graph-break reasons, the error record, the output differences, the
compiled model's peak memory and the narrowing counts are still plain dicts."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .result_base import known

#: Written when checked, even when None (``torch._dynamo.explain`` failed).
_WHEN_CHECKED = ("graph_count", "graph_breaks")


@dataclass
class CompileCheckResult:
    """``torch.compile(model, backend="neuron")`` checked in phase 1. A field is None until
    the check got that far (and absent from the JSON then); an unchecked compile (``--mode
    eager``, no compiler, a failed eager pass) has ``checked``, ``modes`` and ``note``. The
    fields are declared in the order the check sets them, the JSON's key order."""

    #: whether torch.compile was tried (None: no compile entry yet, the JSON's ``{}``)
    checked: bool | None = None
    #: the modes checked: ["eager"] or ["eager", "compile"]
    modes: list[str] | None = None
    #: whether compiling, both calls and the warm compile succeeded (None when not checked)
    ok: bool | None = None
    #: graphs Dynamo captured (``torch._dynamo.explain``); None when explain failed
    graph_count: int | None = None
    #: graph breaks; None when explain failed
    graph_breaks: int | None = None
    #: each break: {"reason", "where"}
    break_reasons: list[dict] | None = None
    #: why not checked, or why explain failed
    note: str | None = None
    #: wall seconds of the cold first call (empty NEFF cache, compile included)
    compile_s: float | None = None
    #: the backend's own lowering + compile seconds in the cold call
    cold_backend_compile_s: float | None = None
    #: graphs handed to the backend in the first call
    compiled_graphs: int | None = None
    #: the names of the graphs that fell back to eager
    fallback_graphs: list[str] | None = None
    #: graphs that ran compiled (``compiled_graphs`` less the fallbacks)
    graphs_ran_compiled: int | None = None
    #: graphs compiled again by a second call with the same inputs
    recompiles: int | None = None
    #: compiled-graph launches in the first two calls
    graph_runs: int | None = None
    #: the largest absolute difference from the eager outputs, by output name
    max_abs_diff_vs_eager: dict | None = None
    #: wall seconds of the warm first call (executables from the NEFF cache)
    warm_compile_s: float | None = None
    #: the backend's own seconds in the warm call
    warm_backend_compile_s: float | None = None
    #: graphs read back from the NEFF cache in the warm call
    warm_cache_hits: int | None = None
    #: the compiled model's own peak device memory (``memory.compiled_peak``; bytes)
    memory: dict | None = None
    #: the failure (phase 1's error record: stage, compile_stage, type, op, ...)
    error: dict | None = None
    #: ``--mode compile``: "compiled" when phases 2 and 3 measure the compiled model
    phases_2_3: str | None = None
    #: 64-bit narrowing counts by op of the compiled runs
    narrowing: dict | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``phase1.compile`` object of the JSON, keys in the order the check sets them."""
        d: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is not None or (self.checked and f.name in _WHEN_CHECKED):
                d[f.name] = v
        return d

    @classmethod
    def from_dict(cls, d: dict) -> CompileCheckResult:
        """The compile object of a ``to_dict`` (or of a ``--json`` file). Raises
        ``ValueError`` naming keys that are not fields."""
        return cls(**known(cls, d, "phase1.compile"))
