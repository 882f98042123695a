"""Anthropic models through the real ``anthropic`` SDK (2.x) against a loopback Messages API server."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fakellm import FakeLLM

from pau_mcp.llm import CapabilityTable, LLMClient, LLMNotConfigured

USER = [{"role": "user", "content": "Say something."}]
TOOLS = [
    {"type": "function", "function": {"name": "fn_abc", "description": "hidden", "parameters": {"type": "object"}}}
]


@pytest.fixture
def claude(fake: FakeLLM, make_client: Callable[..., LLMClient]) -> LLMClient:
    return make_client({"ANTHROPIC_BASE_URL": fake.root_url, "ANTHROPIC_API_KEY": "sk-ant-test"})


def test_a_temperature_asked_of_a_claude_model_does_not_crash_and_is_not_sent(
    fake: FakeLLM, claude: LLMClient, run: Callable[..., Any]
) -> None:
    fake.say("fine")
    reply = run(lambda: claude.complete("anthropic/claude-haiku-4-5", USER, temperature=0, max_tokens=300))
    assert reply.text == "fine"
    body = fake.requests[0]
    assert "temperature" not in body  # API version 2026-10-21 (what the 2.x SDK sends) refuses it on every model
    assert body["max_tokens"] == 300 and fake.paths[0] == "/v1/messages"


def test_the_key_goes_out_as_the_sdk_sends_it_with_its_api_version(
    fake: FakeLLM, claude: LLMClient, run: Callable[..., Any]
) -> None:
    fake.say("ok")
    run(lambda: claude.complete("anthropic/claude-haiku-4-5", USER))
    headers = fake.headers[0]
    assert "sk-ant-test" in headers.get("authorization", "") + headers.get("x-api-key", "")
    assert headers["anthropic-version"]


def test_a_missing_anthropic_key_is_one_line_naming_the_variable_before_any_request(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any]
) -> None:
    llm = make_client({})
    with pytest.raises(LLMNotConfigured, match="ANTHROPIC_API_KEY") as info:
        llm.check("anthropic/claude-haiku-4-5")
    assert "\n" not in str(info.value)
    with pytest.raises(LLMNotConfigured, match="ANTHROPIC_API_KEY"):
        run(lambda: llm.complete("anthropic/claude-haiku-4-5", USER))
    assert fake.requests == []


def test_thinking_blocks_are_kept_apart_from_the_text_and_sent_back_with_tool_calls(
    fake: FakeLLM, claude: LLMClient, run: Callable[..., Any]
) -> None:
    fake.call_tool("fn_abc", {"arg0": 1}, text="Trying 1.", reasoning="INPUT: (999,) is what I would never send")
    fake.say("It doubles.")
    first = run(lambda: claude.complete("anthropic/claude-haiku-4-5", USER, tools=TOOLS, reasoning_effort="high"))
    assert first.text == "Trying 1." and "INPUT" in first.reasoning and "INPUT" not in first.text
    call = first.tool_calls[0]
    follow = [*USER, first.message(), {"role": "tool", "tool_call_id": call.id, "content": "2"}]
    run(lambda: claude.complete("anthropic/claude-haiku-4-5", follow, tools=TOOLS, reasoning_effort="high"))
    blocks = fake.requests[1]["messages"][1]["content"]
    assert blocks[0]["type"] == "thinking" and blocks[0]["signature"].startswith("sig-")
    assert [b["type"] for b in blocks] == ["thinking", "text", "tool_use"]


def test_a_reasoning_effort_turns_on_extended_thinking_with_room_for_the_answer(
    fake: FakeLLM, claude: LLMClient, run: Callable[..., Any]
) -> None:
    fake.say("ok").say("ok")
    run(lambda: claude.complete("anthropic/claude-haiku-4-5", USER, max_tokens=300, reasoning_effort="medium"))
    body = fake.requests[0]
    assert body["thinking"]["type"] == "enabled"
    assert body["thinking"]["budget_tokens"] >= 1024 and body["max_tokens"] == 300 + body["thinking"]["budget_tokens"]
    run(lambda: claude.complete("anthropic/claude-opus-5", USER, max_tokens=300, reasoning_effort="low"))
    body = fake.requests[1]
    assert body["thinking"] == {"type": "adaptive"} and body["output_config"] == {"effort": "low"}


def test_a_gateway_on_an_older_api_version_gets_the_temperature_a_row_of_ones_own_allows(
    tmp_path: Path, fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any]
) -> None:
    mine = tmp_path / "capabilities.json"
    mine.write_text('{"models": [{"match": ["claude-3-5-haiku*"], "temperature": true}]}')
    env = {"ANTHROPIC_BASE_URL": fake.root_url, "ANTHROPIC_API_KEY": "k"}
    llm = make_client(env, capabilities=CapabilityTable.load(mine))
    fake.say("ok")
    run(lambda: llm.complete("anthropic/claude-3-5-haiku-20241022", USER, temperature=0.3))
    assert fake.requests[0]["temperature"] == 0.3
