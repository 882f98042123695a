"""A streamed reply that ends before its finish marker is a reply cut short: retried, and never taken as the answer.

A CPU-served model is read as a stream after its first timeout; a server restarting or a proxy closing the connection
cleanly mid-reply then left "To test the", "HYPOTH" or "INPUT: (" recorded as the model's whole reply. The scripted
server cuts each API's stream cleanly at every point before its finish marker.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fakellm import FakeLLM

from pau_mcp.llm import CapabilityTable, LLMClient, LLMError

USER = [{"role": "user", "content": "What should we test?"}]
WHOLE = "To test the function we call it with a negative number"

#: Per API, the events sent before the finish marker (chat: the role chunk and five text parts, then the finish
#: chunk; Messages: message_start, the block's start, five deltas and its stop, then message_delta; Responses:
#: response.created and five deltas, then response.completed).
BEFORE_FINISH = {"openai/m": 6, "anthropic/claude-x": 8, "openai/resp-1": 6}


def _env(fake: FakeLLM) -> dict[str, str]:
    return {"OPENAI_BASE_URL": fake.base_url, "ANTHROPIC_BASE_URL": fake.root_url}


def _capabilities(tmp_path: Path) -> CapabilityTable:
    table = tmp_path / "capabilities.json"
    table.write_text(json.dumps({"models": [{"match": ["resp-*"], "api": "responses"}]}))
    return CapabilityTable.load(table)


def _streaming(
    make_client: Callable[..., LLMClient], fake: FakeLLM, tmp_path: Path, model: str, **options: Any
) -> LLMClient:
    llm = make_client(_env(fake), capabilities=_capabilities(tmp_path), **options)
    llm.provider(model).streaming = True  # as after a first timeout
    return llm


CUTS = [(model, cut) for model, last in BEFORE_FINISH.items() for cut in range(last + 1)]


@pytest.mark.parametrize(("model", "cut"), CUTS, ids=[f"{m}-after-{c}-events" for m, c in CUTS])
def test_a_stream_cut_cleanly_before_its_finish_marker_is_retried_and_the_whole_reply_taken(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any], tmp_path: Path, model: str, cut: int
) -> None:
    fake.say(WHOLE, chunks=5, cut_after=cut).say(WHOLE, chunks=5)
    llm = _streaming(make_client, fake, tmp_path, model)
    reply = run(lambda: llm.complete(model, USER, temperature=0))
    assert reply.text == WHOLE and reply.finish_reason == "stop"
    assert len(fake.requests) == 2


@pytest.mark.parametrize("model", list(BEFORE_FINISH))
def test_a_stream_that_is_always_cut_fails_its_request_and_never_gives_the_partial_text(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any], tmp_path: Path, model: str
) -> None:
    for _ in range(3):
        fake.say(WHOLE, chunks=5, cut_after=4)
    llm = _streaming(make_client, fake, tmp_path, model, retries=2)
    with pytest.raises(LLMError) as info:
        run(lambda: llm.complete(model, USER, temperature=0))
    message = str(info.value)
    assert "ended before" in message and "after 3 attempts" in message and "server's log" in message
    assert "\n" not in message and not info.value.fatal
    assert len(fake.requests) == 3


@pytest.mark.parametrize("model", list(BEFORE_FINISH))
def test_a_cut_reply_is_not_cached_and_the_whole_one_is(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any], tmp_path: Path, model: str
) -> None:
    fake.say(WHOLE, chunks=5, cut_after=3).say(WHOLE, chunks=5)
    llm = _streaming(make_client, fake, tmp_path, model, cache_path=tmp_path / "cache.db")
    assert run(lambda: llm.complete(model, USER, temperature=0)).text == WHOLE
    again = run(lambda: llm.complete(model, USER, temperature=0))
    assert again.text == WHOLE and again.cached and len(fake.requests) == 2


def test_a_chat_stream_whose_finish_came_before_its_done_line_was_lost_is_whole(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any], tmp_path: Path
) -> None:
    # The finish reason is the marker: a stream cut after it (before "[DONE]") carried the whole reply.
    fake.say(WHOLE, chunks=5, cut_after=BEFORE_FINISH["openai/m"] + 1)
    llm = _streaming(make_client, fake, tmp_path, "openai/m")
    assert run(lambda: llm.complete("openai/m", USER, temperature=0)).text == WHOLE
    assert len(fake.requests) == 1
