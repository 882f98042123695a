"""Evaluation reports: gather runs from the run store and compute every number a report shows.

``load_runs`` reads the episodes of the named runs, ``build_report`` turns
them into a ``Report`` (per-run summaries, the paper's "Max" aggregation,
interactive against in-context per model, and paired bootstrap tests for
every pair of runs). Rendering lives in ``render`` and ``plots``: they only
format what is computed here.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pau_mcp.harness.failures import FAILURE_LABELS, UNCLASSIFIED
from pau_mcp.harness.stats import (
    BootstrapResult,
    ScoreStats,
    codematch_stats,
    judge_stats,
    mean_and_std,
    paired_bootstrap,
)
from pau_mcp.runstore import RunStore, StoreError

__all__ = [
    "KINDS",
    "MethodScores",
    "ModeComparison",
    "PairTest",
    "Report",
    "ReportError",
    "RunData",
    "RunSummary",
    "build_report",
    "load_runs",
    "load_trajectories",
]

#: Score kinds compared across runs, in display order.
KINDS = ("judge", "codematch")


class ReportError(ValueError):
    """The report cannot be made as asked; the message says what to do instead."""


@dataclass(frozen=True)
class MethodScores:
    """One episode as a report sees it: how it ended and its raw scores.

    Attributes:
        method_id: The method explored.
        state: ``done``, ``failed``, ``pending`` or ``running``.
        judge_status: ``scored``, ``unscored``, ``error``, or None when the judge never ran.
        judge_value: The judge's rating when scored.
        codematch_status: As ``judge_status``, for code match.
        codematch_value: The code-match fraction when scored.
        concluded: True when the agent concluded by itself, False when the budget ran out.
        queries: Tool calls that counted.
        input_tokens: Tokens the agent read.
        output_tokens: Tokens the agent wrote.
        cost_usd: What the episode cost.
        error: Why a failed episode failed.
    """

    method_id: str
    state: str
    judge_status: str | None = None
    judge_value: float | None = None
    codematch_status: str | None = None
    codematch_value: float | None = None
    concluded: bool | None = None
    queries: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    error: str | None = None

    @property
    def done(self) -> bool:
        """Only finished, successful episodes count in the scores."""
        return self.state == "done"

    def judge(self, unscored_as_one: bool = False) -> float | None:
        """The judge score this episode counts with, or None when it does not count.

        Args:
            unscored_as_one: Count an unscored judge reply as 1 (the reference benchmark's rule)
                instead of leaving it out.
        """
        if not self.done:
            return None
        if self.judge_status == "scored" and self.judge_value is not None:
            return float(self.judge_value)
        if self.judge_status == "unscored" and unscored_as_one:
            return 1.0
        return None

    def codematch(self) -> float | None:
        """The code-match fraction this episode counts with, or None."""
        if self.done and self.codematch_status == "scored" and self.codematch_value is not None:
            return float(self.codematch_value)
        return None

    def score(self, kind: str, unscored_as_one: bool = False) -> float | None:
        """The counted score of one kind (``judge`` or ``codematch``)."""
        return self.judge(unscored_as_one) if kind == "judge" else self.codematch()


@dataclass(frozen=True)
class RunData:
    """A run's configuration and episodes, as read from the store."""

    name: str
    run_id: int
    config: dict[str, Any]
    methods: tuple[MethodScores, ...]

    def setting(self, key: str) -> str:
        """A configuration value as text ("" when the run does not record it)."""
        value = self.config.get(key)
        return "" if value is None else str(value)

    @property
    def mode(self) -> str:
        """``interactive`` or ``incontext`` (spelling variants such as ``in-context`` folded), or ""."""
        return self.setting("mode").lower().replace("-", "").replace("_", "")


@dataclass(frozen=True)
class RunSummary:
    """Everything the report says about one run.

    Attributes:
        name: The run.
        model: The agent's model (from the run's configuration; "" if not recorded).
        agent: The agent kind (``paper``, ``tools``, ``probe``).
        mode: ``interactive`` or ``incontext``.
        suite: The suite it ran over.
        planned: Episodes planned.
        done: Episodes finished (the only ones scored).
        failed: Episodes that failed (errors).
        unfinished: Episodes still pending or running.
        judge: Judge-score stats over done episodes with a counted score.
        codematch: Code-match stats over done episodes with a score.
        judge_unscored: Done episodes whose judge reply had no readable rating.
        judge_missing: Done episodes with no judge score (not run, or the judge request failed).
        codematch_missing: Done episodes with no code-match score.
        queries_mean: Mean counted tool calls per done episode.
        concluded_share: Share of done episodes the agent concluded by itself.
        input_tokens: Input tokens over all finished episodes (done and failed: both were paid for).
        output_tokens: Output tokens, likewise.
        cost_usd: Cost, likewise.
        failures: Failure labels counted, when failures were classified.
    """

    name: str
    model: str
    agent: str
    mode: str
    suite: str
    planned: int
    done: int
    failed: int
    unfinished: int
    judge: ScoreStats
    codematch: ScoreStats
    judge_unscored: int
    judge_missing: int
    codematch_missing: int
    queries_mean: float
    concluded_share: float
    input_tokens: int
    output_tokens: int
    cost_usd: float
    failures: dict[str, int] | None = None


@dataclass(frozen=True)
class PairTest:
    """Paired bootstrap tests of two runs, for each score kind.

    Attributes:
        a: The first run (in command-line order).
        b: The second run.
        tests: ``judge`` and ``codematch`` results, each over the methods scored in both runs.
    """

    a: str
    b: str
    tests: dict[str, BootstrapResult]


@dataclass(frozen=True)
class ModeComparison:
    """Interactive against in-context for one model and agent.

    Attributes:
        model: The model.
        agent: The agent kind.
        interactive: The interactive run.
        incontext: The in-context run.
        means: Per kind, ``(interactive mean, in-context mean)`` over each run's own scored episodes.
        tests: Per kind, the paired test with A = interactive, B = in-context (common methods only).
    """

    model: str
    agent: str
    interactive: str
    incontext: str
    means: dict[str, tuple[float, float]]
    tests: dict[str, BootstrapResult]


@dataclass(frozen=True)
class Report:
    """A whole report, computed once and rendered by ``render`` and ``plots``.

    Attributes:
        runs: The runs' data, in the order asked for.
        summaries: One summary per run, same order.
        max_stats: Per kind, the "Max" aggregation (None for a single run).
        max_methods: Methods in the Max aggregation (scored in at least one run).
        modes: Interactive against in-context comparisons.
        pairs: Paired tests for every pair of runs.
        failure_labels: Per run, per failed method, its failure label (empty unless classified).
        unscored_as_one: How unscored judge replies were counted.
        resamples: Bootstrap resamples per test.
        seed: Bootstrap seed.
        notes: Sentences every rendering prints under the tables.
    """

    runs: list[RunData]
    summaries: list[RunSummary]
    max_stats: dict[str, ScoreStats] | None
    max_methods: int
    modes: list[ModeComparison]
    pairs: list[PairTest]
    failure_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    unscored_as_one: bool = False
    resamples: int = 10_000
    seed: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def unscored_rule(self) -> str:
        """One sentence saying how unscored judge replies were counted (every rendering prints it)."""
        if self.unscored_as_one:
            return "Unscored judge replies count as 1 (--unscored-as-one, the reference benchmark's rule)."
        return "Unscored judge replies are left out of the judge numbers and counted apart (pass --unscored-as-one to count them as 1)."


# -- gathering ----------------------------------------------------------------------------------


def load_runs(store: RunStore, names: Sequence[str]) -> list[RunData]:
    """Read the named runs (duplicates dropped, order kept).

    Raises:
        ReportError: a name is not a run; the message lists the known runs.
    """
    runs = []
    for name in dict.fromkeys(names):
        try:
            run_id = store.run_id(name)
        except StoreError:
            known = ", ".join(sorted(row["name"] for row in store.runs())) or "none yet"
            raise ReportError(f"no run named {name!r} in {store.path}; known runs: {known}") from None
        methods = tuple(_method_scores(row) for row in store.episodes(run_id))
        runs.append(RunData(name, run_id, store.run_config(run_id), methods))
    return runs


def load_trajectories(store: RunStore, run: RunData) -> dict[str, list[Any]]:
    """Each episode's trajectory by method (read only when failures are classified: they can be large)."""
    return {row["method_id"]: row["trajectory"] or [] for row in store.episodes(run.run_id, with_trajectories=True)}


def _method_scores(row: dict[str, Any]) -> MethodScores:
    scores = row.get("scores") or {}
    judge, codematch = scores.get("judge") or {}, scores.get("codematch") or {}
    return MethodScores(
        method_id=row["method_id"],
        state=row["state"],
        judge_status=judge.get("status"),
        judge_value=judge.get("value"),
        codematch_status=codematch.get("status"),
        codematch_value=codematch.get("value"),
        concluded=None if row.get("concluded") is None else bool(row["concluded"]),
        queries=row.get("queries"),
        input_tokens=int(row.get("input_tokens") or 0),
        output_tokens=int(row.get("output_tokens") or 0),
        cost_usd=float(row.get("cost_usd") or 0.0),
        error=row.get("error"),
    )


# -- computing ----------------------------------------------------------------------------------


def build_report(
    runs: Sequence[RunData],
    *,
    unscored_as_one: bool = False,
    resamples: int = 10_000,
    seed: int = 0,
    failure_labels: dict[str, dict[str, str]] | None = None,
) -> Report:
    """Compute every number of a report.

    Args:
        runs: The runs, as ``load_runs`` gives them.
        unscored_as_one: Count unscored judge replies as 1 instead of leaving them out.
        resamples: Bootstrap resamples per paired test.
        seed: Bootstrap seed (each test starts from it, so a pair's p-values do not depend on the other runs).
        failure_labels: Per run, per method, a failure label from ``failures.classify_failures``.

    Raises:
        ReportError: no runs, or fewer than one resample.
    """
    if not runs:
        raise ReportError("name at least one run; `pau-mcp runs list` shows them")
    if resamples < 1:
        raise ReportError(f"--resamples must be at least 1 (got {resamples})")
    labels = failure_labels or {}
    summaries = [
        _summarise(run, unscored_as_one, labels.get(run.name, {}) if failure_labels is not None else None)
        for run in runs
    ]
    max_stats, max_methods = _max_aggregation(runs, unscored_as_one) if len(runs) > 1 else (None, 0)
    pairs = [_pair_test(a, b, unscored_as_one, resamples, seed) for a, b in itertools.combinations(runs, 2)]
    modes = _mode_comparisons(runs, summaries, pairs)
    report = Report(
        runs=list(runs),
        summaries=summaries,
        max_stats=max_stats,
        max_methods=max_methods,
        modes=modes,
        pairs=pairs,
        failure_labels=labels,
        unscored_as_one=unscored_as_one,
        resamples=resamples,
        seed=seed,
    )
    report.notes.extend(_notes(report))
    return report


def _summarise(run: RunData, unscored_as_one: bool, labels: dict[str, str] | None) -> RunSummary:
    done = [m for m in run.methods if m.done]
    judged = [v for m in done if (v := m.judge(unscored_as_one)) is not None]
    matched = [v for m in done if (v := m.codematch()) is not None]
    queries, _ = mean_and_std([float(m.queries) for m in done if m.queries is not None])
    concluded = [m.concluded for m in done if m.concluded is not None]
    finished = [m for m in run.methods if m.state in ("done", "failed")]
    return RunSummary(
        name=run.name,
        model=run.setting("model"),
        agent=run.setting("agent"),
        mode=run.mode,
        suite=run.setting("suite"),
        planned=len(run.methods),
        done=len(done),
        failed=sum(1 for m in run.methods if m.state == "failed"),
        unfinished=sum(1 for m in run.methods if m.state not in ("done", "failed")),
        judge=judge_stats(judged),
        codematch=codematch_stats(matched),
        judge_unscored=sum(1 for m in done if m.judge_status == "unscored"),
        judge_missing=sum(1 for m in done if m.judge_status not in ("scored", "unscored")),
        codematch_missing=sum(1 for m in done if m.codematch() is None),
        queries_mean=queries,
        concluded_share=sum(concluded) / len(concluded) if concluded else 0.0,
        input_tokens=sum(m.input_tokens for m in finished),
        output_tokens=sum(m.output_tokens for m in finished),
        cost_usd=sum(m.cost_usd for m in finished),
        failures=None if labels is None else _count_labels(labels),
    )


def _count_labels(labels: dict[str, str]) -> dict[str, int]:
    counts = Counter(labels.values())
    return {label: counts.get(label, 0) for label in (*FAILURE_LABELS, UNCLASSIFIED)}


def _scores(run: RunData, kind: str, unscored_as_one: bool) -> dict[str, float]:
    return {m.method_id: v for m in run.methods if (v := m.score(kind, unscored_as_one)) is not None}


def _max_aggregation(runs: Sequence[RunData], unscored_as_one: bool) -> tuple[dict[str, ScoreStats], int]:
    """Per method the best score over all runs, then stats over methods: the upper bound of what the runs can do."""
    stats, methods = {}, set()
    for kind, summarise in (("judge", judge_stats), ("codematch", codematch_stats)):
        best: dict[str, float] = {}
        for run in runs:
            for method, value in _scores(run, kind, unscored_as_one).items():
                best[method] = max(value, best.get(method, value))
        stats[kind] = summarise([best[m] for m in sorted(best)])
        methods |= set(best)
    return stats, len(methods)


def _pair_test(a: RunData, b: RunData, unscored_as_one: bool, resamples: int, seed: int) -> PairTest:
    tests = {}
    for kind in KINDS:
        scores_a, scores_b = _scores(a, kind, unscored_as_one), _scores(b, kind, unscored_as_one)
        # Sorted, so the resampled indices and hence the p-values do not depend on plan order.
        common = sorted(scores_a.keys() & scores_b.keys())
        tests[kind] = paired_bootstrap(
            [scores_a[m] for m in common], [scores_b[m] for m in common], resamples=resamples, seed=seed
        )
    return PairTest(a.name, b.name, tests)


def _mode_comparisons(
    runs: Sequence[RunData], summaries: Sequence[RunSummary], pairs: Sequence[PairTest]
) -> list[ModeComparison]:
    by_name = {s.name: s for s in summaries}
    tests = {(p.a, p.b): p.tests for p in pairs}
    comparisons = []
    for inter, incon in itertools.product(runs, runs):
        if inter.mode != "interactive" or incon.mode != "incontext":
            continue
        if not inter.setting("model") or (inter.setting("model"), inter.setting("agent")) != (
            incon.setting("model"),
            incon.setting("agent"),
        ):
            continue
        si, sc = by_name[inter.name], by_name[incon.name]
        pair = tests.get((inter.name, incon.name)) or _swapped(tests[(incon.name, inter.name)])
        means = {"judge": (si.judge.mean, sc.judge.mean), "codematch": (si.codematch.mean, sc.codematch.mean)}
        comparisons.append(ModeComparison(si.model, si.agent, inter.name, incon.name, means, pair))
    return comparisons


def _swapped(tests: dict[str, BootstrapResult]) -> dict[str, BootstrapResult]:
    """The same tests read from B's side."""
    return {
        kind: BootstrapResult(t.n, t.mean_b, t.mean_a, t.p_b_better, t.p_a_better, t.resamples, t.sample_size, t.seed)
        for kind, t in tests.items()
    }


def _episodes(count: int) -> str:
    return f"{count} episode" + ("s" if count != 1 else "")


def _notes(report: Report) -> list[str]:
    notes = [report.unscored_rule]
    for s in report.summaries:
        if s.done == 0:
            notes.append(f"Run {s.name} has no finished episodes: its numbers are zeros.")
        if s.unfinished:
            notes.append(
                f"Run {s.name}: {s.unfinished} of {_episodes(s.planned)} not finished (pending or running) and left out."
            )
        if s.failed:
            notes.append(f"Run {s.name}: {_episodes(s.failed)} failed with an error and left out of the scores.")
    suites = {s.suite for s in report.summaries}
    if len(suites) > 1:
        shown = ", ".join(sorted(x or "(unrecorded)" for x in suites))
        notes.append(
            f"The runs come from different suites ({shown}): pairwise statistics use only methods scored in both runs (n)."
        )
    if report.max_stats is not None:
        notes.append(
            f"Max: for each method the best score over the {len(report.runs)} runs, then mean and distribution over the methods "
            f"scored in at least one run ({report.max_methods} methods; n per score in the tables)."
        )
    for pair in report.pairs:
        if not any(test.n for test in pair.tests.values()):
            notes.append(f"Runs {pair.a} and {pair.b} have no method scored in both: they are not compared.")
    if report.pairs:
        notes.append(
            f"Paired bootstrap: {report.resamples} resamples, each drawing half of the common methods with replacement, seed {report.seed}; "
            "p(A>B) = 1 - share of resamples in which A's mean beats B's."
        )
    return notes
