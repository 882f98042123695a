"""Evaluation reports: gather runs from the run store and compute every number a report shows.

``load_runs`` reads the named runs: the episodes of an evaluation run, or,
for a run without episodes (a ``serve`` run such as the demo's, a scored
predictions file, gold descriptions), its submissions, one per session and
method. ``build_report`` turns them into a ``Report`` (per-run summaries of
every score kind recorded, the paper's "Max" aggregation, interactive against
in-context per model, and paired bootstrap tests for every pair of runs).
Rendering lives in ``render`` and ``plots``: they only format what is computed
here.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pau_mcp.harness.analyses import (
    Contradictions,
    Correlation,
    CoverageSummary,
    SuiteProfile,
    UpperBound,
    VariantGap,
    contradictions,
    correlations,
    coverage_summaries,
    upper_bounds,
    variant_gaps,
)
from pau_mcp.harness.labels import REPORTED_LABELS
from pau_mcp.harness.stats import (
    BootstrapResult,
    ScoreStats,
    codematch_stats,
    judge_stats,
    mean_and_std,
    paired_bootstrap,
)
from pau_mcp.harness.use_analyses import (
    TASK_KIND,
    Explorer,
    KnowledgeRow,
    TaskAccuracy,
    explorers,
    knowledge_rows,
    task_accuracies,
)
from pau_mcp.protocol import RULES, protocol_of
from pau_mcp.runstore import RunStore, StoreError

__all__ = [
    "FRACTION_KINDS",
    "KINDS",
    "KIND_TITLES",
    "MethodScores",
    "ModeComparison",
    "PairTest",
    "Report",
    "ReportError",
    "RunData",
    "RunSummary",
    "Score",
    "build_report",
    "load_runs",
    "load_trajectories",
]

#: Every score kind the run store records, in display order: the judge's rating of the description, code
#: written from the description, code written from the gold description (``pau-mcp score --gold``), and code
#: the agent submitted itself, run against the hidden tests.
KINDS = ("judge", "codematch", "codematch_gold", "direct")

#: The kinds whose values are fractions of matching tests (0 to 1).
FRACTION_KINDS = ("codematch", "codematch_gold", "direct")

#: What a row without a score counts as under a protocol that counts failed rows (the reference's): the
#: judge's lowest rating, no matching test.
WORST: dict[str, float] = {"judge": 1.0, "codematch": 0.0, "codematch_gold": 0.0}

#: Each kind's name in headings.
KIND_TITLES = {
    "judge": "Judge score (1-5)",
    "codematch": "Code match (0-1)",
    "codematch_gold": "Code match from the gold description (0-1)",
    "direct": "Direct code (0-1)",
}


class ReportError(ValueError):
    """The report cannot be made as asked; the message says what to do instead."""


@dataclass(frozen=True)
class Score:
    """The latest recorded score of one kind.

    Attributes:
        status: ``scored`` (a value), ``unscored`` (the judge's reply had no readable rating) or ``error``.
        value: The rating or fraction when scored.
        observed: For code match: the code writer's code on the agent's observed inputs, ``{"checked",
            "disagree"}`` (the self-contradiction check), when it was made.
        detail: For a task's answer (``use_analyses.TASK_KIND``): how it was checked (hops, answer matched, calls
            verified); None for other kinds, whose details can be large.
    """

    status: str
    value: float | None = None
    observed: dict[str, int] | None = None
    detail: dict[str, Any] | None = None


@dataclass(frozen=True)
class MethodScores:
    """One episode (or, in a run without episodes, one submission) as a report sees it.

    Attributes:
        method_id: The method explored.
        state: ``done``, ``failed``, ``pending`` or ``running``; a submission is ``done``.
        scores: The latest score of each kind recorded (``judge``, ``codematch``, ``codematch_gold``, ``direct``).
        concluded: True when the agent concluded by itself, False when the budget ran out.
        queries: Tool calls that counted.
        input_tokens: Tokens the agent read.
        output_tokens: Tokens the agent wrote.
        cost_usd: What the episode cost.
        error: Why a failed episode failed.
        coverage: Its exploration coverage, when measured (``pau-mcp coverage``; ``pau_mcp.scoring.coverage``).
    """

    method_id: str
    state: str
    scores: dict[str, Score] = field(default_factory=dict)
    concluded: bool | None = None
    queries: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    error: str | None = None
    coverage: dict[str, Any] | None = None

    @property
    def done(self) -> bool:
        """Only finished, successful episodes count in the scores."""
        return self.state == "done"

    def status(self, kind: str) -> str | None:
        """The status of the latest score of a kind, or None when none was recorded."""
        score = self.scores.get(kind)
        return score.status if score is not None else None

    def value(self, kind: str) -> float | None:
        """The recorded value of a kind, whatever the episode's state (None when not scored)."""
        score = self.scores.get(kind)
        return score.value if score is not None else None

    @property
    def judge_status(self) -> str | None:
        """``scored``, ``unscored``, ``error``, or None when the judge never ran."""
        return self.status("judge")

    @property
    def judge_value(self) -> float | None:
        """The judge's rating when scored."""
        return self.value("judge")

    @property
    def codematch_status(self) -> str | None:
        """As ``judge_status``, for code match."""
        return self.status("codematch")

    @property
    def codematch_value(self) -> float | None:
        """The code-match fraction when scored."""
        return self.value("codematch")

    def score(self, kind: str, unscored_as_one: bool = False, failed_as_worst: bool = False) -> float | None:
        """The score of one kind this episode counts with, or None when it does not count.

        Args:
            kind: One of ``KINDS``.
            unscored_as_one: Count an unscored judge reply as 1 (the reference benchmark's rule)
                instead of leaving it out.
            failed_as_worst: Count a failed episode, and a score that could not be made, as the
                worst score of its kind (``WORST``; the reference protocol's rule) instead of leaving
                it out.
        """
        score = self.scores.get(kind)
        unmade = self.state == "failed" or (self.done and score is not None and score.status in ("error", "unscored"))
        if failed_as_worst and kind in WORST and unmade:
            return WORST[kind]
        if not self.done or score is None:
            return None
        if score.status == "scored" and score.value is not None:
            return float(score.value)
        if kind == "judge" and score.status == "unscored" and unscored_as_one:
            return 1.0
        return None

    def covered(self, part: str = "lines") -> float | None:
        """The share of the lines (or ``branches``) the hidden tests run that the agent's calls ran, when measured."""
        if not self.coverage or self.coverage.get("status") != "measured":
            return None
        value = self.coverage[part].get("agent_of_tests")
        return None if value is None else float(value)

    @property
    def contradiction(self) -> tuple[int, int] | None:
        """``(observed inputs checked, of those where the description's code disagrees)`` for a done episode whose
        code match made the self-contradiction check, else None."""
        score = self.scores.get("codematch")
        if not self.done or score is None or not score.observed or not score.observed.get("checked"):
            return None
        return int(score.observed["checked"]), int(score.observed.get("disagree", 0))

    def judge(self, unscored_as_one: bool = False) -> float | None:
        """The judge score this episode counts with, or None."""
        return self.score("judge", unscored_as_one)

    def codematch(self) -> float | None:
        """The code-match fraction this episode counts with, or None."""
        return self.score("codematch")


