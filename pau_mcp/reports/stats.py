"""The numbers behind a report: means, distributions, buckets and the paired bootstrap.

Pure functions over plain lists of floats, so every number a report shows can
be recomputed by hand (``docs/reports.md`` gives the formulas).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "CODEMATCH_BUCKETS",
    "JUDGE_SCORES",
    "BootstrapResult",
    "Interval",
    "ScoreStats",
    "bootstrap_interval",
    "codematch_bucket",
    "codematch_stats",
    "judge_stats",
    "mean_and_std",
    "paired_bootstrap",
    "pass_at_k",
    "pass_hat_k",
    "spearman",
]

#: The judge's scale.
JUDGE_SCORES: tuple[int, ...] = (1, 2, 3, 4, 5)

#: Code-match buckets: five 20-point ranges closed on the left, and a perfect match as its own bucket.
CODEMATCH_BUCKETS: tuple[str, ...] = ("0-20%", "20-40%", "40-60%", "60-80%", "80-<100%", "100%")

# Fractions come from counts of matching tests (k/n), so a value within this of a bucket edge sits on the edge.
_EDGE_TOLERANCE = 1e-9
# Resamples drawn per numpy batch: bounds memory (batch x sample size indices) on large suites.
_BATCH = 2000


@dataclass(frozen=True)
class ScoreStats:
    """One kind of score over a set of episodes or methods.

    Attributes:
        n: Values counted.
        mean: Their mean (0 when there are none).
        std: Their standard deviation (0 when there are none): the population's (``ddof=0``), or the sample's
            (``ddof=1``, pandas' default, which the reference protocol uses; 0 for fewer than two values).
        distribution: Count per judge score (1..5) or per code-match bucket, in scale order.
        share_good: Judge: share at or above 3. Code match: share exactly 1.0.
        share_bad: Judge: share below 3. Code match: share below 0.8.
    """

    n: int = 0
    mean: float = 0.0
    std: float = 0.0
    distribution: dict[str, int] = field(default_factory=dict)
    share_good: float = 0.0
    share_bad: float = 0.0
    ddof: int = 0

    def share(self, key: str) -> float:
        """The share of values in one distribution cell (0 when there are no values)."""
        return self.distribution.get(key, 0) / self.n if self.n else 0.0


@dataclass(frozen=True)
class BootstrapResult:
    """A paired bootstrap comparison of runs A and B on the same methods.

    Attributes:
        n: Methods compared (scored in both runs).
        mean_a: A's mean over those methods.
        mean_b: B's mean over those methods.
        p_a_better: ``1 - share of resamples where A's mean beats B's``: small means A is reliably better.
        p_b_better: The same the other way round.
        resamples: Resamples drawn.
        sample_size: Differences drawn per resample (half the methods, at least one).
        seed: The seed of the generator.
    """

    n: int
    mean_a: float
    mean_b: float
    p_a_better: float | None
    p_b_better: float | None
    resamples: int
    sample_size: int
    seed: int


def mean_and_std(values: Sequence[float], ddof: int = 0) -> tuple[float, float]:
    """The mean and standard deviation: population (``ddof=0``, numpy's default) or sample (``ddof=1``, pandas').

    Zeros for no values; the standard deviation is 0 when there are no more values than ``ddof``.
    """
    if not values:
        return 0.0, 0.0
    mean = math.fsum(values) / len(values)
    if len(values) <= ddof:
        return mean, 0.0
    variance = math.fsum((v - mean) ** 2 for v in values) / (len(values) - ddof)
    return mean, math.sqrt(variance)


def judge_stats(values: Sequence[float], ddof: int = 0) -> ScoreStats:
    """Stats of judge scores (each 1..5; a value off the scale is rounded and clamped onto it)."""
    scores = [min(5, max(1, round(v))) for v in values]
    mean, std = mean_and_std(list(values), ddof)
    distribution = {str(s): scores.count(s) for s in JUDGE_SCORES}
    good = sum(1 for s in scores if s >= 3)
    return _stats(len(scores), mean, std, distribution, good, len(scores) - good, ddof)


def codematch_bucket(value: float) -> str:
    """The bucket of a code-match fraction: ``[0,0.2)`` ... ``[0.8,1.0)``, and 1.0 exactly as ``100%``."""
    if value >= 1.0 - _EDGE_TOLERANCE:
        return CODEMATCH_BUCKETS[-1]
    index = min(4, max(0, math.floor(value * 5 + _EDGE_TOLERANCE)))
    return CODEMATCH_BUCKETS[index]


def codematch_stats(values: Sequence[float], ddof: int = 0) -> ScoreStats:
    """Stats of code-match fractions (0..1)."""
    buckets = [codematch_bucket(v) for v in values]
    mean, std = mean_and_std(list(values), ddof)
    distribution = {b: buckets.count(b) for b in CODEMATCH_BUCKETS}
    perfect = distribution[CODEMATCH_BUCKETS[-1]]
    # Below 0.8 is the first four buckets, so the share always agrees with the distribution.
    below = sum(distribution[b] for b in CODEMATCH_BUCKETS[:4])
    return _stats(len(buckets), mean, std, distribution, perfect, below, ddof)


def _stats(
    n: int, mean: float, std: float, distribution: dict[str, int], good: int, bad: int, ddof: int = 0
) -> ScoreStats:
    return ScoreStats(n, mean, std, distribution, good / n if n else 0.0, bad / n if n else 0.0, ddof)


def paired_bootstrap(
    a: Sequence[float], b: Sequence[float], *, resamples: int = 10_000, seed: int = 0, exact: bool = False
) -> BootstrapResult:
    """Paired bootstrap significance of run A against run B, as the reference benchmark does it.

    The per-method differences ``a[i] - b[i]`` are resampled: each resample
    draws half as many differences as there are methods (at least one), with
    replacement, and A beats B in it when their sum is above zero (B beats A
    when below; a tie counts for neither). ``p_a_better = 1 - wins_a / resamples``,
    and the same for B, so two identical runs get 1 both ways.

    Args:
        a: A's score per method.
        b: B's score on the same methods, in the same order.
        resamples: How many resamples to draw.
        seed: Seeds a fresh generator, so the same inputs and seed give the same p-values.
        exact: Compare the resample's mean of A with its mean of B with ``>`` and ``<``, as the reference does,
            so a difference of float noise (two means equal on paper, 1e-16 apart) is a win; by default a sum
            of differences within 1e-9 per draw of zero is a tie.

    Raises:
        ValueError: ``a`` and ``b`` differ in length, or ``resamples`` is below 1.
    """
    if len(a) != len(b):
        raise ValueError(f"paired scores must have one value per method in both runs (got {len(a)} and {len(b)})")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1 (got {resamples})")
    n = len(a)
    sample_size = max(1, n // 2)
    mean_a = math.fsum(a) / n if n else 0.0
    mean_b = math.fsum(b) / n if n else 0.0
    if n == 0:
        return BootstrapResult(0, 0.0, 0.0, None, None, resamples, 0, seed)
    first, second = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    differences = first - second
    rng = np.random.default_rng(seed)
    # Sums of fractions are not exact: a difference that is zero on paper may come out as 1e-16.
    tolerance = _EDGE_TOLERANCE * sample_size
    wins_a = wins_b = 0
    for start in range(0, resamples, _BATCH):
        count = min(_BATCH, resamples - start)
        drawn = rng.integers(0, n, size=(count, sample_size))
        if exact:  # the reference's comparison: each side's mean on its own, float noise and all
            means_a, means_b = first[drawn].mean(axis=1), second[drawn].mean(axis=1)
            wins_a += int((means_a > means_b).sum())
            wins_b += int((means_a < means_b).sum())
            continue
        sums = differences[drawn].sum(axis=1)
        wins_a += int((sums > tolerance).sum())
        wins_b += int((sums < -tolerance).sum())
    return BootstrapResult(
        n, mean_a, mean_b, 1 - wins_a / resamples, 1 - wins_b / resamples, resamples, sample_size, seed
    )


def _ranks(values: Sequence[float]) -> np.ndarray:
    """Ranks from 1, ties sharing their mean rank."""
    data = np.asarray(values, dtype=float)
    order = np.argsort(data, kind="mergesort")
    ranks = np.empty(len(data), dtype=float)
    sorted_values = data[order]
    start = 0
    while start < len(data):
        end = start
        while end + 1 < len(data) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman's rank correlation of paired values: Pearson's correlation of their ranks (ties share a mean rank).

    None when it is undefined: fewer than two pairs, or one side with every value equal.

    Raises:
        ValueError: ``a`` and ``b`` differ in length.
    """
    if len(a) != len(b):
        raise ValueError(f"paired values must have the same length (got {len(a)} and {len(b)})")
    if len(a) < 2:
        return None
    ra, rb = _ranks(a), _ranks(b)
    da, db = ra - ra.mean(), rb - rb.mean()
    denominator = math.sqrt(float((da * da).sum()) * float((db * db).sum()))
    if denominator == 0:
        return None
    return float((da * db).sum()) / denominator


@dataclass(frozen=True)
class Interval:
    """A mean and its percentile bootstrap confidence interval.

    Attributes:
        n: Values.
        mean: Their mean (0 with none).
        low: The interval's lower bound (None with no values).
        high: Its upper bound.
        level: The confidence level (0.95).
    """

    n: int
    mean: float
    low: float | None
    high: float | None
    level: float = 0.95

    def overlaps(self, other: Interval) -> bool | None:
        """Whether two intervals share a point; None when either is undefined."""
        if None in (self.low, self.high, other.low, other.high):
            return None
        return bool(self.low <= other.high and other.low <= self.high)  # type: ignore[operator]


def bootstrap_interval(
    values: Sequence[float], *, resamples: int = 10_000, seed: int = 0, level: float = 0.95
) -> Interval:
    """The mean of ``values`` with its percentile bootstrap interval: ``resamples`` resamples of ``len(values)``
    values drawn with replacement from a generator seeded with ``seed``, their means' ``(1-level)/2`` and
    ``(1+level)/2`` quantiles. One value gives an interval of that value; none, an undefined one.

    Raises:
        ValueError: ``resamples`` below 1 or ``level`` outside (0, 1).
    """
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1 (got {resamples})")
    if not 0 < level < 1:
        raise ValueError(f"the confidence level must be between 0 and 1 (got {level})")
    n = len(values)
    if n == 0:
        return Interval(0, 0.0, None, None, level)
    data = np.asarray(values, dtype=float)
    mean = math.fsum(values) / n
    rng = np.random.default_rng(seed)
    means = np.empty(resamples, dtype=float)
    for start in range(0, resamples, _BATCH):
        count = min(_BATCH, resamples - start)
        means[start : start + count] = data[rng.integers(0, n, size=(count, n))].mean(axis=1)
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return Interval(n, mean, float(low), float(high), level)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of ``k`` attempts drawn without replacement from ``n`` (``c`` of them passing)
    passes: ``1 - C(n-c, k) / C(n, k)``, the unbiased estimator of Chen et al. (2021).

    Raises:
        ValueError: not ``0 <= c <= n`` and ``1 <= k <= n``.
    """
    _check_counts(n, c, k)
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """The chance that all of ``k`` attempts drawn without replacement from ``n`` (``c`` passing) pass:
    ``C(c, k) / C(n, k)``, pass^k as tau-bench defines it (reliability rather than capability).

    Raises:
        ValueError: not ``0 <= c <= n`` and ``1 <= k <= n``.
    """
    _check_counts(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def _check_counts(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= passing <= attempts and 1 <= k <= attempts (got n={n}, c={c}, k={k})")
