"""The LLM judge: its prompt, reading the rating, unscored replies, and summaries that say how they counted."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest
from fakellm import FakeLLM

from pau_mcp.config import Settings
from pau_mcp.llm import LLMClient, LLMError, LLMNotConfigured
from pau_mcp.scoring import JudgeResult, Scorer, judge_description, parse_rating, summarise_ratings

GOLD = "Returns the sum of the two arguments, or 0 when either is negative."
CANDIDATE = "Adds its two inputs together."


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def judge(fake: FakeLLM, reply: str | None = None, **options) -> JudgeResult:
    if reply is not None:
        fake.say(reply)
    llm = LLMClient(env={"OPENAI_BASE_URL": fake.base_url}, backoff_s=0.01, **options)

    async def go() -> JudgeResult:
        with anyio.fail_after(30):
            return await judge_description(llm, "openai/judge", GOLD, CANDIDATE)

    return anyio.run(go)


def test_the_judge_prompt_carries_both_descriptions_and_the_rubric(fake):
    judge(fake, "They agree on the main case but the candidate misses negatives.\nRating: 3")
    (body,) = fake.requests
    prompt = fake.prompts()[0]
    assert GOLD in prompt and CANDIDATE in prompt
    assert prompt.index(GOLD) < prompt.index(CANDIDATE)  # reference first, then the candidate
    for level in ("5 - Equivalent", "4 -", "3 -", "2 -", "1 - Wrong"):
        assert level in prompt
    assert "Rating: X" in prompt
    assert body["temperature"] == 0 and body["model"] == "judge"


def test_a_rated_reply_is_scored_with_the_reply_tokens_and_model(fake):
    result = judge(fake, "Close enough.\nRating: 4")
    assert (result.status, result.rating, result.reason) == ("scored", 4, None)
    assert result.reply.endswith("Rating: 4") and result.model == "openai/judge" and result.usage.total > 0


@pytest.mark.parametrize(
    ("reply", "rating"),
    [
        ("Rating: 4", 4),
        ("rating:4", 4),
        ("RATING: 5", 5),
        ("**Rating:** 2", 2),
        ("**Rating**: 3", 3),
        ("Rating: 4/5", 4),
        ("Rating = 1", 1),
        ("Rating: [5]", 5),
        ("Final rating: 3.", 3),
        ("The reference and the candidate differ.\n\nRating: 2\n", 2),
        ("At first: Rating: 2. On reflection the edge cases match.\nRating: 4", 4),
    ],
)
def test_a_rating_line_is_read_in_its_usual_variants(reply, rating):
    assert parse_rating(reply) == rating


@pytest.mark.parametrize(
    "reply", ["Rating: 6", "Rating: 0", "Rating: 4.5", "Rating: 45", "I would say 4.", "Rating: X", ""]
)
def test_replies_without_a_valid_rating_are_not_read_as_numbers(reply):
    assert parse_rating(reply) is None


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("They are nearly the same, I would give it a four.", "no 'Rating: X' line"),
        ("Rating: 4.5", "mentions a rating but none of the form"),
        ("", "reply was empty"),
    ],
)
def test_an_unparseable_reply_is_unscored_with_the_reason(fake, reply, reason):
    result = judge(fake, reply)
    assert result.status == "unscored" and result.rating is None
    assert reason in result.reason
    assert result.reply == reply


def test_a_judge_request_the_provider_refuses_is_an_error_result_not_a_rating(fake):
    fake.fail(400, message="context length exceeded")
    result = judge(fake)
    assert result.status == "error" and result.rating is None and "context length exceeded" in result.reason


def test_a_fatal_provider_error_is_raised_not_recorded(fake):
    fake.fail(401, message="bad key")
    with pytest.raises(LLMError, match="bad key"):
        judge(fake)


def test_summaries_count_unscored_replies_as_1_only_when_asked_and_say_so():
    results = [
        JudgeResult("scored", 5),
        JudgeResult("scored", 3),
        JudgeResult("unscored", reason="no line"),
        ("error", None),
    ]
    parity = summarise_ratings(results, unscored_as=1)
    assert (parity.scored, parity.unscored, parity.errors) == (2, 1, 1)
    assert parity.mean_scored == 4.0 and parity.mean == pytest.approx(3.0)
    assert "1 unscored judge reply counted as 1" in parity.note() and "reference" in parity.note()
    left_out = summarise_ratings(results, unscored_as=None)
    assert left_out.mean == 4.0 and "left out" in left_out.note()
    assert summarise_ratings([("scored", 4.0)]).note() == "no unscored judge replies"


def test_a_scorer_without_a_judge_model_names_the_flag_and_the_variable(sandbox):
    settings = Settings(judge_model=None, coder_model=None)
    scorer = Scorer(settings.manifest_store(), sandbox, LLMClient(env={}))
    with pytest.raises(LLMNotConfigured) as info:
        anyio.run(lambda: scorer.score("builtin/b002", "Counts runs of characters.", kinds=["judge"]))
    assert "--judge-model" in str(info.value) and "PAU_JUDGE_MODEL" in str(info.value)
    with pytest.raises(LLMNotConfigured, match="--coder-model.*PAU_CODER_MODEL"):
        scorer.check({"codematch"})
