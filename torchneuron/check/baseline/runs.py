"""A baseline measured in several processes (``--baseline-runs N``), and the comparison's
allowance for the offset one process carries.

Every latency statistic of one process carries that process's own offset (where its memory
landed, how its threads were placed, the load while it ran): the 95 % interval of a run
covers the noise between its iterations, not this. Measured on ``convnet`` (docs/design/check-measurement.md,
"Between processes"): seven fresh processes of an unchanged build under two CPU burners read
device/reference x1.10-x1.19 with intervals of +/-3-5 %, and ``--mode both`` baselines
x1.20-x1.29 against re-checks at x1.11-x1.19. A baseline from one process passes that offset
to every re-check: a 20 % device slowdown read x1.03 against a slow one.

So ``--save-baseline`` measures phase 3 in ``N - 1`` more fresh processes (``measure``: the
same check, one round each after the interleaved warm-up round) and keeps each process's
figure of every statistic (``estimates``). The comparison (``adjust``) reads the change
against their **median**, not the saving process's figure, and a regression needs its whole
interval above ``(1 + t) * max(the statistic's margin, exp(2 * s))``, ``s`` the log standard
deviation between the baseline's processes: a re-check's own process offset is of that size.
A pass still needs the interval at or below ``1 + t``; in between reads inconclusive.

A re-check is one process, and carries its own offset the same way: one of seven unchanged
re-checks of ``convnet`` read ``model_or_inputs`` x1.56 (x1.50-x1.59), its convolutions slower
on both sides in that process alone. So a statistic a re-check's process reads as a
regression is measured again in fresh processes (``confirm``, by ``measure``; at most
``--baseline-runs`` - 1) and decided on the **median** of the processes' figures
(``confirmed``): one process's offset is not a verdict, a regression that persists still is.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys

import numpy as np

from ..result_phases import Phase3Result
from ..stats import perfstats

#: Where the child's result line starts on its stdout.
_TAG = "TORCHNEURON_BASELINE_RUN "


def estimates(p3: Phase3Result) -> dict[str, float]:
    """A run's figure of each eager statistic on the work-time basis (``perfstats.work_ratio``
    of its pooled phase 3 samples; the statistics its samples allow). Empty when phase 3 did
    not measure work time."""
    if not p3.work_time_basis or not p3.cpu_samples:
        return {}
    busy = p3.busy_time_sides if p3.busy_time_sides is not None else perfstats.BUSY_TIME_SIDES
    s = {
        "cpu": p3.cpu_samples,
        "wall": p3.samples,
        "launch": p3.launch_samples,
        "busy": tuple(busy),
    }
    out = {}
    for name, (num, den, _) in perfstats.WORK_STATISTICS.items():
        if all(s["cpu"].get(k) and s["wall"].get(k) for k in num + den):
            n = perfstats._n(s, num + den)
            v = perfstats.work_ratio(perfstats._side(s, num, n), perfstats._side(s, den, n))
            if math.isfinite(v) and v > 0:
                out[name] = v
    return out


def summary(per_process: list[dict[str, float]]) -> dict:
    """``{"values": {stat: [figure per process]}, "median": {...}, "log_sd": {...}}`` of the
    processes' estimates (the first is the saving process); ``log_sd`` (ddof 1) only for
    statistics measured in at least two processes."""
    names = sorted({k for e in per_process for k in e})
    values = {k: [e[k] for e in per_process if k in e] for k in names}
    return {
        "processes": len(per_process),
        "values": values,
        "median": {k: float(np.median(v)) for k, v in values.items()},
        "log_sd": {k: float(np.std(np.log(v), ddof=1)) for k, v in values.items() if len(v) >= 2},
    }


def adjust(c: dict, name: str, processes: dict | None, threshold: float) -> dict:
    """A statistic's comparison (``perfstats.compare_work``'s dict) read against the median of
    the baseline's processes and decided with their spread (module docstring). Unchanged when
    the baseline has fewer than two processes' figures of ``name``."""
    if not processes or name not in (processes.get("log_sd") or {}) or not c.get("ci"):
        return c
    med, sd = processes["median"][name], processes["log_sd"][name]
    own = c.get("baseline_value")
    if not own or not med:
        return c
    f = own / med
    ci = c["ci"] | {k: c["ci"][k] * f for k in ("ratio", "low", "high")}
    # the spread widens only from three processes: two give one degree of freedom (a noisy-host
    # test read a planted +30 % device slowdown as x1.20 [1.18, 1.22], undecided against it)
    widen = math.exp(2 * sd) if len(processes["values"][name]) >= 3 else 1.0
    margin = max(c["regression_above"] / (1 + threshold), widen)
    return c | {
        "ci": ci,
        "baseline_value": med,
        "regression_above": (1 + threshold) * margin,
        "decision": perfstats.decide(ci, threshold, margin),
        "baseline_processes": {
            "values": processes["values"][name],
            "median": med,
            "log_sd": sd,
            "saving_process_value": own,
            "margin": margin,
        },
    }


