"""``feedback_for``: what the MCP server's submit tool shows an agent when it runs with --feedback score."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from fakellm import FakeLLM

from pau_mcp.config import Settings
from pau_mcp.manifests import ManifestStore
from pau_mcp.scoring import feedback_for

RUNS = ManifestStore().method("builtin/b002")
WRONG = "def test_func(arg0):\n    return [(c, 1) for c in arg0]\n"


def _replies(body: dict[str, Any]) -> str:
    prompt = json.dumps(body["messages"])
    if "Rating: X" in prompt:
        # A judge that quotes the gold description: the agent must never see this reply.
        return f"The reference says: {RUNS.description}\nRating: 4"
    return f"```python\n{WRONG}```"


@pytest.fixture
def fake(monkeypatch) -> Iterator[FakeLLM]:
    with FakeLLM(responder=_replies) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        yield server


def feedback(settings: Settings, description: str, code: str | None) -> dict[str, Any]:
    send = feedback_for(settings)

    async def go() -> dict[str, Any]:
        with anyio.fail_after(120):
            return await send("builtin/b002", description, code)

    return anyio.run(go)


def test_feedback_holds_every_score_and_one_counterexample_but_no_gold_material(fake, tmp_path):
    settings = Settings(data_dir=tmp_path, judge_model="openai/judge", coder_model="openai/coder")
    shown = feedback(settings, "Pairs every character with 1.", WRONG)
    assert set(shown) == {"judge_rating", "code_match", "direct_code_match", "direct_code_note", "counterexample"}
    assert (
        shown["judge_rating"] == 4 and 0 < shown["code_match"] < 1 and shown["direct_code_match"] == shown["code_match"]
    )
    text = json.dumps(shown)
    assert RUNS.description not in text and "runs.append" not in text
    others = [case.input for case in RUNS.tests if case.input != shown["counterexample"]["input"]]
    assert not [literal for literal in others if literal in text]
    assert len(fake.requests) == 2


def test_without_models_feedback_scores_code_only_and_the_log_names_the_settings(fake, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="pau_mcp.scoring"):
        settings = Settings(data_dir=tmp_path)
        shown = feedback(settings, "Pairs every character with 1.", RUNS.source)
    assert shown == {"direct_code_match": 1.0}
    assert "PAU_JUDGE_MODEL" in caplog.text and "PAU_CODER_MODEL" in caplog.text
    assert fake.requests == []


def test_a_failing_provider_leaves_the_submission_recorded_and_says_scores_are_unavailable(fake, tmp_path):
    fake.fail(401, times=2, message="bad key")
    settings = Settings(data_dir=tmp_path, judge_model="openai/judge", coder_model="openai/coder")
    shown = feedback(settings, "Pairs every character with 1.", None)
    assert list(shown) == ["scores"] and "unavailable" in shown["scores"] and "bad key" not in shown["scores"]
