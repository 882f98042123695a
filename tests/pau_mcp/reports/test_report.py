"""The report's numbers against values worked out by hand on the fixture, and the paired bootstrap."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from test_report_fixtures import add_pending_run, add_run, build_store

from pau_mcp.reports import Report, ReportError, build_report, load_runs
from pau_mcp.reports.report import RunSummary
from pau_mcp.reports.stats import BootstrapResult, codematch_bucket, codematch_stats, judge_stats, paired_bootstrap
from pau_mcp.runstore import RunStore


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[RunStore]:
    store = build_store(tmp_path / "runs.db")
    yield store
    store.close()


def _report(store: RunStore, names: Sequence[str] = ("alpha-int", "alpha-ctx"), **options: Any) -> Report:
    return build_report(load_runs(store, list(names)), resamples=options.pop("resamples", 500), **options)


def _summary(report: Report, name: str) -> RunSummary:
    summaries: list[RunSummary] = report.summaries  # typed here: pau_mcp.reports imports its names lazily
    return next(s for s in summaries if s.name == name)


# -- per run --------------------------------------------------------------------------------------


def test_judge_numbers_leave_unscored_replies_out_by_default(store: RunStore) -> None:
    s = _summary(_report(store), "alpha-int")
    # Scored: 5, 4, 3, 2 (m4 unscored is left out).
    assert s.judge.n == 4
    assert s.judge.mean == pytest.approx(3.5)
    assert s.judge.std == pytest.approx(math.sqrt(1.25))
    assert s.judge.distribution == {"1": 0, "2": 1, "3": 1, "4": 1, "5": 1}
    assert s.judge.share_good == pytest.approx(0.75)
    assert s.judge_unscored == 1


def test_unscored_as_one_counts_unscored_replies_as_one_and_says_so(store: RunStore) -> None:
    report = _report(store, unscored_as_one=True)
    s = _summary(report, "alpha-int")
    # 5, 4, 3, 1, 2.
    assert s.judge.n == 5
    assert s.judge.mean == pytest.approx(3.0)
    assert s.judge.std == pytest.approx(math.sqrt(2))
    assert s.judge.distribution["1"] == 1
    assert s.judge.share_good == pytest.approx(0.6)
    assert s.judge_unscored == 1
    assert "count as 1" in report.notes[0]
    assert "left out" in _report(store).notes[0]


def test_code_match_numbers_and_buckets_match_hand_computed_values(store: RunStore) -> None:
    s = _summary(_report(store), "alpha-int")
    # 1.0, 0.85, 0.5, 0.0, 0.2
    assert s.codematch.n == 5
    assert s.codematch.mean == pytest.approx(0.51)
    assert s.codematch.distribution == {"0-20%": 1, "20-40%": 1, "40-60%": 1, "60-80%": 0, "80-<100%": 1, "100%": 1}
    assert s.codematch.share_good == pytest.approx(0.2)  # exactly 1.0
    assert s.codematch.share_bad == pytest.approx(0.6)  # below 0.8


def test_failed_episodes_are_counted_apart_and_left_out_of_scores(store: RunStore) -> None:
    s = _summary(_report(store), "alpha-ctx")
    assert (s.planned, s.done, s.failed, s.unfinished) == (5, 4, 1, 0)
    assert s.judge.n == 3 and s.judge.mean == pytest.approx(3.0) and s.judge.share_good == pytest.approx(2 / 3)
    assert s.codematch.n == 4 and s.codematch.mean == pytest.approx(0.5)
    # Tokens and cost include the failed episode: it was paid for.
    assert (s.input_tokens, s.output_tokens) == (450, 45)
    assert s.cost_usd == pytest.approx(0.045)


def test_queries_concluded_and_costs_are_summed_over_episodes(store: RunStore) -> None:
    s = _summary(_report(store), "alpha-int")
    assert s.queries_mean == pytest.approx(14.0)
    assert s.concluded_share == pytest.approx(0.8)
    assert (s.input_tokens, s.output_tokens) == (500, 50) and s.cost_usd == pytest.approx(0.05)
    assert (s.model, s.agent, s.mode, s.suite) == ("openai/alpha", "paper", "interactive", "builtin")


def test_a_run_with_no_finished_episodes_reports_zeros_and_says_so(store: RunStore) -> None:
    add_pending_run(store)
    report = _report(store, names=("alpha-int", "empty"))
    s = _summary(report, "empty")
    assert (s.done, s.unfinished, s.judge.n, s.judge.mean, s.codematch.mean, s.queries_mean) == (0, 2, 0, 0.0, 0.0, 0.0)
    assert any("empty has no finished episodes" in note for note in report.notes)
    assert report.pairs[0].tests["judge"].n == 0 and report.pairs[0].tests["judge"].p_a_better is None
    assert any("different suites" in note for note in report.notes)


def test_unknown_run_names_the_known_runs(store: RunStore) -> None:
    with pytest.raises(ReportError, match=r"no run named 'nope'.*known runs: alpha-ctx, alpha-int"):
        load_runs(store, ["alpha-int", "nope"])


# -- across runs ----------------------------------------------------------------------------------


def test_max_takes_each_methods_best_score_over_runs(store: RunStore) -> None:
    report = _report(store)
    assert report.max_methods == 5
    # Judge, unscored left out: m1 5, m2 4, m3 3, m4 none (unscored in both), m5 2.
    assert report.max_stats["judge"].n == 4
    assert report.max_stats["judge"].mean == pytest.approx(3.5)
    # Code match: 1.0, 0.85, 0.5, max(0.0, 0.4), 0.2.
    assert report.max_stats["codematch"].mean == pytest.approx(0.59)
    assert report.max_stats["codematch"].distribution["40-60%"] == 2


def test_max_counts_unscored_as_one_under_that_rule(store: RunStore) -> None:
    report = _report(store, unscored_as_one=True)
    assert report.max_stats["judge"].n == 5
    assert report.max_stats["judge"].mean == pytest.approx(3.0)  # 5, 4, 3, 1, 2


def test_a_single_run_has_no_max_and_no_pairs(store: RunStore) -> None:
    report = _report(store, names=("alpha-int",))
    assert report.max_stats is None and report.pairs == [] and report.modes == []


def test_interactive_and_incontext_runs_of_one_model_are_paired(store: RunStore) -> None:
    add_run(
        store,
        "beta-int",
        {"model": "openai/beta", "agent": "paper", "mode": "interactive", "suite": "builtin"},
        {"b/m1": ("scored", 3.0, 0.5, True, 3)},
    )
    add_run(
        store,
        "alpha-tools-ctx",
        {"model": "openai/alpha", "agent": "tools", "mode": "in-context", "suite": "builtin"},
        {"b/m1": ("scored", 3.0, 0.5, True, 3)},
    )
    # In-context first on the command line: the pairing still reads interactive against in-context.
    report = _report(store, names=("alpha-ctx", "beta-int", "alpha-int", "alpha-tools-ctx"))
    assert len(report.modes) == 1
    mode = report.modes[0]
    assert (mode.model, mode.agent, mode.interactive, mode.incontext) == (
        "openai/alpha",
        "paper",
        "alpha-int",
        "alpha-ctx",
    )
    assert mode.means["judge"] == (pytest.approx(3.5), pytest.approx(3.0))
    assert mode.means["codematch"] == (pytest.approx(0.51), pytest.approx(0.5))
    # Interactive is A in the test even though it came second.
    assert mode.tests["judge"].mean_a == pytest.approx(4.0) and mode.tests["judge"].mean_b == pytest.approx(3.0)


def test_pairwise_tests_use_only_methods_scored_in_both_runs(store: RunStore) -> None:
    report = _report(store)
    (pair,) = report.pairs
    judge, codematch = pair.tests["judge"], pair.tests["codematch"]
    # Judge: m1, m2, m3 (m4 unscored in both, m5 failed in alpha-ctx).
    assert (judge.n, judge.mean_a, judge.mean_b) == (3, pytest.approx(4.0), pytest.approx(3.0))
    assert (codematch.n, codematch.mean_a, codematch.mean_b) == (4, pytest.approx(0.5875), pytest.approx(0.5))
    assert _report(store, unscored_as_one=True).pairs[0].tests["judge"].n == 4


# -- stats ----------------------------------------------------------------------------------------


def test_code_match_bucket_edges_are_closed_on_the_left_and_one_is_its_own_bucket() -> None:
    assert [codematch_bucket(v) for v in (0.0, 0.1999, 0.2, 0.4, 0.6, 0.8, 0.999, 1.0)] == [
        "0-20%", "0-20%", "20-40%", "40-60%", "60-80%", "80-<100%", "80-<100%", "100%",
    ]  # fmt: skip
    # k/n fractions land on the edge they equal.
    assert codematch_bucket(12 / 15) == "80-<100%" and codematch_bucket(3 / 5) == "60-80%"


def test_empty_stats_are_zeros() -> None:
    assert (judge_stats([]).mean, judge_stats([]).share_good, codematch_stats([]).share_bad) == (0.0, 0.0, 0.0)


def test_bootstrap_p_values_are_identical_under_the_same_seed() -> None:
    rng = random.Random(7)
    a = [rng.random() for _ in range(40)]
    b = [rng.random() for _ in range(40)]
    first = paired_bootstrap(a, b, resamples=2000, seed=3)
    assert paired_bootstrap(a, b, resamples=2000, seed=3) == first
    others = {paired_bootstrap(a, b, resamples=2000, seed=s).p_a_better for s in range(4, 9)}
    assert others - {first.p_a_better}, "different seeds should move the estimate"


def test_a_clearly_better_run_gets_p_near_zero_in_its_favour() -> None:
    a = [5.0, 4.0, 5.0, 4.0, 5.0, 5.0, 4.0, 5.0, 4.0, 5.0]
    b = [2.0, 1.0, 3.0, 2.0, 1.0, 2.0, 3.0, 1.0, 2.0, 2.0]
    result = paired_bootstrap(a, b, resamples=1000, seed=0)
    assert result.p_a_better == 0.0 and result.p_b_better == 1.0
    reverse = paired_bootstrap(b, a, resamples=1000, seed=0)
    assert reverse.p_a_better == 1.0 and reverse.p_b_better == 0.0


def test_identical_runs_get_high_p_values_both_ways() -> None:
    a = [0.1, 0.5, 0.7, 1.0, 0.3, 0.9]
    result = paired_bootstrap(a, list(a), resamples=500, seed=0)
    assert result.p_a_better == 1.0 and result.p_b_better == 1.0


def test_bootstrap_draws_half_size_samples() -> None:
    # Two methods, differences +1 and -1: one draw per resample never ties, so the two p-values add up to 1.
    # Full-size samples would tie (sum 0) half the time and the p-values would add up to about 1.5.
    result = paired_bootstrap([1.0, 0.0], [0.0, 1.0], resamples=10_000, seed=0)
    assert result.sample_size == 1
    assert result.p_a_better is not None and result.p_b_better is not None  # methods were compared
    assert result.p_a_better + result.p_b_better == pytest.approx(1.0)
    assert result.p_a_better == pytest.approx(0.5, abs=0.03)


def test_bootstrap_resample_count_is_configurable() -> None:
    a, b = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 0.0, 1.0, 0.0, 0.0]
    for resamples in (1, 7, 333):
        result = paired_bootstrap(a, b, resamples=resamples, seed=1)
        assert result.resamples == resamples
        assert result.p_a_better is not None
        assert (result.p_a_better * resamples) == pytest.approx(round(result.p_a_better * resamples))
    with pytest.raises(ValueError, match="resamples"):
        paired_bootstrap(a, b, resamples=0)


def test_report_p_values_follow_seed_and_resamples(store: RunStore) -> None:
    first = _report(store, resamples=300, seed=5).pairs[0].tests["codematch"]
    assert _report(store, resamples=300, seed=5).pairs[0].tests["codematch"] == first
    assert first.resamples == 300 and first.seed == 5


def test_the_exact_bootstrap_counts_a_float_noise_difference_as_a_win_as_the_reference_does() -> None:
    # A resample drawing each of the three methods once ties on paper (0.1 + 0.2 + 0.3 both ways); the means, added
    # in the drawn order, can still differ by 1e-16, which the reference's > and < count as a win.
    a, b = [0.1, 0.2, 0.3] * 2, [0.3, 0.1, 0.2] * 2
    tolerant = paired_bootstrap(a, b, resamples=2000, seed=0)
    exact = paired_bootstrap(a, b, resamples=2000, seed=0, exact=True)

    def decided(result: BootstrapResult) -> float:
        assert result.p_a_better is not None and result.p_b_better is not None
        return (1 - result.p_a_better) + (1 - result.p_b_better)  # the share of resamples that were not ties

    assert decided(exact) > decided(tolerant) + 0.05
    assert (exact.mean_a, exact.n, exact.sample_size) == (tolerant.mean_a, tolerant.n, tolerant.sample_size)


def test_two_reference_protocol_runs_are_compared_with_the_exact_bootstrap(store: RunStore) -> None:
    from test_report_fixtures import CONFIG, INCONTEXT, INTERACTIVE

    add_run(store, "ref-a", CONFIG | {"mode": "interactive", "protocol": "reference"}, INTERACTIVE)
    add_run(store, "ref-b", CONFIG | {"mode": "incontext", "protocol": "reference"}, INCONTEXT)
    (pair,) = build_report(load_runs(store, ["ref-a", "ref-b"]), resamples=500, seed=2).pairs
    # ref-b's failed episode counts as 1 and 0 under the reference protocol: both runs score every method.
    a = [5.0, 4.0, 3.0, 1.0, 2.0]
    b = [4.0, 4.0, 1.0, 1.0, 1.0]
    assert pair.tests["judge"] == paired_bootstrap(a, b, resamples=500, seed=2, exact=True)
    assert any(
        "compared by their resampled means exactly" in note
        for note in build_report(load_runs(store, ["ref-a"]), resamples=10).notes
    )
