"""Building a report: every number ``Report`` holds, computed from the runs ``data`` reads.

``build_report`` makes per-run summaries of every score kind recorded, the paper's "Max" aggregation, interactive
against in-context per model, paired bootstrap tests for every pair of runs, and the analyses of ``analyses`` and
``use_analyses``, then the notes ``notes`` writes.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Sequence

from pau_mcp.protocol import RULES

from .analyses import SuiteProfile, contradictions, correlations, coverage_summaries, upper_bounds, variant_gaps
from .conduct import run_conduct
from .data import KINDS, ReportError, RunData
from .epochs import DEFAULT_THRESHOLD, epoch_summaries
from .labels import REPORTED_LABELS
from .notes import notes
from .report import ModeComparison, PairTest, Report, RunSummary
from .stats import BootstrapResult, ScoreStats, codematch_stats, judge_stats, mean_and_std, paired_bootstrap
from .use_analyses import explorers, knowledge_rows, task_accuracies

__all__ = ["build_report"]


def build_report(
    runs: Sequence[RunData],
    *,
    unscored_as_one: bool = False,
    resamples: int = 10_000,
    seed: int = 0,
    failure_labels: dict[str, dict[str, str]] | None = None,
    suites: Sequence[SuiteProfile] = (),
    variant_origins: dict[str, str] | None = None,
    pass_threshold: float = DEFAULT_THRESHOLD,
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
        pass_threshold: The code match at or above which an episode passes (pass@k and pass^k of epochs).

    Raises:
        ReportError: neither runs nor suites, or fewer than one resample.
    """
    if not runs and not suites:
        raise ReportError("name at least one run (`pau-mcp runs list` shows them) or a suite (--suite NAME)")
    if resamples < 1:
        raise ReportError(f"--resamples must be at least 1 (got {resamples})")
    if not 0 <= pass_threshold <= 1:
        raise ReportError(f"--pass-threshold is a code match from 0 to 1 (got {pass_threshold})")
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
        epochs=epoch_summaries(
            runs, threshold=pass_threshold, unscored_as_one=unscored_as_one, resamples=resamples, seed=seed
        ),
        pass_threshold=pass_threshold,
    )
    report.notes.extend(notes(report))
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
        undescribed=sum(1 for m in done if not m.described),
        returns=tuple(m.rl_return for m in done if m.rl_return is not None),
        conduct=run_conduct(
            [(m.state, m.queries, m.conduct) for m in run.methods] if run.episodes else [],
            interactive=run.mode != "incontext",
        ),
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