@dataclass(frozen=True)
class RunData:
    """A run's configuration and what it recorded, as read from the store.

    Attributes:
        name: The run.
        run_id: Its id in the store.
        config: The configuration it was created with.
        methods: Its episodes, or for a run without episodes its submissions (the latest per session and method).
        kind: How the run was made: ``eval``, ``serve`` (the demo's too), ``file`` (a predictions file) or ``gold``.
        episodes: True when ``methods`` are evaluation episodes, False when they are submissions.
        replaced: Submissions left out because a later one in the same session replaced them.
    """

    name: str
    run_id: int
    config: dict[str, Any]
    methods: tuple[MethodScores, ...]
    kind: str = "eval"
    episodes: bool = True
    replaced: int = 0

    def setting(self, key: str) -> str:
        """A configuration value as text ("" when the run does not record it)."""
        value = self.config.get(key)
        return "" if value is None else str(value)

    @property
    def protocol(self) -> str:
        """The protocol the run recorded (``pau-mcp`` for runs made before protocols were recorded)."""
        return protocol_of(self.config)

    def counted(self, method: MethodScores, kind: str, unscored_as_one: bool = False) -> float | None:
        """The score one of its methods counts with, by the run's protocol.

        Under the reference protocol an unscored judge reply counts as 1, and a failed episode or a score
        that could not be made as the worst score of its kind, for the kinds the run was scored on.
        """
        rules = RULES[self.protocol]
        worst = rules.failed_as_worst and kind in self._scored_kinds
        return method.score(kind, unscored_as_one or rules.failed_as_worst, failed_as_worst=worst)

    @property
    def ddof(self) -> int:
        """The standard deviation's degrees of freedom its protocol uses (1: the sample's)."""
        return 1 if RULES[self.protocol].sample_std else 0

    @property
    def _scored_kinds(self) -> frozenset[str]:
        return frozenset(kind for m in self.methods for kind in m.scores)

    @property
    def mode(self) -> str:
        """``interactive`` or ``incontext`` (spelling variants such as ``in-context`` folded), or ""."""
        return self.setting("mode").lower().replace("-", "").replace("_", "")

    @property
    def suite(self) -> str:
        """The suite (or suites, comma-separated) the run covers: from its configuration, else its method ids."""
        if self.setting("suite"):
            return self.setting("suite")
        suites = self.config.get("suites") or sorted({m.method_id.split("/", 1)[0] for m in self.methods})
        return ", ".join(str(s) for s in suites)


