"""The exploration environment: the paper's cycle, the server's query rules, rewards per step, many threads."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest
from stand_ins import RefusingSandbox

from pau_mcp.manifests import ManifestStore
from pau_mcp.rl import (
    Critic,
    CriticView,
    EnvConfig,
    EpisodeError,
    ExplorationEnv,
    RewardConfig,
    Runtime,
    ScriptedCritic,
    StepResult,
)
from wasm_runtime import Limits, Sandbox

GOOD = "CONCLUDED: YES\nHYPOTHESIS: counts steps to 1; raises ValueError below 1"


def _env(manifests: ManifestStore, runtime: Runtime, critic: Critic | None = None, **config: Any) -> ExplorationEnv:
    return ExplorationEnv(manifests.method("builtin/b005"), critic or ScriptedCritic(), EnvConfig(**config), runtime)


def test_one_cycle_rewards_reasoning_input_and_hypothesis_as_the_schedule_says(
    manifests: ManifestStore, runtime: Runtime
) -> None:
    critic = ScriptedCritic(reasoning=lambda view, text: 9, hypothesis=lambda view, text: 9)
    env = _env(manifests, runtime, critic)
    env.reset()
    reason = env.step("I will try 5.")
    assert reason.info["phase"] == "reason" and reason.reward == pytest.approx(1.0)
    propose = env.step("INPUT: (5,)")
    assert propose.info["call"] == {"input": "(5,)", "counted": True, "status": "ok", "shown": "returned 3",
                                    "repeated": False}  # fmt: skip
    assert propose.reward == pytest.approx(0.025)
    done = env.step(GOOD)
    assert done.done and done.info["concluded"]
    assert done.reward == pytest.approx(2.0 * (1 + 1))  # H * (9/9 + termination bonus)
    assert env.total_reward == pytest.approx(1.0 + 0.025 + 4.0)


def test_a_call_that_raises_costs_the_runtime_error_penalty_and_counts(
    manifests: ManifestStore, runtime: Runtime
) -> None:
    env = _env(manifests, runtime)
    env.reset()
    env.step("try zero")
    result = env.step("INPUT: (0,)")
    assert result.info["call"]["status"] == "error" and result.info["call"]["counted"]
    assert result.info["components"]["execution"] == -0.5
    assert "raised ValueError" in result.observation


@pytest.mark.parametrize(
    ("reply", "status"),
    [("I would like to try something", "unparsed"), ("INPUT: (1, 2)", "invalid_input"),
     ("INPUT: (__import__('os'),)", "invalid_input"), ("INPUT: (1,", "invalid_input")],
)  # fmt: skip
def test_malformed_inputs_cost_the_parse_penalty_never_run_and_never_count(
    manifests: ManifestStore, runtime: Runtime, reply: str, status: str
) -> None:
    env = _env(manifests, runtime)
    env.reset()
    env.step("plan")
    result = env.step(reply)
    assert result.info["call"]["status"] == status and not result.info["call"]["counted"]
    assert result.info["components"]["parse"] == -0.5
    assert env.budget.used() == 0 and env.experiments == []


def test_the_wrong_arity_is_refused_with_the_servers_words(manifests: ManifestStore, runtime: Runtime) -> None:
    env = _env(manifests, runtime)
    env.reset()
    env.step("plan")
    result = env.step("INPUT: (1, 2)")
    assert "test_func(arg0) takes 1 argument, got 2" in result.info["call"]["shown"]


def test_a_repeated_input_counts_but_earns_no_execution_reward(manifests: ManifestStore, runtime: Runtime) -> None:
    env = _env(manifests, runtime)
    env.reset()
    for _ in range(2):
        env.step("plan")
        result = env.step("INPUT: (5,)")
        env.step("CONCLUDED: NO\nHYPOTHESIS: something")
    assert result.info["call"]["repeated"] and result.info["components"]["execution"] == 0.0
    assert env.budget.used() == 2


def test_the_episode_ends_at_the_reflection_after_the_last_counted_call(
    manifests: ManifestStore, runtime: Runtime
) -> None:
    env = _env(manifests, runtime, budget=2)
    env.reset()
    for value in (1, 2):
        env.step("plan")
        propose = env.step(f"INPUT: ({value},)")
        result = env.step("CONCLUDED: NO\nHYPOTHESIS: still unsure")
    assert "no calls left" in propose.observation
    assert result.done and not result.info["concluded"] and env.budget.used() == 2


def test_the_turn_limit_ends_an_unconcluded_episode_with_the_timeout_penalty(
    manifests: ManifestStore, runtime: Runtime
) -> None:
    env = _env(manifests, runtime, max_turns=4)
    env.reset()
    for reply in ("plan", "INPUT: (3,)", "CONCLUDED: NO\nHYPOTHESIS: maybe"):
        env.step(reply)
    last = env.step("plan again")
    assert last.done and last.info["components"]["timeout"] == -1.0 and not env.concluded
    with pytest.raises(EpisodeError, match="reset"):
        env.step("more")


def test_the_policy_never_sees_the_source_or_the_gold_description(manifests: ManifestStore, runtime: Runtime) -> None:
    method = manifests.method("builtin/b005")
    env = _env(manifests, runtime)
    texts = [m["content"] for m in env.reset()]
    for reply in ("plan", "INPUT: (9,)", "CONCLUDED: NO\nHYPOTHESIS: x", "plan", "INPUT: (0,)", GOOD):
        texts.append(env.step(reply).observation)
    seen = "\n".join(texts)
    assert method.description not in seen and "n //= 3" not in seen and "steps += 1" not in seen
    assert "test_func(12) -> 3" in seen  # the initial examples are the agent's to see


def test_only_an_asymmetric_critic_is_handed_the_gold_data(manifests: ManifestStore, runtime: Runtime) -> None:
    views: list[CriticView] = []

    def remember(view: CriticView, text: str) -> int:
        views.append(view)
        return 5

    for mode in ("asymmetric", "symmetric"):
        env = _env(manifests, runtime, ScriptedCritic(reasoning=remember, hypothesis=remember, mode=mode))
        env.reset()
        env.step("plan")
    asymmetric, symmetric = views
    assert asymmetric.gold is not None and "n //= 3" in asymmetric.gold.source
    assert symmetric.gold is None


def test_only_the_concluding_hypothesis_is_judged_unless_every_reflection_is_asked_for(
    manifests: ManifestStore, runtime: Runtime
) -> None:
    env = _env(manifests, runtime)
    env.reset()
    for reply in ("plan", "INPUT: (3,)"):
        env.step(reply)
    going_on = env.step("CONCLUDED: NO\nHYPOTHESIS: maybe")
    assert "hypothesis" not in going_on.info["components"]
    for reply in ("plan", "INPUT: (4,)"):
        env.step(reply)
    assert "hypothesis" in env.step(GOOD).info["components"]
    every = _env(manifests, runtime, rewards=RewardConfig(judge_every_reflection=True))
    every.reset()
    for reply in ("plan", "INPUT: (3,)"):
        every.step(reply)
    assert "hypothesis" in every.step("CONCLUDED: NO\nHYPOTHESIS: maybe").info["components"]


def _episode(env: ExplorationEnv) -> list[float]:
    env.reset()
    rewards: list[float] = []
    for value in range(1, 4):
        for reply in (f"try {value}", f"INPUT: ({value},)", "CONCLUDED: NO\nHYPOTHESIS: steps"):
            rewards.append(env.step(reply).reward)
    rewards.append(env.step("try 0").reward)
    rewards.append(env.step("INPUT: (0,)").reward)
    rewards.append(env.step(GOOD).reward)
    return rewards


def test_environments_stepped_from_32_threads_at_once_give_the_rewards_of_one_thread(manifests: ManifestStore) -> None:
    # A time limit of its own: 32 threads on two cores of a busy CI machine share the GIL for the sandbox's host
    # calls, and the default limit's wall-clock backstop (5 x 2 s) is not what this test is about.
    runtime = Runtime(lambda: Sandbox(limits=Limits(timeout_s=20.0)))
    expected = _episode(_env(manifests, runtime))
    results: list[list[float] | BaseException | None] = [None] * 32
    start = threading.Barrier(32)

    def work(index: int) -> None:
        try:
            env = _env(manifests, runtime)
            start.wait()
            results[index] = _episode(env)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            results[index] = exc

    threads = [threading.Thread(target=work, args=(i,)) for i in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert all(result == expected for result in results), [r for r in results if r != expected][:3]


def test_astep_steps_without_blocking_the_event_loop(manifests: ManifestStore, runtime: Runtime) -> None:
    async def main() -> tuple[StepResult, StepResult]:
        env = _env(manifests, runtime)
        env.reset()
        with anyio.fail_after(30):
            first = await env.astep("plan")
            second = await env.astep("INPUT: (6,)")
        return first, second

    first, second = anyio.run(main)
    assert first.info["phase"] == "reason" and second.info["call"]["shown"] == "returned 2"


def test_a_call_the_sandbox_could_not_run_does_not_count_against_the_budget(manifests: ManifestStore) -> None:
    from pau_mcp.rl import Runtime

    # A sandbox whose worker has died: every call fails.
    env = _env(manifests, Runtime(lambda: RefusingSandbox(OSError("the sandbox's worker died"))), budget=2)
    env.reset()
    env.step("try five")
    with pytest.raises(OSError):
        env.step("INPUT: (5,)")
    assert env.budget.used() == 0  # the server's rule too: a query is given back when the call never ran