def measure(
    cfg,
    runs: int,
    ui=None,
    label: str = "Baseline: phase 3 in a fresh process",
    first: int = 2,
    of: str | None = None,
) -> list[dict]:
    """Phase 3 of this check in ``runs`` fresh processes, one after another; each one's
    ``estimates`` (``{"error": why}`` for a process that failed). Progress lines read
    ``label (first + i of of)``."""
    child_cfg = dataclasses.replace(
        cfg,
        save_baseline=None,
        baseline=None,
        json_path=None,
        junit_path=None,
        html_path=None,
        progress=False,
        profile=False,
        projection=False,
        max_cost_per_million=None,
        baseline_runs=1,
        baseline_process=True,
        argv=[],
    )
    doc = json.dumps(dataclasses.asdict(child_cfg))
    # the folder holding the torchneuron package (this file is torchneuron/check/baseline/runs.py)
    pkg_root = os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [pkg_root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    out = []
    for i in range(runs):
        if ui is not None:
            ui.step(f"{label} ({first + i} of {of or runs + 1}, --baseline-runs)")
        p = subprocess.run(
            [sys.executable, "-c", "from torchneuron.check.child import main; main()"],
            input=doc,
            capture_output=True,
            text=True,
            env=env,
        )
        line = next((ln[len(_TAG) :] for ln in p.stdout.splitlines() if ln.startswith(_TAG)), None)
        if p.returncode != 0 or line is None:
            out.append({"error": f"exit code {p.returncode}: {(p.stderr or '').strip()[-400:]}"})
        else:
            out.append(json.loads(line))
    return out


# ------------------------------------------------------------------ a re-check's regression, confirmed


def _scaled(c: dict, figure: float, threshold: float) -> tuple[dict, str]:
    """The first process's interval of statistic ``c`` moved to a run figure of ``figure``
    (its width kept), and ``perfstats.decide``'s verdict on it with ``c``'s margin."""
    f = figure / c["current_value"]
    ci = c["ci"] | {k: c["ci"][k] * f for k in ("ratio", "low", "high")}
    return ci, perfstats.decide(ci, threshold, c["regression_above"] / (1 + threshold))


def confirm(lat: dict, cfg, ui=None) -> dict | None:
    """Re-measure, in fresh processes, the statistics a re-check's own process read as a
    latency regression (``lat``: ``baseline.latency``), as a baseline's extra processes are
    measured (``measure``). At most ``cfg.baseline_runs - 1`` processes, one at a time,
    stopping once more than half of the ``cfg.baseline_runs`` processes read a regression of
    every such statistic (their median then does too, whatever the rest would read). Returns
    ``{"statistics": [names], "processes": [estimates of each fresh process], "failed": [why]}``
    for ``confirmed``; None when nothing is to be confirmed (no regression, ``--baseline-runs
    1``, ``--mode compile``, or the wall-time basis, whose figures ``estimates`` are not)."""
    stats = {
        n: c
        for n, c in (lat.get("statistics") or {}).items()
        if c.get("decides")
        and c.get("decision") == "regressed"
        and c.get("ci")
        and c.get("current_value")
    }
    if (
        not stats
        or cfg.baseline_runs < 2
        or cfg.mode == "compile"
        or not (lat.get("time_basis") or "").startswith("work time")
    ):
        return None
    total, t, runs, failed = cfg.baseline_runs, lat["threshold"], [], []

    def regressed_in(
        name,
    ):  # processes reading a regression of ``name``: this one and the fresh ones
        return 1 + sum(
            _scaled(stats[name], r[name], t)[1] == "regressed" for r in runs if r.get(name)
        )

    for _ in range(total - 1):
        e = measure(
            cfg,
            1,
            ui,
            "Latency regression in this process: phase 3 in a fresh process to confirm it",
            2 + len(runs) + len(failed),
            f"at most {total}",
        )[0]
        (failed if "error" in e else runs).append(e.get("error", e))
        if all(regressed_in(n) > total / 2 for n in stats):
            break
    return {"statistics": sorted(stats), "processes": runs, "failed": failed}


def confirmed(c: dict, name: str, conf: dict | None, threshold: float) -> dict:
    """Statistic ``c`` of a re-check decided on the **median** of its processes' figures (this
    process's and ``conf``'s fresh ones, ``confirm``), the first process's interval moved to
    it: a regression of one process is not a verdict, one that persists still is. Unchanged
    when ``name`` was not re-measured."""
    if not conf or name not in conf["statistics"] or c.get("decision") != "regressed":
        return c
    values = [c["current_value"]] + [r[name] for r in conf["processes"] if r.get(name)]
    med = float(np.median(values))
    ci, decision = _scaled(c, med, threshold)
    base = c["baseline_value"]
    return c | {
        "ci": ci,
        "current_value": med,
        "decision": decision,
        "confirmation": {
            "values": values,
            "ratios": [v / base for v in values],
            "median": med,
            "first_process": {
                "ci": c["ci"],
                "decision": c["decision"],
                "value": c["current_value"],
            },
            "failed": conf["failed"],
        },
    }
