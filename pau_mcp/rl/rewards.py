"""The reward schedule: the PAU paper's Table 3, every constant a field, and named schedules.

Three named schedules (``SCHEDULES``, ``RewardConfig.named``): ``pau-mcp``, the
default; ``paper``, Table 3 exactly as this project reads it; and
``reference``, the reference implementation's ``env.py`` step by step (below).
``pau-mcp`` and ``paper`` differ in two rules, both fields:

* ``exploration_pays_until_concludable``: in ``pau-mcp`` a critic that knows
  the answer rates, at every reflection, how completely the evidence gathered
  so far (the initial examples and the explorer's calls) determines the
  function, without reading the explorer's hypothesis (``concludable_from``
  ``evidence``); once a rating is above ``conclude_threshold``, exploring earns
  nothing more (no reasoning rating, no clean-execution reward) while every
  penalty still applies. What the policy claims cannot move that point: stating
  a vague hypothesis does not keep exploration paid, and stating the right one
  early does not end it. A critic that cannot know (symmetric) leaves the
  decision to the stated hypothesis's rating (``concludable_from``
  ``hypothesis``, the rule before). In ``paper`` every reasoning step pays, so
  a policy that is right but never concludes out-earns one that concludes.
* ``length_measure``: ``characters`` (``pau-mcp``) counts the larger of the
  words and the characters divided by ``chars_per_word``, so text padded with
  zero-width spaces, or with no spaces at all, pays for its length;
  ``words`` (``paper``) counts runs of non-space characters only.

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

``reference`` sets every rule where ``env.py`` differs: the length penalty's
shape (``length_shape="floored"``: ``-max(cap, (words - tau) / (2 * tau))``,
-1 from ``tau + 1`` words, -2 at five times ``tau``), the input step's length
counted on the input read from the reply (``input_length_of="input"``), every
reflection's hypothesis paid (``judge_every_reflection``), every reasoning
step and every clean call paid, repeats too (``repeated_input_reward=None``),
words counted as runs of non-space characters, and the step that reaches the
turn limit not read: it pays the timeout penalty alone (``read_last_turn``).

Under every schedule a critic reply without a rating (or one that could not be
asked) pays nothing for the hypothesis, its termination term included, as in
the reference implementation: only a rating says whether stopping was right.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

__all__ = [
    "DEFAULT_SCHEDULE",
    "CONCLUDABLE_FROM",
    "INPUT_LENGTHS",
    "LENGTH_MEASURES",
    "LENGTH_SHAPES",
    "SCHEDULES",
    "RewardConfig",
    "length_penalty",
    "length_units",
    "termination_term",
    "word_count",
]

#: How a reply's length is counted: ``words`` (runs of non-space characters, the paper's) or ``characters`` (the
#: larger of the words and the characters divided by ``chars_per_word``: padding without spaces still counts).
LENGTH_MEASURES = ("words", "characters")

#: The length penalty's shape: ``capped`` (``alpha`` per word beyond ``tau``, never worse than the cap) or
#: ``floored`` (the reference implementation's: at least the cap from ``tau + 1`` words, then one cap more for each
#: ``2 * tau`` words, without bound; ``alpha`` plays no part).
LENGTH_SHAPES = ("capped", "floored")

#: What the input step's length penalty counts: the whole ``reply``, or only the ``input`` read from it (the
#: reference implementation's; no input read counts nothing).
INPUT_LENGTHS = ("reply", "input")

#: What says that exploring has nothing left to teach: the critic's rating of the ``evidence`` gathered so far (it
#: never reads the hypothesis, so a policy cannot steer it by what it claims), or of the ``hypothesis`` the policy
#: states (the rule before; what a critic that cannot judge evidence falls back to).
CONCLUDABLE_FROM = ("evidence", "hypothesis")

#: The reference implementation's worst case is a reply this many times ``tau`` long; its penalty is divided by the
#: penalty there (``alpha`` cancels).
_REFERENCE_WORST_MULTIPLE = 3


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
            called (an addition of this project: repeating one input must not farm reward); None pays a repeat
            as any clean call (the reference implementation).
        input_tau: Words of the input step before the length penalty starts.
        input_alpha: Penalty per word of the input step beyond ``input_tau``.
        hypothesis_scale: ``H``: scales the hypothesis reward (rating / 9 plus the termination term).
        conclude_threshold: A concluding hypothesis rated above this fraction earns ``termination_bonus``;
            at or below it loses ``termination_bonus``.
        continue_threshold: Going on with a hypothesis rated below this fraction earns ``termination_bonus``.
        termination_bonus: The termination term's size.
        reflection_tau: Words of a reflection before the length penalty starts.
        reflection_alpha: Penalty per word of a reflection beyond ``reflection_tau``.
        judge_every_reflection: Rate the hypothesis at every reflection and pay ``H`` times its rating and
            termination term each time, as the reference implementation does; by default only the concluding
            hypothesis is paid (the paper's Table 3): paying every reflection pays ``H`` per reflection for
            restating a good hypothesis, so stalling out-earns concluding.
        exploration_pays_until_concludable: At every reflection, have the critic rate what ``concludable_from``
            names (without paying it unless the reflection concludes), and once a rating is above
            ``conclude_threshold``, pay no reasoning rating and no clean-execution reward for the rest of the
            episode (penalties still apply). False (the paper's schedule): every reasoning step and clean call
            pays, however long the policy goes on.
        concludable_from: ``evidence`` (how completely the examples and calls so far determine the function, the
            hypothesis unread; a critic that cannot judge it falls back to the hypothesis) or ``hypothesis`` (the
            stated hypothesis's rating, which the policy controls) (``CONCLUDABLE_FROM``).
        length_measure: ``words`` or ``characters`` (``LENGTH_MEASURES``); the ``tau`` fields count in words
            either way.
        chars_per_word: Characters that count as one word under ``characters``.
        timeout_penalty: Added when the turn limit ends an episode that never concluded.
        length_penalty_cap: The worst a length penalty can be (its magnitude) under ``capped``; the least an
            over-long reply pays under ``floored``.
        code_match_weight: Weight of the optional terminal code-match reward (the fraction of hidden tests
            that code written from the final hypothesis passes); 0 turns it off. Needs a critic with a coder model.
        length_shape: ``capped`` or ``floored`` (``LENGTH_SHAPES``).
        input_length_of: ``reply`` or ``input`` (``INPUT_LENGTHS``): what the input step's length penalty counts.
        read_last_turn: The step that reaches ``max_turns`` is read and paid as any other, and the timeout penalty
            added unless it ends the episode. False (the reference implementation): that step is not read (no
            call, no critic) and pays the timeout penalty alone.
    """

    reasoning_scale: float = 1.0
    reasoning_tau: int = 100
    reasoning_alpha: float = 0.05
    parse_penalty: float = -0.5
    execution_lambda: float = 1.0
    runtime_error_penalty: float = -0.5
    repeated_input_reward: float | None = 0.0
    input_tau: int = 30
    input_alpha: float = 0.5
    hypothesis_scale: float = 2.0
    conclude_threshold: float = 0.7
    continue_threshold: float = 0.3
    termination_bonus: float = 1.0
    reflection_tau: int = 100
    reflection_alpha: float = 0.05
    judge_every_reflection: bool = False
    exploration_pays_until_concludable: bool = True
    concludable_from: str = "evidence"
    length_measure: str = "characters"
    chars_per_word: int = 6
    timeout_penalty: float = -1.0
    length_penalty_cap: float = 1.0
    code_match_weight: float = 0.0
    length_shape: str = "capped"
    input_length_of: str = "reply"
    read_last_turn: bool = True

    def __post_init__(self) -> None:
        for name, allowed in (
            ("length_measure", LENGTH_MEASURES), ("length_shape", LENGTH_SHAPES), ("input_length_of", INPUT_LENGTHS),
            ("concludable_from", CONCLUDABLE_FROM),
        ):  # fmt: skip
            if getattr(self, name) not in allowed:
                raise ValueError(f"unknown {name} {getattr(self, name)!r}; choose {' or '.join(allowed)}")
        if self.chars_per_word < 1:
            raise ValueError(f"chars_per_word must be at least 1, got {self.chars_per_word}")
        taus = {"reasoning_tau": self.reasoning_tau, "input_tau": self.input_tau, "reflection_tau": self.reflection_tau}
        if self.length_shape == "floored" and min(taus.values()) < 1:
            raise ValueError(
                f"the floored length penalty divides by tau: {', '.join(k for k, v in taus.items() if v < 1)} must "
                "be at least 1"
            )

    @classmethod
    def named(cls, name: str, **overrides: Any) -> RewardConfig:
        """A named schedule (``SCHEDULES``), with fields overridden.

        Raises:
            ValueError: an unknown schedule (the message lists the known ones) or field.
        """
        if name not in SCHEDULES:
            raise ValueError(f"unknown reward schedule {name!r}; the schedules are {', '.join(SCHEDULES)}")
        return SCHEDULES[name].with_fields(overrides)

    def with_fields(self, overrides: dict[str, Any]) -> RewardConfig:
        """This schedule with some fields changed.

        Raises:
            ValueError: an unknown field (the message lists the known ones), or a value out of range.
        """
        known = {f.name for f in fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ValueError(f"unknown reward field {', '.join(unknown)}; known fields: {', '.join(sorted(known))}")
        return replace(self, **overrides)

    def penalty(self, text: str, tau: int, alpha: float) -> float:
        """The length penalty of ``text`` under this schedule's measure, shape and cap."""
        return length_penalty(
            text, tau, alpha, self.length_penalty_cap, self.length_measure, self.chars_per_word, self.length_shape
        )

    def clean_execution(self, max_turns: int) -> float:
        """The reward for a call that returned: ``lambda * H / (2 * T_max)``."""
        return self.execution_lambda * self.hypothesis_scale / (2 * max(1, max_turns))

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RewardConfig:
        """A schedule from a dict: ``schedule`` names the base (default ``pau-mcp``), every other key is a field.

        Raises:
            ValueError: an unknown schedule or field (the message names the known ones).
        """
        values = dict(data)
        return cls.named(str(values.pop("schedule", DEFAULT_SCHEDULE)), **values)


def word_count(text: str) -> int:
    """Words: runs of non-space characters."""
    return len(text.split())


def length_units(text: str, measure: str = "words", chars_per_word: int = 6) -> int:
    """A text's length in words as ``measure`` counts them (``LENGTH_MEASURES``).

    ``characters``: the larger of the word count and the characters divided by ``chars_per_word`` (rounded up), so
    ordinary prose counts its words while text joined by zero-width spaces, or without spaces, counts its size.
    """
    words = word_count(text)
    if measure == "words":
        return words
    return max(words, -(-len(text) // chars_per_word))


def length_penalty(
    text: str,
    tau: int,
    alpha: float,
    cap: float,
    measure: str = "words",
    chars_per_word: int = 6,
    shape: str = "capped",
) -> float:
    """Zero up to ``tau`` words, then by ``shape`` (``LENGTH_SHAPES``); the length in words as ``measure`` counts
    them (``length_units``).

    ``capped``: ``-min(cap, alpha * (length - tau))``, ``alpha`` per word, at worst ``-cap``. ``floored`` (the
    reference implementation's): ``-max(cap, (length - tau) / (2 * tau))``, its penalty divided by the penalty at
    three times ``tau``, then ``max`` with the cap: ``-cap`` from ``tau + 1`` words, ``-2`` at five times ``tau``.
    """
    over = length_units(text, measure, chars_per_word) - tau
    if over <= 0:
        return 0.0
    if shape == "floored":
        return -max(over / (tau * (_REFERENCE_WORST_MULTIPLE - 1)), cap)
    return -min(cap, alpha * over)


def termination_term(config: RewardConfig, fraction: float, done: bool) -> float:
    """Whether stopping (or going on) was right, given the hypothesis's rating as a fraction of 9.

    Concluding with a good hypothesis earns the bonus and concluding with a poor one loses it; going on
    while the hypothesis is still poor earns it; going on with a fair or good one is neutral.
    """
    if done:
        return config.termination_bonus if fraction > config.conclude_threshold else -config.termination_bonus
    return config.termination_bonus if fraction < config.continue_threshold else 0.0


#: The schedule a config gets unless it names another.
DEFAULT_SCHEDULE = "pau-mcp"

#: The named schedules: this project's (the default), the paper's Table 3 as this project reads it, and the
#: reference implementation's (its scripts/skyrl/env.py, step by step; docs/training.md lists what still differs).
SCHEDULES: dict[str, RewardConfig] = {
    "pau-mcp": RewardConfig(),
    "paper": RewardConfig(exploration_pays_until_concludable=False, length_measure="words"),
    "reference": RewardConfig(
        exploration_pays_until_concludable=False, length_measure="words", judge_every_reflection=True,
        repeated_input_reward=None, length_shape="floored", input_length_of="input", read_last_turn=False,
    ),
}  # fmt: skip
