"""The SkyRL-gym adapter, made and stepped through the real skyrl_gym registry."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakellm import FakeLLM
from rlscript import critic_reply, honest

skyrl_gym = pytest.importorskip("skyrl_gym")

from pau_mcp.rl.skyrl_env import ENV_ID, PauExploreEnv, dataset_rows, register  # noqa: E402


def test_an_episode_through_skyrl_gym_make_gives_text_observations_rewards_and_an_end(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with FakeLLM(responder=critic_reply) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        monkeypatch.setenv("PAU_MCP_DATA_DIR", str(tmp_path))
        register()
        register()  # again is harmless
        env = skyrl_gym.make(
            ENV_ID,
            env_config={"critic_model": "openai/fake-critic", "budget": 6, "rewards": {"timeout_penalty": -2.0}},
            extras={"method_id": "builtin/b005"},
        )
        assert isinstance(env, PauExploreEnv) and env.max_turns == 40
        messages, info = env.init([{"role": "user", "content": "placeholder"}])
        assert [m["role"] for m in messages] == ["system", "user"] and info == {"method_id": "builtin/b005"}
        observation, rewards, done = messages[-1]["content"], [], False
        while not done:
            output = env.step(honest(observation))
            assert set(output) >= {"observations", "reward", "done", "metadata"}
            rewards.append(output["reward"])
            done = output["done"]
            observation = output["observations"][0]["content"] if output["observations"] else ""
        metrics = env.get_metrics()
    assert output["metadata"]["concluded"] and metrics["concluded"] == 1.0
    assert sum(rewards) == pytest.approx(metrics["return"]) and env.turns == len(rewards)
    assert len(fake.requests) >= len(rewards) // 3  # the critic was asked


def test_a_row_without_a_method_id_is_refused_with_what_to_add() -> None:
    with pytest.raises(ValueError, match="method_id column"):
        PauExploreEnv({"critic_model": "openai/x"}, {})


def test_dataset_rows_name_the_environment_and_the_method_but_never_show_it_to_the_policy() -> None:
    (row,) = dataset_rows(["builtin/b005"])
    assert row["env_class"] == ENV_ID and row["method_id"] == "builtin/b005"
    assert "b005" not in str(row["prompt"])


def test_rl_dataset_writes_disjoint_training_and_validation_rows_for_a_suite(tmp_path: Path) -> None:
    import os
    from pathlib import Path

    import pyarrow.parquet as pq
    from pau_command import run_pau

    from pau_mcp.manifests import ManifestStore

    root = Path(__file__).resolve().parents[3]
    done = run_pau("rl", "dataset", "--out", tmp_path, "--val-share", "0.25", "--seed", "3", env=dict(os.environ),
                   cwd=root)  # fmt: skip
    assert done.returncode == 0, done.stderr
    train = pq.read_table(tmp_path / "train.parquet").to_pylist()
    val = pq.read_table(tmp_path / "val.parquet").to_pylist()
    every = set(ManifestStore(()).suite("builtin").methods)
    assert {r["method_id"] for r in train} | {r["method_id"] for r in val} == every
    assert not {r["method_id"] for r in train} & {r["method_id"] for r in val}
    assert len(val) == round(len(every) * 0.25) and {r["env_class"] for r in train + val} == {ENV_ID}
    again = run_pau("rl", "dataset", "--out", tmp_path / "again", "--val-share", "0.25", "--seed", "3",
                    env=dict(os.environ), cwd=root)  # fmt: skip
    assert again.returncode == 0 and pq.read_table(tmp_path / "again" / "val.parquet").to_pylist() == val
