"""Opt-in: judge and code-match one builtin method with a real model (set PAU_TEST_LLM_BASE_URL to run)."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from pau_mcp.llm import LLMClient
from pau_mcp.manifests import ManifestStore
from pau_mcp.scoring import Scorer, ScoreResult
from wasm_runtime import Sandbox

BASE_URL = os.environ.get("PAU_TEST_LLM_BASE_URL")

pytestmark = [
    pytest.mark.live_llm,
    pytest.mark.skipif(
        not BASE_URL, reason="talks to a real model: set PAU_TEST_LLM_BASE_URL (and OPENAI_API_KEY if it needs one)"
    ),
]


def test_a_real_judge_and_code_writer_score_a_good_description_highly(sandbox: Sandbox, tmp_path: Path) -> None:
    env = dict(os.environ, OPENAI_BASE_URL=BASE_URL or "")
    llm = LLMClient(env=env, cache_path=tmp_path / "llm-cache.db", timeout_s=180)
    scorer = Scorer(
        ManifestStore(),
        sandbox,
        llm,
        judge_model=os.environ.get("PAU_TEST_JUDGE_MODEL", "openai/gpt-4o-mini"),
        coder_model=os.environ.get("PAU_TEST_CODER_MODEL", "openai/gpt-4o-mini"),
    )
    description = (
        "Takes a string and returns a list of (character, count) tuples, one per maximal run of equal consecutive "
        "characters, in order; case-sensitive; an empty string gives an empty list."
    )

    async def go() -> ScoreResult:
        with anyio.fail_after(600):
            return await scorer.score("builtin/b002", description)

    result = anyio.run(go)
    assert result.judge is not None and result.codematch is not None
    assert result.judge.status == "scored", result.judge.reason
    assert result.judge.rating is not None and result.judge.rating >= 4, result.judge.reply
    assert (
        result.codematch.status == "scored"
        and result.codematch.fraction is not None
        and result.codematch.fraction >= 0.9
    ), (
        result.codematch.reason,
        result.codematch.code,
    )
    assert result.usage.total > 0
