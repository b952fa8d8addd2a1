"""The statistic behind a latency verdict on a shared, noisy host.

A latency regression is decided on a *normalized* time per iteration, never on a raw p50:

- ``device_alone``: device time / reference time, both measured interleaved in the same
  iterations (both sides saw the same host, so its speed cancels);
- ``model_or_inputs``: reference time / calibration time (a fixed CPU workload timed
  between the same iterations), so a slower model or bigger inputs show even when the
  device's share did not change;
- ``device_over_device_calibration`` (reported, does not decide): device time / a fixed
  device workload's time: the emulated device's own speed shifts with host load (its
  stream hand-offs), and this shows how much.

Each side's time is its **minimum** over the run's iterations (``ESTIMATOR``): another
process can only add time to an iteration, so the least disturbed iteration is the best
estimate of the work itself. Measured on a 2-core host shared with other builds and two
CPU burners, the median's normalized ratio moved by up to 5x between runs of an unchanged
build, the minimum's by at most 13 %. The change is that normalized time, current over
baseline, with a 95 % percentile bootstrap interval (Efron & Tibshirani, *An
Introduction to the Bootstrap*, 1993, ch. 13).
Iteration times on a shared host are not independent: the host's load and the emulated
device's stream hand-offs shift for stretches of many iterations. So each sample is
resampled with the moving-block bootstrap (Kuensch 1989, *Ann. Statist.* 17(3)): blocks of
``ceil(sqrt(n))`` consecutive iterations, which keeps such stretches whole and widens the
interval by what they add. Both samples are resampled independently ``BOOTSTRAP_RESAMPLES``
times with a seeded generator, so the same samples always give the same interval. Decision against a
threshold ``t`` (a fraction, 0.10 = +10 %):

- ``regressed``: the whole interval is above ``1 + t``;
- ``pass``: the whole interval is at or below ``1 + t``;
- ``undecided``: the interval straddles ``1 + t``: measure again, then "inconclusive".
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

#: Bootstrap resamples per interval: the Monte Carlo error of a 2.5 % quantile with
#: 2000 resamples is below a tenth of the interval's width (Efron & Tibshirani, sec. 19.3).
BOOTSTRAP_RESAMPLES = 2000

#: How a side's iteration times become one figure (see the module docstring).
ESTIMATOR = "minimum"

#: Fewest samples per side for an interval (fewer: undecided).
MIN_SAMPLES = 5

#: The normalized statistics, their numerator/denominator sample names and what they detect.
STATISTICS: dict[str, tuple[str, str, str]] = {
    "device_alone": ("device", "reference", "the device alone: device/reference time of the same iteration grew"),
    "model_or_inputs": ("reference", "calibration",
                        "the model or its inputs: the reference is slower than host calibration explains"),
    "device_over_device_calibration": ("device", "device_calibration",
                                       "device time over a fixed device workload (informational)"),
}


def paired_ratios(num: Sequence[float], den: Sequence[float]) -> list[float]:
    """Per-iteration ratios ``num[i] / den[i]`` (iterations with a zero denominator dropped)."""
    return [float(a) / float(b) for a, b in zip(num, den) if b > 0]


def ratio_of_medians_ci(current: Sequence[float], baseline: Sequence[float], confidence: float = 0.95,
                        resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> Optional[dict]:
    """Point estimate and percentile-bootstrap interval of ``median(current) / median(baseline)``.

    Returns ``{"ratio", "low", "high", "confidence", "resamples", "n_current", "n_baseline"}``,
    or None when a side has fewer than ``MIN_SAMPLES`` samples or a zero median.
    """
    c = np.asarray(current, dtype=np.float64)
    b = np.asarray(baseline, dtype=np.float64)
    if c.size < MIN_SAMPLES or b.size < MIN_SAMPLES or np.median(b) <= 0:
        return None
    rng = np.random.default_rng(seed)
    mc = np.median(c[block_indices(c.size, resamples, rng)], axis=1)
    mb = np.median(b[block_indices(b.size, resamples, rng)], axis=1)
    mb[mb <= 0] = np.nan                       # only possible with zero samples; dropped below
    r = mc / mb
    r = r[np.isfinite(r)]
    a = (1 - confidence) / 2
    return {"ratio": float(np.median(c) / np.median(b)),
            "low": float(np.quantile(r, a)), "high": float(np.quantile(r, 1 - a)),
            "confidence": confidence, "resamples": resamples,
            "n_current": int(c.size), "n_baseline": int(b.size)}


def block_indices(n: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``(resamples, n)`` indices of moving-block bootstrap resamples of ``n`` ordered
    samples: random blocks of ``ceil(sqrt(n))`` consecutive indices, concatenated."""
    length = min(n, math.ceil(math.sqrt(n)))
    blocks = math.ceil(n / length)
    starts = rng.integers(0, n - length + 1, size=(resamples, blocks))
    return (starts[:, :, None] + np.arange(length)).reshape(resamples, -1)[:, :n]