@dataclass(frozen=True)
class RunSummary:
    """Everything the report says about one run.

    Attributes:
        name: The run.
        kind: How the run was made (``eval``, ``serve``, ``file``, ``gold``).
        protocol: The protocol it followed (``pau-mcp`` or ``reference``).
        model: The agent's model (from the run's configuration; "" if not recorded).
        agent: The agent kind (``paper``, ``tools``, ``probe``).
        mode: ``interactive`` or ``incontext``.
        suite: The suite it ran over.
        planned: Episodes planned (submissions, for a run without episodes).
        done: Episodes finished (the only ones scored); every submission counts as done.
        failed: Episodes that failed (errors).
        unfinished: Episodes still pending or running.
        scores: Per kind, stats over done episodes with a counted score of that kind.
        missing: Per kind, done episodes with no counted score of that kind (never scored, or an error;
            an unscored judge reply is counted in ``judge_unscored`` instead unless it counts as 1).
        judge_unscored: Done episodes whose judge reply had no readable rating.
        queries_mean: Mean counted tool calls per done episode.
        concluded_share: Share of done episodes the agent concluded by itself (None when none recorded it:
            submissions say nothing of how the agent stopped).
        input_tokens: Input tokens over all finished episodes (done and failed: both were paid for).
        output_tokens: Output tokens, likewise.
        cost_usd: Cost, likewise.
        failures: Failure labels counted, when failures were classified.
    """

    name: str
    kind: str
    protocol: str
    model: str
    agent: str
    mode: str
    suite: str
    planned: int
    done: int
    failed: int
    unfinished: int
    scores: dict[str, ScoreStats]
    missing: dict[str, int]
    judge_unscored: int
    queries_mean: float
    concluded_share: float | None
    input_tokens: int
    output_tokens: int
    cost_usd: float
    failures: dict[str, int] | None = None

    @property
    def judge(self) -> ScoreStats:
        """Judge-score stats."""
        return self.scores["judge"]

    @property
    def codematch(self) -> ScoreStats:
        """Code-match stats."""
        return self.scores["codematch"]

    @property
    def judge_missing(self) -> int:
        """Done episodes with no judge score (not run, or the judge request failed)."""
        return self.missing["judge"]

    @property
    def codematch_missing(self) -> int:
        """Done episodes with no code-match score."""
        return self.missing["codematch"]

    @property
    def recorded(self) -> int:
        """Scores of every kind counted in this run."""
        return sum(stats.n for stats in self.scores.values())


