"""The reward schedule: named schedules with the paper's constants, the length penalty capped and padding-proof."""

from __future__ import annotations

import pytest

from pau_mcp.rl import RewardConfig, length_penalty, length_units, termination_term


def test_defaults_are_the_papers_table_3() -> None:
    config = RewardConfig()
    assert (config.reasoning_tau, config.reasoning_alpha) == (100, 0.05)
    assert (config.input_tau, config.input_alpha) == (30, 0.5)
    assert config.parse_penalty == config.runtime_error_penalty == -0.5
    assert config.clean_execution(max_turns=40) == pytest.approx(0.025)


def test_length_penalty_is_zero_up_to_tau_then_alpha_per_word() -> None:
    assert length_penalty("word " * 100, tau=100, alpha=0.05, cap=1.0) == 0.0
    assert length_penalty("word " * 110, tau=100, alpha=0.05, cap=1.0) == pytest.approx(-0.5)
    assert length_penalty("word " * 32, tau=30, alpha=0.5, cap=1.0) == pytest.approx(-1.0)


def test_length_penalty_never_passes_its_cap_however_long_the_text() -> None:
    assert length_penalty("word " * 100_000, tau=100, alpha=0.05, cap=1.0) == -1.0
    assert length_penalty("word " * 101, tau=100, alpha=0.05, cap=1.0) > -1.0  # a cap, not a floor as in `max`


def test_alpha_changes_the_penalty() -> None:
    assert length_penalty("w " * 104, 100, 0.05, 1.0) != length_penalty("w " * 104, 100, 0.1, 1.0)


def test_concluding_well_earns_the_bonus_and_concluding_badly_loses_it() -> None:
    config = RewardConfig()
    assert termination_term(config, 8 / 9, done=True) == 1.0
    assert termination_term(config, 5 / 9, done=True) == -1.0
    assert termination_term(config, 1 / 9, done=False) == 1.0
    assert termination_term(config, 5 / 9, done=False) == 0.0


def test_an_unknown_reward_field_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown reward field nope.*reasoning_tau"):
        RewardConfig.from_dict({"nope": 1})
    assert RewardConfig.from_dict({"timeout_penalty": -2}).timeout_penalty == -2


def test_the_default_schedule_is_this_projects_and_the_papers_is_selectable_by_name() -> None:
    assert RewardConfig() == RewardConfig.named("pau-mcp") == RewardConfig.from_dict({})
    paper = RewardConfig.named("paper")
    assert paper.length_measure == "words" and not paper.exploration_pays_until_concludable
    assert RewardConfig.from_dict({"schedule": "paper", "timeout_penalty": -2}) == RewardConfig.named(
        "paper", timeout_penalty=-2
    )
    with pytest.raises(ValueError, match="unknown reward schedule 'generous'; the schedules are pau-mcp, paper"):
        RewardConfig.named("generous")
    with pytest.raises(ValueError, match="unknown length_measure"):
        RewardConfig(length_measure="tokens")


@pytest.mark.parametrize(
    "padding",
    ["\u200b".join(["very"] * 1000), "v" * 5000, "very" + " " * 5000 + "much", "\u00a0".join(["x"] * 2000)],
    ids=["zero-width spaces", "no spaces", "a run of spaces", "no-break spaces"],
)
def test_padding_counts_by_its_characters_whatever_separates_its_words(padding: str) -> None:
    assert length_units(padding, "characters") >= len(padding) // 6
    assert length_penalty(padding, tau=100, alpha=0.05, cap=1.0, measure="characters") == -1.0


def test_ordinary_prose_counts_about_its_words_either_way() -> None:
    prose = "I will try the empty list next, since a boundary often shows how the function treats nothing. " * 5
    assert abs(length_units(prose, "characters") - length_units(prose, "words")) <= 0.15 * length_units(prose, "words")