def decide(ci: Optional[dict], threshold: float) -> str:
    """``regressed`` / ``pass`` / ``undecided`` for an interval against ``1 + threshold``."""
    if ci is None:
        return "undecided"
    limit = 1 + threshold
    if ci["low"] > limit:
        return "regressed"
    if ci["high"] <= limit:
        return "pass"
    return "undecided"


def min_ratio_ci(cur_num: Sequence[float], cur_den: Sequence[float], base_num: Sequence[float],
                 base_den: Sequence[float], confidence: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES,
                 seed: int = 0) -> Optional[dict]:
    """Point estimate and moving-block bootstrap interval of the change of a normalized
    time: ``(min(cur_num) / min(cur_den)) / (min(base_num) / min(base_den))``. Iterations
    are resampled jointly on both sides of a run (index i is the same iteration). None
    when a run has fewer than ``MIN_SAMPLES`` iterations."""
    cn, cd, bn, bd = (np.asarray(x, dtype=np.float64) for x in (cur_num, cur_den, base_num, base_den))
    if min(cn.size, cd.size) < MIN_SAMPLES or min(bn.size, bd.size) < MIN_SAMPLES:
        return None
    n_c, n_b = min(cn.size, cd.size), min(bn.size, bd.size)
    cn, cd, bn, bd = cn[:n_c], cd[:n_c], bn[:n_b], bd[:n_b]
    if min(cd.min(), bn.min(), bd.min()) <= 0:
        return None
    rng = np.random.default_rng(seed)
    ic, ib = block_indices(n_c, resamples, rng), block_indices(n_b, resamples, rng)
    r = (cn[ic].min(axis=1) / cd[ic].min(axis=1)) / (bn[ib].min(axis=1) / bd[ib].min(axis=1))
    a = (1 - confidence) / 2
    return {"ratio": float((cn.min() / cd.min()) / (bn.min() / bd.min())),
            "low": float(np.quantile(r, a)), "high": float(np.quantile(r, 1 - a)),
            "confidence": confidence, "resamples": resamples, "n_current": int(n_c), "n_baseline": int(n_b)}


def compare(name: str, current: dict[str, list[float]], baseline: dict[str, list[float]],
            threshold: float, seed: int = 0) -> Optional[dict]:
    """One normalized statistic (a key of ``STATISTICS``) of a run against its baseline.
    ``current``/``baseline`` map ``device``/``reference``/``calibration``/
    ``device_calibration`` to per-iteration seconds (interleaved: index i of each list is
    the same iteration). The estimate is the ratio of the sides' minimums (``ESTIMATOR``).
    None when a side lacks the samples."""
    num, den, what = STATISTICS[name]
    if not (current.get(num) and current.get(den) and baseline.get(num) and baseline.get(den)):
        return None
    ci = min_ratio_ci(current[num], current[den], baseline[num], baseline[den], seed=seed)
    return {"statistic": f"min {num} / min {den}", "detects": what, "ci": ci,
            "threshold": threshold, "decision": decide(ci, threshold),
            "current_value": float(min(current[num]) / min(current[den])) if min(current[den]) > 0 else None,
            "baseline_value": float(min(baseline[num]) / min(baseline[den])) if min(baseline[den]) > 0 else None}
