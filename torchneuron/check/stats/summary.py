"""Statistics of iteration times: percentiles, the confidence interval of the median,
the rolling coefficient of variation that decides when warm-up is over, and RMSE.

All times are in seconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from statistics import NormalDist

import numpy as np
import torch


def percentile(times: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation between order statistics
    (Hyndman & Fan 1996, definition 7; NumPy's default method)."""
    return float(np.percentile(np.asarray(times, dtype=np.float64), q))


def cv(times: Sequence[float]) -> float:
    """Coefficient of variation: sample standard deviation (n-1) over the mean."""
    a = np.asarray(times, dtype=np.float64)
    if a.size < 2 or a.mean() == 0:
        return float("inf")
    return float(a.std(ddof=1) / a.mean())


def rolling_cv(times: Sequence[float], window: int) -> list[float | None]:
    """``cv`` of the last ``window`` times at every iteration (None before ``window``)."""
    return [
        cv(times[i + 1 - window : i + 1]) if i + 1 >= window else None for i in range(len(times))
    ]


def median_ci_ranks(n: int, confidence: float = 0.95) -> tuple[int, int] | None:
    """1-based ranks ``(j, k)`` such that ``[x_(j), x_(k)]`` is a distribution-free
    confidence interval of the median with coverage >= ``confidence``.

    The number of samples below the median is Binomial(n, 1/2), so
    ``P(x_(j) <= median < x_(k)) = P(j <= B <= k-1)``; we take the symmetric pair
    ``k = n + 1 - j`` with the largest ``j`` whose exact binomial coverage is still
    >= ``confidence`` (Conover, *Practical Nonparametric Statistics*, 3rd ed. 1999,
    section 3.2, confidence interval for a quantile). Exact integer arithmetic, no
    normal approximation. None when n is too small (n < 6 at 95 %).
    """
    if n < 1:
        return None

    a2 = Fraction(1 - confidence).limit_denominator(10**9) / 2
    if n > 5000:
        # the exact sum gets slow; the normal approximation of Binomial(n, 1/2) is
        # accurate to far better than one rank here (Conover, same section)
        j = int(math.floor(n / 2 - _z(confidence) * math.sqrt(n) / 2))
        return j, n + 1 - j
    total = 1 << n  # 2**n
    # largest j with P(B <= j-1) <= alpha/2  (then coverage = 1 - 2 P(B <= j-1) >= confidence)
    c, cum, j = 1, 0, 0  # c = comb(n, i), cum = count(B <= i)
    for i in range(0, n // 2 + 1):
        cum += c
        if cum * a2.denominator <= a2.numerator * total:
            j = i + 1
        else:
            break
        c = c * (n - i) // (i + 1)
    if j < 1:
        return None
    return j, n + 1 - j


def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def median_ci(times: Sequence[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """Distribution-free confidence interval of the median (see ``median_ci_ranks``)."""
    ranks = median_ci_ranks(len(times), confidence)
    if ranks is None:
        return None
    s = sorted(times)
    return float(s[ranks[0] - 1]), float(s[ranks[1] - 1])


def summarize(times: Sequence[float], samples_per_iteration: int) -> dict:
    """Latency statistics of measured iteration times (seconds) and throughput
    (samples per second = samples_per_iteration * iterations / total measured time)."""
    a = np.asarray(times, dtype=np.float64)
    if a.size == 0:
        return {"iterations": 0}
    ci = median_ci(list(a))
    total = float(a.sum())
    return {
        "iterations": int(a.size),
        "total_s": total,
        "mean_s": float(a.mean()),
        "std_s": float(a.std(ddof=1)) if a.size > 1 else 0.0,
        "min_s": float(a.min()),
        "max_s": float(a.max()),
        "p50_s": percentile(a, 50),
        "p90_s": percentile(a, 90),
        "p99_s": percentile(a, 99),
        "median_ci95_s": list(ci) if ci else None,
        "cv": cv(a) if a.size > 1 else None,
        "throughput_samples_per_s": samples_per_iteration * a.size / total if total > 0 else None,
    }


def rmse(a, b) -> float:
    """Root mean square error in float64: sqrt(mean((a - b)^2)). Tensors or arrays."""
    d = a.detach().to(torch.float64) - b.detach().to(torch.float64)
    if d.numel() == 0:
        return 0.0
    return float(torch.sqrt(torch.mean(d * d)))
