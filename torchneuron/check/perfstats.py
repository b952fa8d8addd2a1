"""The statistic behind a latency verdict on a shared, noisy host.

A latency regression is decided on a *normalized* time, never on a raw p50:

- ``device_alone``: device time / reference time, both measured interleaved in the same
  iterations (both sides saw the same host, so its speed cancels);
- ``model_or_inputs``: reference time / calibration time (a fixed CPU workload timed
  between the same iterations), so a slower model or bigger inputs show even when the
  device's share did not change;
- ``device_over_device_calibration`` (reported, does not decide unless the reference was
  not timed): device time / a fixed device workload's time.

**Segments.** A run's iterations are cut into consecutive segments of ``segment_length``
iterations (``SEGMENT_ITERATIONS``, fewer for short baselines, never under
``MIN_SEGMENT_ITERATIONS``); a segment's value is ``min(numerator) / min(denominator)``
over its iterations. Another process can only add time to an iteration, so a segment's
least disturbed iteration estimates the work itself; the host's state changes for
stretches of tens of iterations, and the spread *between* segments is what that adds.
Measured on the 2-core development host under load (docs/check.md), a segment's
minimum ratio moved a planted 30 % device slowdown by 2.2 between-segment standard
deviations, the per-iteration paired ratio's median (device[i] / reference[i]) by 0.3:
the device's hand-offs are delayed at random moments that the reference does not share.

**Interval.** The change is the shift of log segment values, current against baseline,
estimated by Hodges-Lehmann (the median of all current-minus-baseline differences) with
its distribution-free confidence bounds: the ``k``-th smallest and largest difference,
``k`` from the exact null distribution of the Mann-Whitney statistic (a normal
approximation above ``EXACT_MAX_PAIRS`` pairs). Hollander, Wolfe & Chicken,
*Nonparametric Statistical Methods*, 3rd ed., 2014, sec. 4.3 (Bauer 1972). Decision
against a threshold ``t`` (a fraction, 0.10 = +10 %):

- ``regressed``: the whole interval is above ``1 + t``;
- ``pass``: the whole interval is at or below ``1 + t``;
- ``undecided``: it straddles ``1 + t`` (or too few segments for the confidence):
  measure again, then "inconclusive".
"""
from __future__ import annotations

import math
from statistics import NormalDist
from typing import Optional, Sequence

import numpy as np

#: Iterations per segment: the host kept a state for 30-120 iterations on the
#: development host, so a segment holds a good part of one.
SEGMENT_ITERATIONS = 20
#: Shortest segment (short runs: a baseline of ``n`` iterations gets ``n // 4``, so at
#: least four segments, as a 95 % interval of 4 against 4 needs).
MIN_SEGMENT_ITERATIONS = 5
#: Above this many current x baseline pairs, the Mann-Whitney null is taken as normal.
EXACT_MAX_PAIRS = 10_000

#: How a segment's iteration times become one figure (see the module docstring).
ESTIMATOR = "segment minimum"

#: The normalized statistics, their numerator/denominator sample names and what they detect.
STATISTICS: dict[str, tuple[str, str, str]] = {
    "device_alone": ("device", "reference", "the device alone: device/reference time of the same iterations grew"),
    "model_or_inputs": ("reference", "calibration",
                        "the model or its inputs: the reference is slower than host calibration explains"),
    "device_over_device_calibration": ("device", "device_calibration",
                                       "device time over a fixed device workload (informational)"),
}


