"""The reward schedule of the PAU paper's Table 3, every constant a field with the paper's value as default.

One step of the cycle is rewarded on its own:

* **reason**: the critic's rating of the reasoning (0 to 9) divided by 9,
  plus a length penalty (``tau`` 100 words, ``alpha`` 0.05 per word).
* **propose** (the input): -0.5 when no input literal can be read (or it has
  the wrong arity), ``lambda * H / (2 * T_max)`` (0.025 by default) when the
  call returns, -0.5 when it raises or hits a limit, plus a length penalty
  (``tau`` 30, ``alpha`` 0.5).
* **reflect** (the hypothesis): the critic's rating of the concluding
  hypothesis (0 to 9) divided by 9, plus a termination term, both scaled by
  ``H``; -0.5 when the reply does not follow the format; a length penalty as
  for reasoning.

The length penalty is ``-min(cap, alpha * max(0, words - tau))``: ``alpha``
per word beyond ``tau``, never worse than ``-cap``. The reference
implementation divides by the penalty at three times ``tau`` and then caps with
``max(x, 1)`` where a cap needs ``min``: every over-long reply there gets at
least the full penalty, and ``alpha`` cancels out. docs/training.md explains.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

__all__ = ["RewardConfig", "length_penalty", "termination_term", "word_count"]


@dataclass(frozen=True)
class RewardConfig:
    """Every constant of the reward schedule.

    Attributes:
        reasoning_scale: Multiplies the critic's reasoning rating (0 to 9, divided by 9).
        reasoning_tau: Words of reasoning before the length penalty starts.
        reasoning_alpha: Penalty per word of reasoning beyond ``reasoning_tau``.
        parse_penalty: An input that cannot be read (or has the wrong number of arguments), or a reflection
            that does not follow the format.
        execution_lambda: ``lambda`` in the clean-execution reward ``lambda * H / (2 * T_max)``.
        runtime_error_penalty: A call that raised, timed out, ran out of memory or flooded its output.
        repeated_input_reward: Replaces the clean-execution reward for an input the explorer already
            called (an addition of this project: repeating one input must not farm reward).
        input_tau: Words of the input step before the length penalty starts.
        input_alpha: Penalty per word of the input step beyond ``input_tau``.
        hypothesis_scale: ``H``: scales the hypothesis reward (rating / 9 plus the termination term).
        conclude_threshold: A concluding hypothesis rated above this fraction earns ``termination_bonus``;
            at or below it loses ``termination_bonus``.
        continue_threshold: Going on with a hypothesis rated below this fraction earns ``termination_bonus``.
        termination_bonus: The termination term's size.
        reflection_tau: Words of a reflection before the length penalty starts.
        reflection_alpha: Penalty per word of a reflection beyond ``reflection_tau``.
        judge_every_reflection: Rate the hypothesis at every reflection, as the reference implementation does;
            by default only the concluding one is rated (the paper's Table 3): rating every reflection pays
            ``H`` per reflection for restating a good hypothesis, so stalling out-earns concluding.
        timeout_penalty: Added when the turn limit ends an episode that never concluded.
        length_penalty_cap: The worst a length penalty can be (its magnitude).
        code_match_weight: Weight of the optional terminal code-match reward (the fraction of hidden tests
            that code written from the final hypothesis passes); 0 turns it off. Needs a critic with a coder model.
    """

    reasoning_scale: float = 1.0
    reasoning_tau: int = 100
    reasoning_alpha: float = 0.05
    parse_penalty: float = -0.5
    execution_lambda: float = 1.0
    runtime_error_penalty: float = -0.5
    repeated_input_reward: float = 0.0
    input_tau: int = 30
    input_alpha: float = 0.5
    hypothesis_scale: float = 2.0
    conclude_threshold: float = 0.7
    continue_threshold: float = 0.3
    termination_bonus: float = 1.0
    reflection_tau: int = 100
    reflection_alpha: float = 0.05
    judge_every_reflection: bool = False
    timeout_penalty: float = -1.0
    length_penalty_cap: float = 1.0
    code_match_weight: float = 0.0

    def clean_execution(self, max_turns: int) -> float:
        """The reward for a call that returned: ``lambda * H / (2 * T_max)``."""
        return self.execution_lambda * self.hypothesis_scale / (2 * max(1, max_turns))

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RewardConfig:
        """Fields from a dict; an unknown key is an error naming the known ones.

        Raises:
            ValueError: an unknown field.
        """
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown reward field {', '.join(unknown)}; known fields: {', '.join(sorted(known))}")
        return cls(**data)


def word_count(text: str) -> int:
    """Words as the length penalty counts them: runs of non-space characters."""
    return len(text.split())


def length_penalty(text: str, tau: int, alpha: float, cap: float) -> float:
    """``-min(cap, alpha * max(0, words - tau))``: zero up to ``tau`` words, then ``alpha`` per word, at worst ``-cap``."""
    over = word_count(text) - tau
    if over <= 0:
        return 0.0
    return -min(cap, alpha * over)


def termination_term(config: RewardConfig, fraction: float, done: bool) -> float:
    """Whether stopping (or going on) was right, given the hypothesis's rating as a fraction of 9.

    Concluding with a good hypothesis earns the bonus and concluding with a poor one loses it; going on
    while the hypothesis is still poor earns it; going on with a fair or good one is neutral.
    """
    if done:
        return config.termination_bonus if fraction > config.conclude_threshold else -config.termination_bonus
    return config.termination_bonus if fraction < config.continue_threshold else 0.0
