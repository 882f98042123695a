"""The paper's analyses a report adds to its score tables.

- Suite profiles: methods by number of arguments (the paper's Table 1) and test-suite sizes (its Fig. 10),
  for any suite, from its manifests.
- Rank correlation of per-method scores between runs (its Fig. 12): Spearman's rho over the methods
  both scored.
- Self-contradiction (its Fig. 13): an episode whose description, turned into code by the code writer,
  disagrees with what the agent itself observed; flagged per episode from the scorer's check, counted
  per run (under the reference protocol among the unsolved episodes only, as the paper counts them).
- The upper bound: each run's code match beside the code match of the gold descriptions on the same
  methods (``pau-mcp score --gold``).
- Exploration coverage (``pau-mcp coverage``): per run, how much of what the hidden tests execute the
  agents' calls reached, its distribution, and how it relates to the scores.
- Memorisation (``pau-mcp create --variants-of``): per model, its score on original methods against its score
  on their variants; a drop is evidence that the originals' answers were remembered rather than found.

Pure functions over what ``report`` loaded; rendering is in ``render`` and ``plots``.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pau_mcp.protocol import RULES

from .data import RunData, is_failure
from .stats import BootstrapResult, ScoreStats, codematch_stats, paired_bootstrap, spearman

__all__ = [
    "SIZE_BINS",
    "Contradictions",
    "Correlation",
    "CoverageSummary",
    "SuiteProfile",
    "UpperBound",
    "VariantGap",
    "contradictions",
    "correlations",
    "coverage_summaries",
    "suite_profile",
    "upper_bounds",
    "variant_gaps",
]

#: Test-suite size bins of the suite table: [low, high) with the last open.
SIZE_BINS: tuple[tuple[int, int | None], ...] = ((0, 5), (5, 10), (10, 20), (20, 30), (30, 50), (50, None))


@dataclass(frozen=True)
class SuiteProfile:
    """A suite's shape.

    Attributes:
        name: The suite.
        arity: Methods per number of arguments.
        tests: Each method's number of hidden test inputs, in method order.
    """

    name: str
    arity: dict[int, int]
    tests: tuple[int, ...]

    @property
    def methods(self) -> int:
        """Methods in the suite."""
        return len(self.tests)

    @property
    def sizes(self) -> Counter[int]:
        """Methods per test-suite size (the histogram)."""
        return Counter(self.tests)

    def size_stats(self) -> tuple[int, float, float, int]:
        """Smallest, median, mean and largest test-suite size (zeros for an empty suite)."""
        if not self.tests:
            return 0, 0.0, 0.0, 0
        return min(self.tests), float(statistics.median(self.tests)), statistics.fmean(self.tests), max(self.tests)

    def binned(self) -> list[int]:
        """Methods per ``SIZE_BINS`` bin."""
        return [sum(1 for n in self.tests if n >= low and (high is None or n < high)) for low, high in SIZE_BINS]


def suite_profile(name: str, methods: Iterable[Any]) -> SuiteProfile:
    """The profile of a suite from its methods (anything with ``params`` and ``tests``)."""
    methods = list(methods)
    return SuiteProfile(
        name=name,
        arity=dict(sorted(Counter(len(m.params) for m in methods).items())),
        tests=tuple(len(m.tests) for m in methods),
    )


@dataclass(frozen=True)
class Correlation:
    """Spearman's rank correlation of two runs' per-method scores of one kind.

    Attributes:
        a: The first run.
        b: The second run.
        kind: The score kind.
        n: Methods scored in both.
        rho: The correlation, or None when undefined (fewer than two methods, or one run's scores all equal).
    """

    a: str
    b: str
    kind: str
    n: int
    rho: float | None


def _per_method(run: RunData, kind: str, unscored_as_one: bool) -> dict[str, float]:
    """Each method's score of a kind in a run (a method submitted in several sessions: their mean)."""
    found: dict[str, list[float]] = {}
    for m in run.methods:
        value = run.counted(m, kind, unscored_as_one)
        if value is not None:
            found.setdefault(m.method_id, []).append(value)
    return {method: math.fsum(values) / len(values) for method, values in found.items()}


def correlations(runs: Sequence[RunData], kinds: Sequence[str], unscored_as_one: bool) -> list[Correlation]:
    """Every pair of runs, for every kind both scored, over the methods both scored."""
    found = []
    for kind in kinds:
        scores = {run.name: _per_method(run, kind, unscored_as_one) for run in runs}
        for a, b in itertools.combinations(runs, 2):
            common = sorted(scores[a.name].keys() & scores[b.name].keys())
            if not common:
                continue
            rho = spearman([scores[a.name][m] for m in common], [scores[b.name][m] for m in common])
            found.append(Correlation(a.name, b.name, kind, len(common), rho))
    return found


@dataclass(frozen=True)
class Contradictions:
    """How often a run's descriptions contradict what its agent observed.

    Attributes:
        run: The run.
        model: The agent's model.
        checked: Done episodes whose code match ran the check (the code writer got the observed examples); under
            a protocol that counts only unsolved episodes (the reference's), those of them that failed.
        contradicting: Of those, episodes where the description's code disagrees with at least one observation.
        inputs: Observed inputs checked, over those episodes.
        disagree: Of those, inputs where the code disagrees.
        methods: The contradicting episodes' methods.
        among: ``checked`` (every checked episode) or ``unsolved`` (only those that failed, as
            ``data.is_failure`` decides by the run's protocol): the paper's Fig. 13 counts among unsolved ones.
    """

    run: str
    model: str
    checked: int
    contradicting: int
    inputs: int
    disagree: int
    methods: tuple[str, ...]
    among: str = "checked"

    @property
    def share(self) -> float:
        """Contradicting episodes over checked ones (0 when none was checked)."""
        return self.contradicting / self.checked if self.checked else 0.0


def contradictions(runs: Sequence[RunData], unscored_as_one: bool = False) -> list[Contradictions]:
    """Per run that has any checked episode, its self-contradiction counts (under the reference protocol, among
    the checked episodes that failed: its unsolved ones)."""
    found = []
    for run in runs:
        unsolved = RULES[run.protocol].contradictions_of_unsolved
        checks = [
            (m.method_id, c)
            for m in run.methods
            if (c := m.contradiction) is not None and (not unsolved or is_failure(m, unscored_as_one, run))
        ]
        if not checks:
            continue
        flagged = tuple(method for method, (_, disagree) in checks if disagree)
        found.append(
            Contradictions(
                run=run.name,
                model=run.setting("model"),
                checked=len(checks),
                contradicting=len(flagged),
                inputs=sum(checked for _, (checked, _) in checks),
                disagree=sum(disagree for _, (_, disagree) in checks),
                methods=flagged,
                among="unsolved" if unsolved else "checked",
            )
        )
    return found


@dataclass(frozen=True)
class UpperBound:
    """A run's code match beside the code match of the gold descriptions on the same methods.

    Attributes:
        run: The run.
        model: The agent's model.
        n: Methods with both scores.
        codematch: The run's mean code match over them.
        gold: The gold descriptions' mean code match over them (each method's upper bound).
    """

    run: str
    model: str
    n: int
    codematch: float
    gold: float

    @property
    def ratio(self) -> float | None:
        """The run's code match as a share of the upper bound (None when the bound is 0)."""
        return self.codematch / self.gold if self.gold else None


def upper_bounds(runs: Sequence[RunData], unscored_as_one: bool) -> list[UpperBound]:
    """Per run with code match, its mean beside the gold description's on the common methods.

    A method's gold code match is the run's own (``pau-mcp score RUN --gold``), else the mean over the
    other runs of the report that have one (a gold run, ``pau-mcp score --gold --suite``).
    """
    gold_by_run = {run.name: _per_method(run, "codematch_gold", unscored_as_one) for run in runs}
    pooled: dict[str, list[float]] = {}
    for values in gold_by_run.values():
        for method, value in values.items():
            pooled.setdefault(method, []).append(value)
    found = []
    for run in runs:
        own = _per_method(run, "codematch", unscored_as_one)
        if not own:
            continue
        gold = {m: gold_by_run[run.name].get(m, math.fsum(v) / len(v)) for m, v in pooled.items()}
        common = sorted(own.keys() & gold.keys())
        if not common:
            continue
        found.append(
            UpperBound(
                run=run.name,
                model=run.setting("model"),
                n=len(common),
                codematch=math.fsum(own[m] for m in common) / len(common),
                gold=math.fsum(gold[m] for m in common) / len(common),
            )
        )
    return found


@dataclass(frozen=True)
class CoverageSummary:
    """A run's exploration coverage over its done episodes that were measured.

    Attributes:
        run: The run.
        model: The agent's model.
        lines: Stats of each episode's share of the tests' lines its agent's calls ran (buckets as code match's).
        lines_median: Their median.
        branches: The same for branches (episodes whose tests take no branch are left out).
        rho: Per score kind, ``(n, Spearman's rho)`` between line coverage and that score over the episodes
            with both (rho None when undefined).
        full: Per score kind, the mean score of episodes whose calls ran every line the tests run, and of the
            others, ``(mean full, n full, mean partial, n partial)``.
        points: ``(line coverage, code match)`` per episode with both, for the scatter plot.
    """

    run: str
    model: str
    lines: ScoreStats
    lines_median: float
    branches: ScoreStats
    rho: dict[str, tuple[int, float | None]]
    full: dict[str, tuple[float | None, int, float | None, int]]
    points: tuple[tuple[float, float], ...]


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def coverage_summaries(runs: Sequence[RunData], kinds: Sequence[str], unscored_as_one: bool) -> list[CoverageSummary]:
    """Per run with measured episodes, the coverage distribution and its relation to each score kind."""
    found = []
    for run in runs:
        measured = [m for m in run.methods if m.done and m.covered() is not None]
        if not measured:
            continue
        rho: dict[str, tuple[int, float | None]] = {}
        full: dict[str, tuple[float | None, int, float | None, int]] = {}
        for kind in kinds:
            pairs = [(c, v) for m in measured if (c := m.covered()) is not None
                     and (v := run.counted(m, kind, unscored_as_one)) is not None]  # fmt: skip
            if not pairs:
                continue
            rho[kind] = (len(pairs), spearman([c for c, _ in pairs], [v for _, v in pairs]))
            whole = [v for c, v in pairs if c >= 1.0 - 1e-9]
            partial = [v for c, v in pairs if c < 1.0 - 1e-9]
            full[kind] = (_mean(whole), len(whole), _mean(partial), len(partial))
        points = tuple(
            (c, v)
            for m in measured
            if (c := m.covered()) is not None and (v := run.counted(m, "codematch", unscored_as_one)) is not None
        )
        shares = [c for m in measured if (c := m.covered()) is not None]
        found.append(
            CoverageSummary(
                run=run.name,
                model=run.setting("model"),
                lines=codematch_stats(shares),
                lines_median=float(statistics.median(shares)),
                branches=codematch_stats([b for m in measured if (b := m.covered("branches")) is not None]),
                rho=rho,
                full=full,
                points=points,
            )
        )
    return found


@dataclass(frozen=True)
class VariantGap:
    """One model's score on original methods against its score on their variants, for one kind.

    Attributes:
        model: The model (a run without a recorded model stands for itself, by its name).
        runs: The model's runs that scored originals or variants.
        kind: The score kind.
        test: The paired bootstrap over (original, variant) pairs both scored, A = originals, B = variants:
            ``mean_a - mean_b`` is the drop, ``p_a_better`` the chance the originals are not really ahead.
    """

    model: str
    runs: tuple[str, ...]
    kind: str
    test: BootstrapResult

    @property
    def drop(self) -> float:
        """Mean score on the originals minus the mean on their variants."""
        return self.test.mean_a - self.test.mean_b


def variant_gaps(
    runs: Sequence[RunData],
    origins: dict[str, str],
    kinds: Sequence[str],
    unscored_as_one: bool,
    resamples: int = 10_000,
    seed: int = 0,
) -> list[VariantGap]:
    """For each model, its scores on originals paired with its scores on their variants, per kind.

    Args:
        runs: The runs (a model's originals and variants may be in one run or in several).
        origins: Each variant's method id -> the id of the method it was made from (its provenance).
        kinds: The kinds the report shows.
        unscored_as_one: How unscored judge replies count.
        resamples: Bootstrap resamples.
        seed: Bootstrap seed.
    """
    by_model: dict[str, list[RunData]] = {}
    for run in runs:
        by_model.setdefault(run.setting("model") or run.name, []).append(run)
    gaps = []
    for model, own in by_model.items():
        for kind in kinds:
            found: dict[str, list[float]] = {}
            used: set[str] = set()
            for run in own:
                for method, value in _per_method(run, kind, unscored_as_one).items():
                    found.setdefault(method, []).append(value)
                    used.add(run.name)
            scores = {method: math.fsum(values) / len(values) for method, values in found.items()}
            pairs = sorted((origins[v], v) for v in scores if v in origins and origins[v] in scores)
            if not pairs:
                continue
            test = paired_bootstrap(
                [scores[o] for o, _ in pairs], [scores[v] for _, v in pairs], resamples=resamples, seed=seed
            )
            relevant = tuple(r.name for r in own if r.name in used)
            gaps.append(VariantGap(model, relevant, kind, test))
    return gaps