def segment_length(n_baseline: int) -> int:
    """Iterations per segment for a baseline of ``n_baseline`` iterations (both runs use it)."""
    return max(MIN_SEGMENT_ITERATIONS, min(SEGMENT_ITERATIONS, n_baseline // 4))


def segment_values(num: Sequence[float], den: Sequence[float], length: int) -> list[float]:
    """``min(num) / min(den)`` over each run of ``length`` consecutive iterations (index i of
    both lists is the same iteration); a remainder shorter than ``length`` joins the last
    segment. Segments whose denominator minimum is not > 0 are dropped."""
    n = min(len(num), len(den))
    a, b = np.asarray(num[:n], dtype=np.float64), np.asarray(den[:n], dtype=np.float64)
    count = n // length
    out = []
    for s in range(count):
        end = n if s == count - 1 else (s + 1) * length
        lo_a, lo_b = a[s * length:end].min(), b[s * length:end].min()
        if lo_b > 0 and lo_a > 0:
            out.append(float(lo_a / lo_b))
    return out


def mann_whitney_null_cdf(m: int, n: int) -> np.ndarray:
    """``P(U <= u)`` for ``u = 0..m*n`` of the Mann-Whitney count under H0 (no shift,
    continuous data): the recursion p(m, n, u) = m/(m+n) p(m-1, n, u-n) + n/(m+n) p(m, n-1, u)
    (Hollander, Wolfe & Chicken 2014, sec. 4.1), in probabilities so it cannot overflow."""
    prev = [np.ones(1) for _ in range(n + 1)]     # row i = 0: U = 0 with certainty
    for i in range(1, m + 1):
        row = [np.zeros(i * j + 1) for j in range(n + 1)]
        row[0][0] = 1.0
        for j in range(1, n + 1):
            p = np.zeros(i * j + 1)
            p[j:j + prev[j].size] += i / (i + j) * prev[j]       # the largest is a current one
            p[:row[j - 1].size] += j / (i + j) * row[j - 1]
            row[j] = p
        prev = row
    return np.cumsum(prev[n])


def hl_shift_ci(current: Sequence[float], baseline: Sequence[float], confidence: float = 0.95) -> Optional[dict]:
    """Hodges-Lehmann estimate and distribution-free interval of the shift ``current -
    baseline`` (two samples, any continuous distribution of the same shape). Returns
    ``{"shift", "low", "high", "k", "coverage"}`` or None when the samples are too small
    for ``confidence`` (then no interval exists)."""
    x, y = np.asarray(baseline, dtype=np.float64), np.asarray(current, dtype=np.float64)
    m, n = x.size, y.size
    if m == 0 or n == 0:
        return None
    d = np.sort((y[None, :] - x[:, None]).ravel())
    alpha = 1 - confidence
    if m * n <= EXACT_MAX_PAIRS:
        cdf = mann_whitney_null_cdf(m, n)
        ok = np.nonzero(cdf <= alpha / 2)[0]          # P(U <= k-1) <= alpha/2
        if ok.size == 0:
            return None
        k = int(ok[-1]) + 1
        coverage = 1 - 2 * float(cdf[k - 1])
    else:
        z = NormalDist().inv_cdf(1 - alpha / 2)
        k = int(math.floor(m * n / 2 - z * math.sqrt(m * n * (m + n + 1) / 12)))
        if k < 1:
            return None
        coverage = confidence
    return {"shift": float(np.median(d)), "low": float(d[k - 1]), "high": float(d[m * n - k]),
            "k": k, "coverage": coverage}


def segment_ratio_ci(cur_num: Sequence[float], cur_den: Sequence[float], base_num: Sequence[float],
                     base_den: Sequence[float], confidence: float = 0.95) -> Optional[dict]:
    """The change of a normalized time, current over baseline: exp of the Hodges-Lehmann
    interval of the shift of log segment values. Returns ``{"ratio", "low", "high",
    "confidence", "coverage", "segment_iterations", "n_current", "n_baseline"}`` (n: segments),
    or None when there are too few segments for the confidence."""
    n_b = min(len(base_num), len(base_den))
    if n_b == 0 or min(len(cur_num), len(cur_den)) == 0:
        return None
    length = segment_length(n_b)
    c = segment_values(cur_num, cur_den, length)
    b = segment_values(base_num, base_den, length)
    hl = hl_shift_ci(np.log(c), np.log(b), confidence) if c and b else None
    if hl is None:
        return None
    return {"ratio": math.exp(hl["shift"]), "low": math.exp(hl["low"]), "high": math.exp(hl["high"]),
            "confidence": confidence, "coverage": hl["coverage"], "segment_iterations": length,
            "n_current": len(c), "n_baseline": len(b)}


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


def compare(name: str, current: dict[str, list[float]], baseline: dict[str, list[float]],
            threshold: float) -> Optional[dict]:
    """One normalized statistic (a key of ``STATISTICS``) of a run against its baseline.
    ``current``/``baseline`` map ``device``/``reference``/``calibration``/
    ``device_calibration`` to per-iteration seconds (interleaved: index i of each list is
    the same iteration). ``current_value``/``baseline_value``: the median segment value of
    each run. None when a side lacks the samples."""
    num, den, what = STATISTICS[name]
    if not (current.get(num) and current.get(den) and baseline.get(num) and baseline.get(den)):
        return None
    ci = segment_ratio_ci(current[num], current[den], baseline[num], baseline[den])
    length = segment_length(min(len(baseline[num]), len(baseline[den])))
    cv, bv = (segment_values(s[num], s[den], length) for s in (current, baseline))
    return {"statistic": f"min {num} / min {den} per {length}-iteration segment", "detects": what, "ci": ci,
            "threshold": threshold, "decision": decide(ci, threshold),
            "current_value": float(np.median(cv)) if cv else None,
            "baseline_value": float(np.median(bv)) if bv else None}
