"""The numbers of repeated epochs: pass@k, pass^k and a mean's bootstrap interval."""

from __future__ import annotations

import math

import pytest

from pau_mcp.reports.stats import bootstrap_interval, pass_at_k, pass_hat_k


def test_pass_at_k_and_pass_hat_k_are_the_chances_that_one_or_all_of_k_draws_pass() -> None:
    # Three epochs, two passing: one draw passes 2/3 of the time; two draws, at least one always, both 1/3.
    assert pass_at_k(3, 2, 1) == pytest.approx(2 / 3) and pass_hat_k(3, 2, 1) == pytest.approx(2 / 3)
    assert pass_at_k(3, 2, 2) == 1.0 and pass_hat_k(3, 2, 2) == pytest.approx(1 / 3)
    assert pass_at_k(3, 2, 3) == 1.0 and pass_hat_k(3, 2, 3) == 0.0
    assert pass_at_k(4, 0, 4) == 0.0 and pass_hat_k(4, 4, 4) == 1.0
    with pytest.raises(ValueError, match="1 <= k <= attempts"):
        pass_hat_k(3, 2, 4)


def test_a_bootstrap_interval_holds_the_mean_narrows_with_more_values_and_repeats_with_its_seed() -> None:
    few = bootstrap_interval([0.0, 1.0] * 5, resamples=2000, seed=3)
    many = bootstrap_interval([0.0, 1.0] * 500, resamples=2000, seed=3)
    # With values, an interval has both bounds.
    assert few.low is not None and few.high is not None and many.low is not None and many.high is not None
    assert few.low < few.mean == 0.5 < few.high and many.low < 0.5 < many.high
    assert (many.high - many.low) < (few.high - few.low)
    assert bootstrap_interval([0.0, 1.0] * 5, resamples=2000, seed=3) == few
    # A 95% interval of 1,000 fair coin flips' mean is about +-0.031.
    assert math.isclose(many.high - many.low, 0.062, abs_tol=0.01)
    assert bootstrap_interval([], resamples=10).low is None
    assert bootstrap_interval([0.7], resamples=10).low == 0.7
    assert few.overlaps(many) is True and bootstrap_interval([]).overlaps(few) is None
