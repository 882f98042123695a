"""``Scorer``: one submission, every score it allows, tokens and cost summed, infrastructure errors raised."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from fakellm import FakeLLM, Reply

from pau_mcp.llm import LLMClient, LLMError, Price, Pricing
from pau_mcp.manifests import ManifestStore
from pau_mcp.scoring import NothingToScore, Scorer, ScoreResult, UnknownMethod
from wasm_runtime import Sandbox

STORE = ManifestStore()
RUNS = STORE.method("builtin/b002")


def _replies(body: dict[str, Any]) -> Reply:
    if "Rating: X" in json.dumps(body["messages"]):
        return Reply(text="Rating: 5", input_tokens=1000, output_tokens=10)
    return Reply(text=f"```python\n{RUNS.source}```", input_tokens=500, output_tokens=200)


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM(responder=_replies) as server:
        yield server


@pytest.fixture
def scorer(fake: FakeLLM, sandbox: Sandbox) -> Scorer:
    pricing = Pricing({"openai/judge": Price(input=1.0, output=2.0)})
    llm = LLMClient(env={"OPENAI_BASE_URL": fake.base_url}, pricing=pricing, backoff_s=0.01)
    return Scorer(STORE, sandbox, llm, judge_model="openai/judge", coder_model="openai/coder")


def score(scorer: Scorer, *args: Any, **options: Any) -> ScoreResult:
    async def go() -> ScoreResult:
        with anyio.fail_after(60):
            return await scorer.score(*args, **options)

    return anyio.run(go)


def test_a_description_with_code_gets_all_three_scores_with_tokens_and_cost_summed(
    scorer: Scorer, fake: FakeLLM
) -> None:
    result = score(scorer, "builtin/b002", "Run lengths of a string.", RUNS.source, counterexample=True)
    assert result.judge is not None and result.codematch is not None and result.direct is not None
    assert result.judge.rating == 5 and result.codematch.fraction == 1.0 and result.direct.fraction == 1.0
    assert (result.usage.input_tokens, result.usage.output_tokens) == (1500, 210)
    assert result.cost_usd == pytest.approx((1000 * 1.0 + 10 * 2.0) / 1e6)
    assert result.unpriced == ("openai/coder",)
    assert json.loads(json.dumps(result.to_dict()))["judge"]["rating"] == 5
    assert len(fake.requests) == 2


def test_requested_scores_the_submission_cannot_have_are_left_out(scorer: Scorer, fake: FakeLLM) -> None:
    result = score(scorer, "builtin/b002", "Run lengths.", None, kinds=["judge", "direct"])
    assert result.judge is not None
    assert result.judge.rating == 5 and result.direct is None and result.codematch is None
    with pytest.raises(NothingToScore, match="judge needs a description; direct needs code"):
        score(scorer, "builtin/b002", " ", None, kinds=["judge", "direct"])
    with pytest.raises(NothingToScore, match="empty"):
        score(scorer, "builtin/b002", None, "  ")
    with pytest.raises(NothingToScore, match="unknown score kind vibes"):
        score(scorer, "builtin/b002", "x", kinds=["vibes"])


@pytest.mark.parametrize("method_id", ["builtin/nope", "nosuite/b002", "b002", ""])
def test_an_unknown_method_raises_unknown_method_saying_how_ids_look(scorer: Scorer, method_id: str) -> None:
    with pytest.raises(UnknownMethod, match="no method"):
        score(scorer, method_id, "x")


def test_a_fatal_provider_error_is_raised_as_itself_not_as_a_group(scorer: Scorer, fake: FakeLLM) -> None:
    fake.fail(401, times=2, message="bad key")
    with pytest.raises(LLMError, match="bad key"):
        score(scorer, "builtin/b002", "Run lengths.")
