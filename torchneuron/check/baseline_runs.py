"""A baseline measured in several processes (``--baseline-runs N``), and the comparison's
allowance for the offset one process carries.

Every latency statistic of one process carries that process's own offset (where its memory
landed, how its threads were placed, the load while it ran): the 95 % interval of a run
covers the noise between its iterations, not this. Measured on ``convnet`` (docs/check.md,
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
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from typing import Optional

import numpy as np

from . import perfstats

#: Where the child's result line starts on its stdout.
_TAG = "TORCHNEURON_BASELINE_RUN "


def estimates(p3: dict) -> dict[str, float]:
    """A run's figure of each eager statistic on the work-time basis (``perfstats.work_ratio``
    of its pooled phase 3 samples; the statistics its samples allow). Empty when phase 3 did
    not measure work time."""
    if not p3.get("work_time_basis") or not p3.get("cpu_samples"):
        return {}
    s = {"cpu": p3["cpu_samples"], "wall": p3["samples"], "launch": p3.get("launch_samples"),
         "busy": tuple(p3.get("busy_time_sides", perfstats.BUSY_TIME_SIDES))}
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
    return {"processes": len(per_process), "values": values,
            "median": {k: float(np.median(v)) for k, v in values.items()},
            "log_sd": {k: float(np.std(np.log(v), ddof=1)) for k, v in values.items() if len(v) >= 2}}


def adjust(c: dict, name: str, processes: Optional[dict], threshold: float) -> dict:
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
    return c | {"ci": ci, "baseline_value": med, "regression_above": (1 + threshold) * margin,
                "decision": perfstats.decide(ci, threshold, margin),
                "baseline_processes": {"values": processes["values"][name], "median": med, "log_sd": sd,
                                       "saving_process_value": own, "margin": margin}}


def measure(cfg, runs: int, ui=None) -> list[dict]:
    """Phase 3 of this check in ``runs`` fresh processes, one after another; each one's
    ``estimates`` (``{"error": why}`` for a process that failed)."""
    child_cfg = dataclasses.replace(cfg, save_baseline=None, baseline=None, json_path=None, junit_path=None,
                                    html_path=None, progress=False, profile=False, projection=False,
                                    max_cost_per_million=None, baseline_runs=1, baseline_process=True, argv=[])
    doc = json.dumps(dataclasses.asdict(child_cfg))
    pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([pkg_root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    out = []
    for i in range(runs):
        if ui is not None:
            ui.step(f"Baseline: phase 3 in a fresh process ({i + 2} of {runs + 1}, --baseline-runs)")
        p = subprocess.run([sys.executable, "-c", "from torchneuron.check.baseline_runs import _child; _child()"],
                           input=doc, capture_output=True, text=True, env=env)
        line = next((ln[len(_TAG):] for ln in p.stdout.splitlines() if ln.startswith(_TAG)), None)
        if p.returncode != 0 or line is None:
            out.append({"error": f"exit code {p.returncode}: {(p.stderr or '').strip()[-400:]}"})
        else:
            out.append(json.loads(line))
    return out


def _child() -> None:
    """One extra process of a baseline: the check of the config on stdin, its phase 3 figures
    on stdout (after ``_TAG``)."""
    from .config import CheckConfig
    from .runner import run

    cfg = CheckConfig(**json.loads(sys.stdin.read()))
    r = run(cfg)
    p3 = r.get("phase3") or {}
    res = estimates(p3) if p3.get("status") == "pass" else {"error": p3.get("reason") or "phase 3 did not run"}
    print(_TAG + json.dumps(res), flush=True)
