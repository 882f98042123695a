"""The reference's UNSUPERVISED reward mode: a hypothesis is rewarded by code written from the gold description and
the explorer's examples, scored on the hidden tests; through the real LLM layer against a loopback server."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from fakellm import FakeLLM
from pau_command import run_pau

from pau_mcp.llm import LLMClient
from pau_mcp.manifests import ManifestStore
from pau_mcp.rl import EnvConfig, ExplorationEnv, Runtime, UnsupervisedCritic, critic_for

MODEL = "openai/fake-critic"
ROOT = Path(__file__).resolve().parents[3]


def _episode(manifests: ManifestStore, runtime: Runtime, fake: FakeLLM, tmp_path: Path) -> tuple[ExplorationEnv, Any]:
    llm = LLMClient(env={"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "k"}, cache_path=tmp_path / "c.db")
    critic = critic_for(llm, MODEL, "unsupervised", coder_model="openai/fake-coder", sandbox=runtime.sandbox)
    assert isinstance(critic, UnsupervisedCritic)
    env = ExplorationEnv(manifests.method("builtin/b005"), critic, EnvConfig(), runtime)
    env.reset()
    env.step("I will try 5.")
    env.step("INPUT: (5,)")
    done = env.step("CONCLUDED: YES\nHYPOTHESIS: an unrelated guess the reward never reads")
    runtime.run(critic.aclose())
    return env, done


def test_a_concluding_hypothesis_earns_the_hidden_test_share_of_code_written_from_the_gold_description(
    manifests: ManifestStore, runtime: Runtime, tmp_path: Path
) -> None:
    source = manifests.method("builtin/b005").source
    with FakeLLM() as fake:
        fake.say("A fine plan.\nRating: 6")  # the reasoning step: rated as the asymmetric critic rates it
        fake.say(f"```python\n{source}```")  # the code writer: the hidden function itself, so every test passes
        env, done = _episode(manifests, runtime, fake, tmp_path)
        reasoning_prompt, coder_prompt = fake.prompts()
    assert "Takes a positive integer and returns how many steps" in reasoning_prompt  # the gold, as asymmetric
    gold = manifests.method("builtin/b005").description
    assert gold in coder_prompt and "unrelated guess" not in coder_prompt
    assert "test_func(12) -> 3" in coder_prompt and "test_func(5) -> returned 3" in coder_prompt  # its examples
    assert done.info["critic"]["share"] == 1.0 and done.info["critic"]["score"] == 9
    assert done.info["components"]["hypothesis"] == pytest.approx(2.0 * (1.0 + 1.0))  # H * (share + bonus)


def test_a_reply_without_code_leaves_the_hypothesis_unscored(
    manifests: ManifestStore, runtime: Runtime, tmp_path: Path
) -> None:
    with FakeLLM() as fake:
        fake.say("Rating: 6").say("")
        _, done = _episode(manifests, runtime, fake, tmp_path)
    assert done.info["critic"]["status"] == "unscored" and "share" not in done.info["critic"]


def test_the_unsupervised_mode_needs_a_code_writer_and_says_how_to_give_one(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="coder model"):
        critic_for(LLMClient(), MODEL, "unsupervised")
    with pytest.raises(ValueError, match="unknown critic mode"):
        critic_for(LLMClient(), MODEL, "omniscient")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAU_")}
    done = run_pau(
        "rl", "rollout", "--model", "openai/p", "--critic-model", MODEL, "--critic-mode", "unsupervised",
        "--data-dir", str(tmp_path), env=env, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 2 and "--coder-model or PAU_CODER_MODEL" in done.stderr