@dataclass(frozen=True)
class PairTest:
    """Paired bootstrap tests of two runs, for each score kind.

    Attributes:
        a: The first run (in command-line order).
        b: The second run.
        tests: Per kind shown in the report, the result over the methods scored in both runs.
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
        means: Per kind shown, ``(interactive mean, in-context mean)`` over each run's own scored episodes.
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
        kinds: The score kinds shown: those with at least one score recorded in some run, in ``KINDS`` order.
        max_stats: Per kind shown, the "Max" aggregation (None for a single run).
        max_methods: Methods in the Max aggregation (scored in at least one run).
        modes: Interactive against in-context comparisons.
        pairs: Paired tests for every pair of runs.
        failure_labels: Per run, per failed method, its failure label (empty unless classified).
        unscored_as_one: How unscored judge replies were counted.
        resamples: Bootstrap resamples per test.
        seed: Bootstrap seed.
        notes: Sentences every rendering prints under the tables.
        suites: Profiles of the suites the report covers (methods by arguments, test-suite sizes).
        correlations: Spearman's rho of per-method scores for every pair of runs and kind.
        contradictions: Per run with checked episodes, how often descriptions contradict observations.
        upper_bounds: Per run with code match, its mean beside the gold descriptions' on the same methods.
        coverage: Per run with measured episodes, its exploration coverage and how it relates to the scores.
        variants: Per model and kind, its score on original methods against their variants (memorisation).
        significance: The p-value below which a difference is marked significant (0.05).
        explorers: Exploring runs side by side (an observer's among them), with how often each concluded while its
            own description's code disagreed with what it saw.
        knowledge: Code match per combination of knowledge handed to the code writer (``score --knowledge``).
        tasks: Per task run, accuracy by hop count, with the documentation its tools were served with.
    """

    runs: list[RunData]
    summaries: list[RunSummary]
    kinds: tuple[str, ...]
    max_stats: dict[str, ScoreStats] | None
    max_methods: int
    modes: list[ModeComparison]
    pairs: list[PairTest]
    failure_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    unscored_as_one: bool = False
    resamples: int = 10_000
    seed: int = 0
    notes: list[str] = field(default_factory=list)
    suites: list[SuiteProfile] = field(default_factory=list)
    correlations: list[Correlation] = field(default_factory=list)
    contradictions: list[Contradictions] = field(default_factory=list)
    upper_bounds: list[UpperBound] = field(default_factory=list)
    coverage: list[CoverageSummary] = field(default_factory=list)
    variants: list[VariantGap] = field(default_factory=list)
    significance: float = 0.05
    explorers: list[Explorer] = field(default_factory=list)
    knowledge: list[KnowledgeRow] = field(default_factory=list)
    tasks: list[TaskAccuracy] = field(default_factory=list)

    @property
    def unscored_rule(self) -> str:
        """One sentence saying how unscored judge replies were counted (every rendering prints it)."""
        if self.unscored_as_one:
            return "Unscored judge replies count as 1 (--unscored-as-one, the reference benchmark's rule)."
        return "Unscored judge replies are left out of the judge numbers and counted apart (pass --unscored-as-one to count them as 1)."


# -- gathering ----------------------------------------------------------------------------------


def load_runs(store: RunStore, names: Sequence[str]) -> list[RunData]:
    """Read the named runs (duplicates dropped, order kept).

    A run with episodes (``pau-mcp eval``) is read as its episodes. A run without (``pau-mcp serve``, the
    demo, a predictions file or gold descriptions scored with ``pau-mcp score``) is read as its submissions:
    one per session and method, the latest, since a later submission in a session replaces the earlier one.

    Raises:
        ReportError: a name is not a run; the message lists the known runs.
    """
    runs = []
    known = {row["name"]: row for row in store.runs()}
    for name in dict.fromkeys(names):
        try:
            run_id = store.run_id(name)
        except StoreError:
            listed = ", ".join(sorted(known)) or "none yet"
            raise ReportError(f"no run named {name!r} in {store.location}; known runs: {listed}") from None
        kind = str(known[name]["kind"]) if name in known else ""
        config = store.run_config(run_id)
        episodes = store.episodes(run_id)
        if episodes:
            methods = tuple(_episode_scores(row) for row in episodes)
            runs.append(RunData(name, run_id, config, methods, kind=kind))
        else:
            methods, replaced = _submission_scores(store, run_id)
            runs.append(RunData(name, run_id, config, methods, kind=kind, episodes=False, replaced=replaced))
    return runs


