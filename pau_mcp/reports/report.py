"""What a report holds: every number it shows, per run, per pair of runs and per analysis (``build`` computes it;
``render`` and ``plots`` only format it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .analyses import (
    Contradictions,
    Correlation,
    CoverageSummary,
    SuiteProfile,
    UpperBound,
    VariantGap,
)
from .conduct import RunConduct
from .data import RunData
from .epochs import EpochSummary
from .stats import BootstrapResult, ScoreStats
from .use_analyses import Explorer, KnowledgeRow, TaskAccuracy

__all__ = ["ModeComparison", "PairTest", "Report", "RunSummary"]


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
        undescribed: Done episodes whose agent gave no description (nothing was submitted or scored).
        returns: An RL rollout's returns, one per finished episode (empty for other runs).
        conduct: Its malformed actions, invalid arguments, refused calls and zero-query episodes (``conduct``).
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
    undescribed: int = 0
    returns: tuple[float, ...] = ()
    conduct: RunConduct = field(default_factory=RunConduct)

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
        epochs: Per group of epochs (``eval --epochs``): pass@k, pass^k, each epoch's mean with its interval, and
            outcome consistency.
        pass_threshold: The code match at or above which an episode passes, for the epochs.
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
    epochs: list[EpochSummary] = field(default_factory=list)
    pass_threshold: float = 0.8

    @property
    def unscored_rule(self) -> str:
        """One sentence saying how unscored judge replies were counted (every rendering prints it)."""
        if self.unscored_as_one:
            return "Unscored judge replies count as 1 (--unscored-as-one, the reference benchmark's rule)."
        return "Unscored judge replies are left out of the judge numbers and counted apart (pass --unscored-as-one to count them as 1)."
