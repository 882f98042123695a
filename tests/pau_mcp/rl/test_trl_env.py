"""The TRL adapter: its tools as TRL's GRPOTrainer finds and describes them, and an episode through them."""

from __future__ import annotations

import inspect

import pytest

from pau_mcp.manifests import ManifestStore
from pau_mcp.rl import EnvConfig, Runtime, ScriptedCritic
from pau_mcp.rl.trl_env import PauToolEnv


def _env(manifests: ManifestStore, runtime: Runtime) -> PauToolEnv:
    critic = ScriptedCritic(reasoning=lambda v, t: 9, hypothesis=lambda v, t: 9)
    return PauToolEnv(critic=critic, config=EnvConfig(), runtime=runtime, manifests=manifests)


def test_trl_finds_three_tools_with_schemas_from_their_docstrings(manifests: ManifestStore, runtime: Runtime) -> None:
    pytest.importorskip("trl")
    from transformers.utils import get_json_schema

    env = _env(manifests, runtime)
    # The rule GRPOTrainer applies to an environment_factory instance (trl 1.16): public functions but reset/get_reward.
    tools = [
        getattr(env, name)
        for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]
    schemas = {tool.__name__: get_json_schema(tool)["function"] for tool in tools}
    assert set(schemas) == {"reason", "run", "reflect"}
    assert schemas["run"]["parameters"]["properties"]["arguments"]["type"] == "string"
    assert schemas["reflect"]["parameters"]["properties"]["concluded"]["type"] == "boolean"


def test_an_episode_through_the_tools_is_rewarded_as_the_environment_would(
    manifests: ManifestStore, runtime: Runtime
) -> None:
    env = _env(manifests, runtime)
    first = env.reset(method_id="builtin/b005", prompt=[{"role": "user", "content": "x"}])
    assert "call `reason`" in first and "test_func(12) -> 3" in first
    assert "Give the exact input now" in env.reason("I will try 5.")
    assert "test_func(5) returned 3" in env.run("(5,)")
    assert env.reflect("counts steps; ValueError below 1", True).startswith("Episode over")
    assert env.get_reward() == pytest.approx(1.0 + 0.025 + 4.0)


def test_a_tool_out_of_turn_is_refused_and_costs_the_parse_penalty(manifests: ManifestStore, runtime: Runtime) -> None:
    env = _env(manifests, runtime)
    env.reset(method_id="builtin/b005")
    assert env.run("(5,)") == "Out of turn: it is time to reason; call reason(plan)."
    assert env.get_reward() == pytest.approx(-0.5 - 1.0)  # the penalty, and the rollout has not concluded
