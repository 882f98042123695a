"""``--rewards reference``: recorded episodes replayed through the reference implementation's rules and through
the environment under the ``reference`` schedule, reward for reward, step for step.

The reference's step (its ``scripts/skyrl/env.py``) is written out below from its rules alone: the reply cut at
``[STOP]`` and after its last ``</think>``; a turn counter that ends the episode at its 40th step with -1 and
nothing else; a reasoning step paid its critic rating / 9 and a length penalty; an input step paid -0.5 when no
input is read, else 2 / (2 * 40) when the call returns and -0.5 when it fails, and a length penalty on the input
it read; a reflection paid -0.5 without exactly one ``summary:``, concluding when the text before it is exactly
``yes``, and 2 * (rating / 9 + its termination term), or 0 when the critic's reply has no ``rating: N``, and a
length penalty; every length penalty ``-max(penalty / penalty at 3 tau, 1)``.

The two environments prompt for different formats (the reference for ``Suggested Input:`` and ``Summary:``, this
project for ``INPUT:``, ``CONCLUDED:`` and ``HYPOTHESIS:``), so the recorded replies carry both, and read the same
way under both: what is replayed is the reward arithmetic. The critic's replies are recorded too, each read by its
own side's rule (the reference's first ``rating: N``, this project's last line).
"""

from __future__ import annotations

import ast
import re
from collections import deque
from dataclasses import dataclass
from typing import Any

import pytest

from pau_mcp.manifests import ManifestStore
from pau_mcp.rl import EnvConfig, ExplorationEnv, RewardConfig, Runtime, ScriptedCritic
from pau_mcp.rl.critic import parse_critic_rating
from pau_mcp.rl.rewards import length_penalty

METHOD = "builtin/b036"  # (q, r) of floor division; raises ZeroDivisionError for a zero divisor

# -- the recorded episodes: the policy's reply and, where the step is rated, the critic's ---------------------------


@dataclass(frozen=True)
class Step:
    reply: str
    critic: str | None = None  # the critic's reply for a reasoning step or a reflection


def words(n: int) -> str:
    return " ".join(["word"] * n)


def reflection(decision: str, hypothesis: str) -> str:
    return f"{decision}\nSummary: {hypothesis}\nCONCLUDED: {decision}\nHYPOTHESIS: {hypothesis}"


def rated(score: int) -> str:
    return f"Explanation: as seen.\nRating: {score}"


UNSCORED = "I would rather not rate this."

CONCLUDING = [
    Step("I will try a small pair. " + words(104), rated(6)),  # 110 words: -1 there, -0.5 by this project's
    Step(words(37) + "\nINPUT: (7, 2)"),  # a 40-word reply, a two-word input
    Step(reflection("NO", "it divides"), rated(2)),
    Step("<think>" + words(600) + "</think>\nTry a zero divisor.", rated(9)),  # the thinking is not counted
    Step("INPUT: (1, 0)"),  # raises
    Step("Hmm, hard to say.", UNSCORED),  # out of format, and the critic gives no rating
    Step("Now something long. " + words(517), rated(5)),  # 520 words: -2.1 there, -1 by this project's
    Step("INPUT: (1,)"),  # the wrong arity: refused here, a TypeError there
    Step(reflection("NO", "it divides and keeps the remainder"), rated(5)),
    Step("A list as the divisor.", rated(7)),
    Step("INPUT: (1, [" + ", ".join(["0"] * 40) + "])"),  # a 41-word input that raises
    Step(reflection("NO", "floor division and remainder"), rated(4)),
    Step("Back to the first pair.", rated(8)),
    Step("INPUT: (7, 2)"),  # repeated: paid as any clean call there
    Step(reflection("YES", "floor division and remainder"), rated(8)),
]

UNSCORED_CONCLUSION = [
    Step("I will try a pair.", rated(6)),
    Step("INPUT: (9, 4)"),
    Step(reflection("YES", "it divides"), UNSCORED),  # concluding: the critic's silence pays 0, not -2
]

CYCLE = [Step("I will try another pair.", rated(3)), Step("INPUT: (7, 2)"), Step(reflection("NO", "divides"), rated(4))]
TURN_LIMIT = CYCLE * 13 + [Step("I will try another pair.")]  # the 40th step: not read, never rated