def load_trajectories(store: RunStore, run: RunData) -> dict[str, list[Any]]:
    """Each episode's trajectory by method (read only when failures are classified: they can be large)."""
    return {row["method_id"]: row["trajectory"] or [] for row in store.episodes(run.run_id, with_trajectories=True)}


def _latest_scores(rows: Iterable[dict[str, Any]]) -> dict[str, Score]:
    """The latest score of each kind (rows come oldest first)."""
    return {
        row["kind"]: Score(
            row["status"],
            row.get("value"),
            (row.get("detail") or {}).get("observed"),
            row.get("detail") if row["kind"] == TASK_KIND else None,
        )  # fmt: skip
        for row in rows
    }


def _episode_scores(row: dict[str, Any]) -> MethodScores:
    return MethodScores(
        method_id=row["method_id"],
        state=row["state"],
        scores=_latest_scores((row.get("scores") or {}).values()),
        concluded=None if row.get("concluded") is None else bool(row["concluded"]),
        queries=row.get("queries"),
        input_tokens=int(row.get("input_tokens") or 0),
        output_tokens=int(row.get("output_tokens") or 0),
        cost_usd=float(row.get("cost_usd") or 0.0),
        error=row.get("error"),
        coverage=row.get("coverage"),
    )


def _submission_scores(store: RunStore, run_id: int) -> tuple[tuple[MethodScores, ...], int]:
    """A run without episodes as its submissions: the latest per session and method, with its counted calls."""
    submissions = store.submissions(run_id)
    latest: dict[tuple[int, str], dict[str, Any]] = {}
    for row in submissions:  # in id order: a later one replaces an earlier one
        latest[(row["session_id"], row["method_id"])] = row
    counted = Counter((c["session_id"], c["method_id"]) for c in store.calls(run_id) if c["counted"])
    methods = tuple(
        MethodScores(
            method_id=row["method_id"],
            state="done",
            scores=_latest_scores(store.scores(row["id"])),
            queries=counted.get(key, 0),
        )
        for key, row in latest.items()
    )
    return methods, len(submissions) - len(latest)


# -- computing ----------------------------------------------------------------------------------


