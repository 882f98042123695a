"""Repeated episodes: the epochs of one configuration (``pau-mcp eval --epochs K``) read together.

Each epoch is a run of its own (``<group>-epoch<k>``) recording ``{"epoch": {"group", "index", "of", "seed"}}`` in
its configuration. For each group with two or more epochs in a report, over the methods every epoch played:

* an episode **passes** when its counted code match (direct code for a run without code match, such as the probe's)
  is at least the threshold; a failed episode, or one without that score, does not;
* **pass@k** (at least one of k epochs passes) and **pass^k** (all k pass), each the mean over methods of the
  unbiased estimator from the method's c passing epochs of n (``stats.pass_at_k``, ``stats.pass_hat_k``);
* each epoch's **mean** over its scored episodes, with its 95% percentile bootstrap interval;
* **outcome consistency** (HAL's reliability): the share of methods whose n outcomes agree (all pass or none).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .data import RunData, epoch_info
from .stats import Interval, bootstrap_interval, pass_at_k, pass_hat_k

__all__ = ["DEFAULT_THRESHOLD", "EpochRun", "EpochSummary", "epoch_summaries", "method_means", "outcomes", "pass_hat"]

#: Code match at or above which an episode passes: the report's own line between a success and a failure.
DEFAULT_THRESHOLD = 0.8
# Fractions are counts of matching tests (k of m): a value within this of the threshold is on it.
_TOLERANCE = 1e-9


@dataclass(frozen=True)
class EpochRun:
    """One epoch of a group.

    Attributes:
        run: The epoch's run.
        index: Its number, from 1.
        seed: The sampling seed its agent's model was asked with (None when none was recorded).
        interval: Its mean score over its scored episodes, with the 95% bootstrap interval.
    """

    run: str
    index: int
    seed: int | None
    interval: Interval


@dataclass(frozen=True)
class EpochSummary:
    """The epochs of one configuration, read together.

    Attributes:
        group: The group's name (the run name ``eval --epochs`` was given).
        kind: The score an episode passes by: ``codematch``, or ``direct`` for runs without code match.
        threshold: The score at or above which an episode passes.
        epochs: Its epochs in order.
        methods: Methods every epoch played (the pass rates and consistency are over them).
        pass_at: pass@k for k = 1 .. len(epochs).
        pass_hat: pass^k for k = 1 .. len(epochs).
        consistency: The share of those methods whose outcomes agree in every epoch (None without methods).
    """

    group: str
    kind: str
    threshold: float
    epochs: tuple[EpochRun, ...]
    methods: int
    pass_at: tuple[float, ...]
    pass_hat: tuple[float, ...]
    consistency: float | None


def epoch_summaries(
    runs: Sequence[RunData],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    unscored_as_one: bool = False,
    resamples: int = 10_000,
    seed: int = 0,
) -> list[EpochSummary]:
    """One summary per group with at least two of its epochs among ``runs`` (in the order groups first appear)."""
    groups: dict[str, list[tuple[int, int | None, RunData]]] = {}
    for run in runs:
        info = epoch_info(run.config)
        if info is not None and run.episodes:
            groups.setdefault(info[0], []).append((info[1], info[2], run))
    summaries = []
    for group, members in groups.items():
        if len(members) < 2:
            continue
        members.sort(key=lambda member: member[0])
        kind = _kind([run for _, _, run in members])
        if kind is not None:
            summaries.append(_summary(group, kind, members, threshold, unscored_as_one, resamples, seed))
    return summaries


def _kind(runs: Sequence[RunData]) -> str | None:
    """Code match when any epoch recorded it, else direct code; None when neither was recorded."""
    for kind in ("codematch", "direct"):
        if any(m.status(kind) is not None for run in runs for m in run.methods):
            return kind
    return None


def _summary(
    group: str, kind: str, members: Sequence[tuple[int, int | None, RunData]], threshold: float,
    unscored_as_one: bool, resamples: int, seed: int,
) -> EpochSummary:  # fmt: skip
    epochs = []
    outcomes: dict[str, list[bool]] = {}
    for index, run_seed, run in members:
        values = []
        for method in run.methods:
            value = run.counted(method, kind, unscored_as_one)
            if value is not None:
                values.append(value)
            outcomes.setdefault(method.method_id, []).append(value is not None and value >= threshold - _TOLERANCE)
        epochs.append(EpochRun(run.name, index, run_seed, bootstrap_interval(values, resamples=resamples, seed=seed)))
    n = len(members)
    # Methods every epoch played: a method planned in only some epochs has no n outcomes to compare.
    common = {m: passed for m, passed in outcomes.items() if len(passed) == n}
    passing = [sum(passed) for passed in common.values()]
    pass_at = tuple(_mean([pass_at_k(n, c, k) for c in passing]) for k in range(1, n + 1))
    pass_hat = tuple(_mean([pass_hat_k(n, c, k) for c in passing]) for k in range(1, n + 1))
    consistency = sum(1 for c in passing if c in (0, n)) / len(passing) if passing else None
    return EpochSummary(group, kind, threshold, tuple(epochs), len(common), pass_at, pass_hat, consistency)


def outcomes(runs: Sequence[RunData], threshold: float, kind: str = "codematch") -> dict[str, list[bool]]:
    """Per method every run played, whether each run's episode passed (its counted ``kind`` at least ``threshold``;
    a failed or unscored episode does not pass)."""
    found: dict[str, list[bool]] = {}
    for run in runs:
        for method in run.methods:
            value = run.counted(method, kind)
            found.setdefault(method.method_id, []).append(value is not None and value >= threshold - _TOLERANCE)
    return {method: passed for method, passed in found.items() if len(passed) == len(runs)}


def pass_hat(runs: Sequence[RunData], threshold: float, kind: str = "codematch") -> float | None:
    """pass^k over the methods every run played, k = the number of runs; None without any such method or any
    ``kind`` recorded."""
    if not runs or not any(m.status(kind) is not None for run in runs for m in run.methods):
        return None
    passing = [sum(passed) for passed in outcomes(runs, threshold, kind).values()]
    k = len(runs)
    return sum(pass_hat_k(k, c, k) for c in passing) / len(passing) if passing else None


def method_means(runs: Sequence[RunData], kind: str) -> dict[str, float]:
    """Each method's mean counted score of ``kind`` over ``runs`` (K epochs weigh a method once), by method id."""
    found: dict[str, list[float]] = {}
    for run in runs:
        for method in run.methods:
            value = run.counted(method, kind)
            if value is not None:
                found.setdefault(method.method_id, []).append(value)
    return {method: sum(values) / len(values) for method, values in sorted(found.items())}


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0