# -- the reference's rules, written out ----------------------------------------------------------------------------


def suggested(reply: str) -> str | None:
    """Its input parse: the first line with one ``input:``/``Input:`` and text after it, else ``(`` ... ``)``."""
    lines = reply.strip().split("\n")
    for line in lines:
        if line.count("input:") == 1 or line.count("Input:") == 1:
            part = line.split("input:" if line.count("input:") == 1 else "Input:")[1].strip()
            if part:
                return part
    for line in lines:
        if "(" in line and ")" in line[line.index("(") :]:
            return line[line.index("(") : line.rindex(")") + 1].strip()
    return None


def runs(source: str, text: str) -> bool:
    """Its ``run_test_str``: True when the call returns (a literal that is not one, or any exception, fails)."""
    try:
        args = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return False
    args = args if isinstance(args, (tuple, list)) else (args,)
    scope: dict[str, Any] = {}
    exec(source, scope)  # a built-in method's own few lines, in this test's process
    try:
        scope["test_func"](*args)
    except Exception:  # noqa: BLE001 - any error is a failed call there
        return False
    return True


def penalty(text: str, threshold: int, rate: float) -> float:
    """Its length penalty: the penalty over the one at three times the threshold, at least 1."""
    n = len(text.split())
    if n <= threshold:
        return 0.0
    return -abs(max(rate * (n - threshold) / (rate * threshold * 2), 1.0))


def rating(reply: str) -> float | None:
    found = re.search(r"rating:\s*(\d+)", reply.lower())
    return int(found.group(1)) / 9 if found else None


def reference_episode(source: str, steps: list[Step]) -> list[tuple[float, bool]]:
    """Its ``step`` over a recorded episode: (reward, done) for each step until one ends it."""
    out: list[tuple[float, bool]] = []
    kind = "reason"
    for turns, step in enumerate(steps, start=1):  # its turn counter, one up at every step
        action = step.reply.split("[STOP]")[0].split("[stop]")[0].strip().split("</think>")[-1].strip()
        if turns >= 40:
            out.append((-1.0, True))
            break
        if kind == "reason":
            assert step.critic is not None
            out.append(((rating(step.critic) or 0.0) + penalty(action, 100, 0.05), False))
            kind = "propose"
        elif kind == "propose":
            text = suggested(action)
            if text is None:
                out.append((-0.5 + penalty("INVALID INPUT", 30, 0.5), False))
            else:
                out.append(((2 / (2 * 40) if runs(source, text) else -0.5) + penalty(text, 30, 0.5), False))
            kind = "reflect"
        else:
            lowered = action.lower()
            clean = lowered.count("summary:") == 1
            done = clean and lowered.split("summary:")[0].strip() == "yes"
            assert step.critic is not None
            score = rating(step.critic)
            if score is None:
                paid = 0.0
            else:
                term = (1.0 if score > 0.7 else -1.0) if done else (1.0 if score < 0.3 else 0.0)
                paid = (score + term) * 2.0
            out.append(((0.0 if clean else -0.5) + paid + penalty(action, 100, 0.05), done))
            kind = "reason"
            if done:
                break
    return out


# -- the replay ----------------------------------------------------------------------------------------------------


def replay(
    manifests: ManifestStore, runtime: Runtime, steps: list[Step], rewards: RewardConfig
) -> tuple[list[tuple[float, bool]], int]:
    """The environment over a recorded episode: (reward, done) for each step, and the critic replies left unread."""
    replies = deque(step.critic for step in steps if step.critic is not None)
    critic = ScriptedCritic(
        reasoning=lambda view, text: parse_critic_rating(replies.popleft()),
        hypothesis=lambda view, text: parse_critic_rating(replies.popleft()),
    )
    env = ExplorationEnv(manifests.method(METHOD), critic, EnvConfig(rewards=rewards), runtime)
    env.reset()
    out: list[tuple[float, bool]] = []
    for step in steps:
        result = env.step(step.reply)
        out.append((result.reward, result.done))
        if result.done:
            break
    return out, len(replies)