def build_report(
    runs: Sequence[RunData],
    *,
    unscored_as_one: bool = False,
    resamples: int = 10_000,
    seed: int = 0,
    failure_labels: dict[str, dict[str, str]] | None = None,
    suites: Sequence[SuiteProfile] = (),
    variant_origins: dict[str, str] | None = None,
) -> Report:
    """Compute every number of a report.

    Args:
        runs: The runs, as ``load_runs`` gives them.
        unscored_as_one: Count unscored judge replies as 1 instead of leaving them out.
        resamples: Bootstrap resamples per paired test.
        seed: Bootstrap seed (each test starts from it, so a pair's p-values do not depend on the other runs).
        failure_labels: Per run, per method, a failure label from ``failures.classify_failures``.
        suites: Profiles of the suites to describe (``analyses.suite_profile``).
        variant_origins: Each variant's method id -> its original's (from the manifests' provenance), for the
            memorisation table.

    Raises:
        ReportError: neither runs nor suites, or fewer than one resample.
    """
    if not runs and not suites:
        raise ReportError("name at least one run (`pau-mcp runs list` shows them) or a suite (--suite NAME)")
    if resamples < 1:
        raise ReportError(f"--resamples must be at least 1 (got {resamples})")
    labels = failure_labels or {}
    # A kind is shown when some run recorded a score of it, whatever its status: an error is news too.
    kinds = tuple(k for k in KINDS if any(m.status(k) is not None for run in runs for m in run.methods))
    summaries = [
        _summarise(run, unscored_as_one, labels.get(run.name, {}) if failure_labels is not None else None)
        for run in runs
    ]
    max_stats, max_methods = _max_aggregation(runs, kinds, unscored_as_one) if len(runs) > 1 else (None, 0)
    pairs = [_pair_test(a, b, kinds, unscored_as_one, resamples, seed) for a, b in itertools.combinations(runs, 2)]
    modes = _mode_comparisons(runs, summaries, pairs, kinds)
    report = Report(
        runs=list(runs),
        summaries=summaries,
        kinds=kinds,
        max_stats=max_stats,
        max_methods=max_methods,
        modes=modes,
        pairs=pairs,
        failure_labels=labels,
        unscored_as_one=unscored_as_one,
        resamples=resamples,
        seed=seed,
        suites=list(suites),
        correlations=correlations(runs, kinds, unscored_as_one),
        contradictions=contradictions(runs, unscored_as_one),
        upper_bounds=upper_bounds(runs, unscored_as_one),
        coverage=coverage_summaries(runs, kinds, unscored_as_one),
        variants=variant_gaps(runs, variant_origins or {}, kinds, unscored_as_one, resamples, seed),
        explorers=explorers(runs),
        knowledge=knowledge_rows(runs),
        tasks=task_accuracies(runs),
    )
    report.notes.extend(_notes(report))
    return report


def _stats(kind: str, values: Sequence[float], ddof: int = 0) -> ScoreStats:
    return judge_stats(values, ddof) if kind == "judge" else codematch_stats(values, ddof)


def _summarise(run: RunData, unscored_as_one: bool, labels: dict[str, str] | None) -> RunSummary:
    done = [m for m in run.methods if m.done]
    # Under a protocol that counts failed rows, failed episodes are rows too.
    rows = [m for m in run.methods if m.done or (m.state == "failed" and RULES[run.protocol].failed_as_worst)]
    scores, missing = {}, {}
    for kind in KINDS:
        values = [v for m in rows if (v := run.counted(m, kind, unscored_as_one)) is not None]
        scores[kind] = _stats(kind, values, run.ddof)
        uncounted = [m for m in done if run.counted(m, kind, unscored_as_one) is None]
        missing[kind] = sum(1 for m in uncounted if kind != "judge" or m.status(kind) != "unscored")
    queries, _ = mean_and_std([float(m.queries) for m in done if m.queries is not None])
    concluded = [m.concluded for m in done if m.concluded is not None]
    finished = [m for m in run.methods if m.state in ("done", "failed")]
    return RunSummary(
        name=run.name,
        kind=run.kind,
        protocol=run.protocol,
        model=run.setting("model"),
        agent=run.setting("agent"),
        mode=run.mode,
        suite=run.suite,
        planned=len(run.methods),
        done=len(done),
        failed=sum(1 for m in run.methods if m.state == "failed"),
        unfinished=sum(1 for m in run.methods if m.state not in ("done", "failed")),
        scores=scores,
        missing=missing,
        judge_unscored=sum(1 for m in done if m.judge_status == "unscored"),
        queries_mean=queries,
        concluded_share=sum(concluded) / len(concluded) if concluded else None,
        input_tokens=sum(m.input_tokens for m in finished),
        output_tokens=sum(m.output_tokens for m in finished),
        cost_usd=sum(m.cost_usd for m in finished),
        failures=None if labels is None else _count_labels(labels),
    )


def _count_labels(labels: dict[str, str]) -> dict[str, int]:
    counts = Counter(labels.values())
    return {label: counts.get(label, 0) for label in REPORTED_LABELS}


def _scores(run: RunData, kind: str, unscored_as_one: bool) -> dict[str, list[float]]:
    """Each method's counted scores of one kind (several only in a run of several sessions without episodes)."""
    found: dict[str, list[float]] = {}
    for m in run.methods:
        if (value := run.counted(m, kind, unscored_as_one)) is not None:
            found.setdefault(m.method_id, []).append(value)
    return found


