"""Whether a re-check interleaves the same sides in phase 3 as its baseline did.

Every latency statistic is a ratio of sides timed in the same iterations, and which one
decides depends on the sides (with the reference: device/reference; without: device over
the device calibration, whose spread between processes is far larger). The review's false
regression (x1.9 under ``--skip-reference-perf``) and false pass (a 20 % device slowdown read
x1.03 with ``--mode eager``) both came from re-checks that timed other sides than their
``--mode both`` baseline (docs/design/check-measurement.md, "The interleaved sides"). Such a re-check is refused
(exit 2) and told which option to change, rather than compared on a statistic defined over
other sides.
"""

from __future__ import annotations

from ..errors import CheckUsageError
from ..result_phases import Phase3Result

#: Sides whose presence in the interleaved iterations changes the other sides' figures.
OPTIONAL_SIDES = ("reference", "compiled")


def timed_sides(metrics: dict) -> list[str] | None:
    """The sides a baseline's phase 3 interleaved (its ``interleaved`` record, else the keys of
    its per-iteration samples: baselines saved before it was recorded); None without samples."""
    if metrics.get("interleaved"):
        return list(metrics["interleaved"])
    smp = metrics.get("samples")
    return list(smp) if smp else None


def planned_sides(cfg) -> set[str]:
    """The optional sides this run's phase 3 will interleave, from its options: the reference
    unless ``--skip-reference-perf``, the compiled model under ``--mode both``."""
    return ({"reference"} if not cfg.skip_reference_perf else set()) | (
        {"compiled"} if cfg.mode == "both" else set()
    )


def check(path: str, meta: dict, measured: str, cfg) -> None:
    """Raise CheckUsageError when this run's phase 3 would interleave other optional sides than
    the baseline's (``meta``: its baseline.json; ``measured``: what its device figures are,
    ``eager`` or ``compiled``). The compiled model counts by the baseline's ``--mode`` (a
    baseline whose model did not compile under ``--mode both`` timed none; ``differs`` catches
    that after the run). It matters only where eager figures are compared (both runs time the
    eager model): ``--mode compile`` runs are compared on the compiled model's figures, with
    their own margin (perfstats.COMPILED_MARGIN)."""
    sides = timed_sides(meta.get("metrics") or {})
    if sides is None:
        return
    base, now = set(sides) & set(OPTIONAL_SIDES), planned_sides(cfg)
    mode = (meta.get("settings") or {}).get("mode")
    if mode in ("eager", "both"):
        base = (base - {"compiled"}) | ({"compiled"} if mode == "both" else set())
    where = f"baseline {path!r}"
    if ("reference" in base) != ("reference" in now):
        raise CheckUsageError(
            f"{where} was saved {'with' if 'reference' in base else 'without'} the reference timed in phase 3, "
            f"this run {'skips it' if 'reference' not in now else 'times it'}: the statistics of the two runs "
            'were measured beside other workloads and do not compare (docs/design/check-measurement.md, "The interleaved sides"). '
            + (
                "Remove --skip-reference-perf, or save a baseline with it."
                if "reference" in base
                else "Add --skip-reference-perf, or save a baseline without it."
            )
        )
    if (
        measured == "eager"
        and cfg.mode != "compile"
        and ("compiled" in base) != ("compiled" in now)
    ):
        raise CheckUsageError(
            f"{where} was saved {'with' if 'compiled' in base else 'without'} the compiled model timed in the "
            f"same interleaved iterations (--mode {'both' if 'compiled' in base else 'eager'}), this run uses "
            f"--mode {cfg.mode}: the eager model's statistics are defined over the sides timed together and "
            'would not compare (docs/design/check-measurement.md, "The interleaved sides"). '
            + (
                f"Re-check with --mode both, or save a baseline with --mode {cfg.mode}."
                if "compiled" in base
                else "Re-check with --mode eager, or save a baseline with --mode both."
            )
        )


def differs(metrics: dict, p3: Phase3Result | None) -> str | None:
    """Why the eager statistics of a run's phase 3 (``p3``) and a baseline's (``metrics``) do not
    compare, when their interleaved optional sides differ although the options matched (the
    compiled model failed to compile or to run in one of them); else None."""
    sides, now = timed_sides(metrics), list((p3.samples if p3 else None) or {})
    if sides is None or not now:
        return None
    a, b = set(sides) & set(OPTIONAL_SIDES), set(now) & set(OPTIONAL_SIDES)
    if a == b:
        return None
    return (
        f"the baseline's phase 3 interleaved {', '.join(sorted(a)) or 'neither reference nor compiled model'}, "
        f"this run's {', '.join(sorted(b)) or 'neither'} (the compiled model did not run in one of them): "
        "their statistics do not compare"
    )
