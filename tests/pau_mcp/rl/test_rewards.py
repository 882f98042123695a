"""The reward schedule: the paper's constants by default, the length penalty capped with min."""

from __future__ import annotations

import pytest

from pau_mcp.rl import RewardConfig, length_penalty, termination_term


def test_defaults_are_the_papers_table_3():
    config = RewardConfig()
    assert (config.reasoning_tau, config.reasoning_alpha) == (100, 0.05)
    assert (config.input_tau, config.input_alpha) == (30, 0.5)
    assert config.parse_penalty == config.runtime_error_penalty == -0.5
    assert config.clean_execution(max_turns=40) == pytest.approx(0.025)


def test_length_penalty_is_zero_up_to_tau_then_alpha_per_word():
    assert length_penalty("word " * 100, tau=100, alpha=0.05, cap=1.0) == 0.0
    assert length_penalty("word " * 110, tau=100, alpha=0.05, cap=1.0) == pytest.approx(-0.5)
    assert length_penalty("word " * 32, tau=30, alpha=0.5, cap=1.0) == pytest.approx(-1.0)


def test_length_penalty_never_passes_its_cap_however_long_the_text():
    assert length_penalty("word " * 100_000, tau=100, alpha=0.05, cap=1.0) == -1.0
    assert length_penalty("word " * 101, tau=100, alpha=0.05, cap=1.0) > -1.0  # a cap, not a floor as in `max`


def test_alpha_changes_the_penalty():
    assert length_penalty("w " * 104, 100, 0.05, 1.0) != length_penalty("w " * 104, 100, 0.1, 1.0)


def test_concluding_well_earns_the_bonus_and_concluding_badly_loses_it():
    config = RewardConfig()
    assert termination_term(config, 8 / 9, done=True) == 1.0
    assert termination_term(config, 5 / 9, done=True) == -1.0
    assert termination_term(config, 1 / 9, done=False) == 1.0
    assert termination_term(config, 5 / 9, done=False) == 0.0


def test_an_unknown_reward_field_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="unknown reward field nope.*reasoning_tau"):
        RewardConfig.from_dict({"nope": 1})
    assert RewardConfig.from_dict({"timeout_penalty": -2}).timeout_penalty == -2