def _max_aggregation(
    runs: Sequence[RunData], kinds: Sequence[str], unscored_as_one: bool
) -> tuple[dict[str, ScoreStats], int]:
    """Per method the best score over all runs, then stats over methods: the upper bound of what the runs can do."""
    stats, methods = {}, set()
    for kind in kinds:
        best: dict[str, float] = {}
        for run in runs:
            for method, values in _scores(run, kind, unscored_as_one).items():
                best[method] = max(*values, best.get(method, values[0]))
        stats[kind] = _stats(kind, [best[m] for m in sorted(best)], max(run.ddof for run in runs))
        methods |= set(best)
    return stats, len(methods)


def _pair_test(
    a: RunData, b: RunData, kinds: Sequence[str], unscored_as_one: bool, resamples: int, seed: int
) -> PairTest:
    tests = {}
    for kind in kinds:
        scores_a, scores_b = _scores(a, kind, unscored_as_one), _scores(b, kind, unscored_as_one)
        # Sorted, so the resampled indices and hence the p-values do not depend on plan order.
        common = sorted(scores_a.keys() & scores_b.keys())
        # A method submitted in several sessions of one run counts once, with its mean.
        tests[kind] = paired_bootstrap(
            [math.fsum(scores_a[m]) / len(scores_a[m]) for m in common],
            [math.fsum(scores_b[m]) / len(scores_b[m]) for m in common],
            resamples=resamples,
            seed=seed,
            # Two runs of the reference protocol are compared as the reference compares them.
            exact=RULES[a.protocol].exact_bootstrap and RULES[b.protocol].exact_bootstrap,
        )
    return PairTest(a.name, b.name, tests)