@pytest.mark.parametrize(
    "episode", [CONCLUDING, UNSCORED_CONCLUSION, TURN_LIMIT], ids=["concluding", "unscored conclusion", "turn limit"]
)
def test_a_recorded_episode_pays_under_the_reference_schedule_what_the_references_rules_pay_step_for_step(
    manifests: ManifestStore, runtime: Runtime, episode: list[Step]
) -> None:
    expected = reference_episode(manifests.method(METHOD).source, episode)
    got, unread = replay(manifests, runtime, episode, RewardConfig.named("reference"))
    assert len(got) == len(expected) and unread == 0  # the same steps, and the critic asked at the same ones
    for turn, ((reward, done), (want, ends)) in enumerate(zip(got, expected, strict=True), start=1):
        assert reward == pytest.approx(want), f"turn {turn}"
        assert done == ends, f"turn {turn}"


def test_the_recorded_episodes_cover_each_rule_where_the_schedules_differ(manifests: ManifestStore) -> None:
    source = manifests.method(METHOD).source
    concluding = [reward for reward, _ in reference_episode(source, CONCLUDING)]
    assert concluding[0] == pytest.approx(6 / 9 - 1)  # 110 words: the floor's -1
    assert concluding[1] == pytest.approx(0.025)  # a 40-word reply whose input is two words
    assert concluding[6] == pytest.approx(5 / 9 - 2.1)  # 520 words: -(420 / 200)
    assert concluding[10] == pytest.approx(-0.5 - 1)  # a 41-word input
    assert concluding[13] == pytest.approx(0.025)  # a repeated input
    assert reference_episode(source, UNSCORED_CONCLUSION)[-1] == (0.0, True)
    turn_limit = reference_episode(source, TURN_LIMIT)
    assert len(turn_limit) == 40 and turn_limit[-1] == (-1.0, True)


def test_this_projects_schedule_differs_on_those_steps_as_documented(
    manifests: ManifestStore, runtime: Runtime
) -> None:
    ours, _ = replay(manifests, runtime, CONCLUDING, RewardConfig())
    assert ours[0][0] == pytest.approx(6 / 9 - 0.5)  # capped: 0.05 per word beyond 100
    assert ours[1][0] == pytest.approx(-0.975)  # the whole 40-word reply counts: -1 + 0.025
    assert ours[2][0] == 0.0  # a reflection that goes on is not paid
    assert ours[6][0] == pytest.approx(5 / 9 - 1.0)  # never worse than the cap
    assert ours[13][0] == 0.0  # a repeated input earns nothing
    timed_out, _ = replay(manifests, runtime, TURN_LIMIT[:-1] + [Step("I will try another pair.", rated(3))],
                          RewardConfig())  # fmt: skip
    reward, done = timed_out[-1]
    assert reward == pytest.approx(3 / 9 - 1.0) and done  # the last step is read and paid, then timed out


def test_an_unscored_critic_reply_pays_nothing_for_a_concluding_hypothesis_under_every_schedule(
    manifests: ManifestStore, runtime: Runtime
) -> None:
    for name in ("pau-mcp", "paper", "reference"):
        got, _ = replay(manifests, runtime, UNSCORED_CONCLUSION, RewardConfig.named(name))
        assert got[-1] == (0.0, True), name  # not -2: the critic's silence says nothing about stopping


def test_the_floored_length_penalty_is_minus_one_from_tau_plus_one_and_minus_two_at_five_tau() -> None:
    def floored(n: int) -> float:
        return length_penalty(words(n), tau=100, alpha=0.05, cap=1.0, shape="floored")

    assert floored(100) == 0.0
    assert floored(101) == floored(300) == -1.0
    assert floored(500) == -2.0
    assert floored(100_100) == -500.0  # no bound
    assert length_penalty(words(101), 100, 0.05, 1.0) == pytest.approx(-0.05)  # capped: alpha per word


def test_the_floored_shape_needs_a_tau_to_divide_by() -> None:
    with pytest.raises(ValueError, match="input_tau must be at least 1"):
        RewardConfig.named("reference", input_tau=0)
    with pytest.raises(ValueError, match="unknown length_shape 'square'"):
        RewardConfig(length_shape="square")