def _mode_comparisons(
    runs: Sequence[RunData], summaries: Sequence[RunSummary], pairs: Sequence[PairTest], kinds: Sequence[str]
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
        means = {kind: (si.scores[kind].mean, sc.scores[kind].mean) for kind in kinds}
        comparisons.append(ModeComparison(si.model, si.agent, inter.name, incon.name, means, pair))
    return comparisons


def _swapped(tests: dict[str, BootstrapResult]) -> dict[str, BootstrapResult]:
    """The same tests read from B's side."""
    return {
        kind: BootstrapResult(t.n, t.mean_b, t.mean_a, t.p_b_better, t.p_a_better, t.resamples, t.sample_size, t.seed)
        for kind, t in tests.items()
    }


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("s" if number != 1 else "")


def _episodes(count: int) -> str:
    return _count(count, "episode")


def _notes(report: Report) -> list[str]:
    if not report.runs:
        return []
    notes = [report.unscored_rule]
    reference = [s.name for s in report.summaries if s.protocol == "reference"]
    if reference:
        notes.append(
            f"{'Runs' if len(reference) > 1 else 'Run'} {', '.join(reference)} followed the reference protocol "
            "(docs/protocol.md): unscored judge replies count as 1, failed episodes and scores that could not be made "
            "count as judge 1 and code match 0 (and so fail, for the failure modes), standard deviations are the "
            "sample's (ddof=1), and two such runs are compared by their resampled means exactly (a float-noise "
            "difference is a win)."
        )
    if len({s.protocol for s in report.summaries}) > 1:
        notes.append(
            "These runs followed different protocols (see the protocol column): their numbers were made by different "
            "prompts and rules, so differences between them are not only the models'."
        )
    for run, s in zip(report.runs, report.summaries, strict=True):
        if not run.episodes:
            made = f"a {run.kind} run" if run.kind else "a run"
            if not run.methods:
                notes.append(
                    f"Run {s.name} ({made}) has no episodes and no submissions yet: there is nothing to report."
                )
                continue
            notes.append(
                f"Run {s.name} ({made}) has no episodes: its {_count(s.planned, 'submission')} "
                f"{'is' if s.planned == 1 else 'are'} reported, the latest per session and method."
            )
            if run.replaced:
                notes.append(
                    f"Run {s.name}: {_count(run.replaced, 'earlier submission')} replaced by a later one in the same "
                    "session left out."
                )
        elif s.done == 0:
            notes.append(f"Run {s.name} has no finished episodes: its numbers are zeros.")
        if s.unfinished:
            notes.append(
                f"Run {s.name}: {s.unfinished} of {_episodes(s.planned)} not finished (pending or running) and left out."
            )
        if s.failed:
            notes.append(f"Run {s.name}: {_episodes(s.failed)} failed with an error and left out of the scores.")
        scored = any(m.scores for m in run.methods if m.done)
        if s.done and not scored:
            notes.append(
                f"Run {s.name} has no scores yet: score it with `pau-mcp score {s.name}` and --judge-model and "
                f"--coder-model, or, with no model, score the code it submitted: `pau-mcp score {s.name} --scores direct`."
            )
    if not report.kinds and not report.tasks and not report.knowledge:
        notes.append("No score of any kind is recorded in these runs, so there are no score tables.")
    suites = {s.suite for s in report.summaries}
    if len(suites) > 1:
        shown = ", ".join(sorted(x or "(unrecorded)" for x in suites))
        notes.append(
            f"The runs come from different suites ({shown}): pairwise statistics use only methods scored in both runs (n)."
        )
    if report.max_stats is not None and report.kinds:
        notes.append(
            f"Max: for each method the best score over the {len(report.runs)} runs, then mean and distribution over the methods "
            f"scored in at least one run ({report.max_methods} methods; n per score in the tables)."
        )
    for pair in report.pairs:
        if not any(test.n for test in pair.tests.values()):
            notes.append(f"Runs {pair.a} and {pair.b} have no method scored in both: they are not compared.")
    if any(not run.episodes and len({m.method_id for m in run.methods}) < len(run.methods) for run in report.runs):
        notes.append(
            "A method submitted in several sessions of one run counts once per session in that run's numbers, "
            "once (its mean) in the pairwise tests and once (its best) in Max."
        )
    if report.correlations:
        notes.append(
            "Rank correlation: Spearman's rho of two runs' per-method scores over the methods both scored (ties share "
            "their mean rank); n/a when one run gives every method the same score."
        )
    if report.contradictions:
        notes.append(
            "Self-contradiction: the code written from an episode's description is run on the inputs its agent "
            "observed; the episode contradicts itself when that code disagrees with what the function did there."
        )
        unsolved = [c.run for c in report.contradictions if c.among == "unsolved"]
        if unsolved:
            notes.append(
                f"Self-contradiction of {', '.join(unsolved)} (reference protocol): among the checked episodes that "
                "failed (judge below 3 or code match below 0.8, as the protocol counts them), as the paper counts "
                "it among the functions not solved."
            )
    if report.coverage:
        notes.append(
            "Coverage: per episode, the share of the lines (branches) of the hidden function that its hidden tests "
            "execute which the agent's own calls also executed (pau-mcp coverage; operator only); rho is Spearman's "
            "between line coverage and the score, 'full' the episodes whose calls ran every such line."
        )
    elif any(run.episodes for run in report.runs):
        notes.append("No exploration coverage is measured for these runs: `pau-mcp coverage RUN` measures it.")
    if report.upper_bounds:
        notes.append(
            "Upper bound: code match of the gold descriptions (pau-mcp score --gold) on the same methods, by the same "
            "code writer; the ratio is the run's share of it."
        )
    if report.variants:
        notes.append(
            "Originals against variants: per model, the methods of a suite made with `pau-mcp create --variants-of` "
            "paired with the methods they were made from, both scored by that model; a drop that the paired bootstrap "
            "calls significant (p(orig>var) small) is evidence that the originals' answers were remembered."
        )
    if report.modes and report.kinds:
        notes.append(
            f"In the interactive against in-context comparison, * marks a difference with p < {report.significance:g}."
        )
    if report.pairs and report.kinds:
        notes.append(
            f"Paired bootstrap: {report.resamples} resamples, each drawing half of the common methods with replacement, seed {report.seed}; "
            "p(A>B) = 1 - share of resamples in which A's mean beats B's."
        )
    return notes
