"""Reasoning models: each gets the request settings its API accepts, and its thinking never reaches the text."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fakellm import FakeLLM

from pau_mcp.llm import DEFAULT_CAPABILITIES, CapabilityTable, LLMClient, LLMNotConfigured

USER = [{"role": "user", "content": "Say something."}]


@pytest.fixture
def llm(fake: FakeLLM, make_client: Callable[..., LLMClient]) -> LLMClient:
    return make_client({"OPENAI_BASE_URL": fake.base_url})


@pytest.mark.parametrize("model", ["o3", "o4-mini", "gpt-5", "gpt-5-mini-2025-08-07", "o1"])
def test_o_series_and_gpt5_get_max_completion_tokens_with_room_to_think_and_no_temperature(
    fake: FakeLLM, llm: LLMClient, run: Callable[..., Any], model: str
) -> None:
    fake.say("ok")
    run(lambda: llm.complete(f"openai/{model}", USER, temperature=0, max_tokens=300))
    body = fake.requests[0]
    assert "temperature" not in body and "max_tokens" not in body
    assert body["max_completion_tokens"] > 300 + 1000  # the limit covers the hidden reasoning too


def test_a_chat_model_keeps_temperature_and_max_tokens_as_asked(
    fake: FakeLLM, llm: LLMClient, run: Callable[..., Any]
) -> None:
    fake.say("ok")
    run(lambda: llm.complete("openai/gpt-4o-mini", USER, temperature=0, max_tokens=300))
    body = fake.requests[0]
    assert body["temperature"] == 0 and body["max_tokens"] == 300 and "max_completion_tokens" not in body


def test_a_reasoning_effort_is_sent_to_reasoning_models_and_part_of_the_cache_key(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any], tmp_path: Path
) -> None:
    llm = make_client({"OPENAI_BASE_URL": fake.base_url}, cache_path=tmp_path / "cache.db")
    fake.responder = lambda body: "ok"
    run(lambda: llm.complete("openai/o4-mini", USER, reasoning_effort="low"))
    run(lambda: llm.complete("openai/o4-mini", USER, reasoning_effort="high"))
    run(lambda: llm.complete("openai/o4-mini", USER, reasoning_effort="high"))
    assert [body["reasoning_effort"] for body in fake.requests] == ["low", "high"]


def test_an_unknown_reasoning_effort_is_refused_naming_the_choices(llm: LLMClient, run: Callable[..., Any]) -> None:
    with pytest.raises(LLMNotConfigured, match="reasoning effort 'extreme'.*low.*high"):
        run(lambda: llm.complete("openai/o3", USER, reasoning_effort="extreme"))


def test_qwen3_thinking_is_switched_with_the_chat_template_flag_vllm_and_sglang_read(
    fake: FakeLLM, llm: LLMClient, run: Callable[..., Any]
) -> None:
    fake.say("a").say("b").say("c")
    run(lambda: llm.complete("openai/Qwen/Qwen3-8B", USER, reasoning_effort="none", max_tokens=300))
    run(lambda: llm.complete("openai/Qwen/Qwen3-8B", USER, reasoning_effort="high", max_tokens=300))
    run(lambda: llm.complete("openai/Qwen/Qwen3-8B", USER, max_tokens=300))
    off, on, default = fake.requests
    assert off["chat_template_kwargs"] == {"enable_thinking": False} and off["max_tokens"] == 300
    assert on["chat_template_kwargs"] == {"enable_thinking": True} and on["max_tokens"] > 300
    assert "chat_template_kwargs" not in default and default["max_tokens"] > 300  # thinks by default: room for it


def test_a_prompt_switch_tags_the_last_user_message_for_servers_without_template_flags(
    tmp_path: Path, fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any]
) -> None:
    mine = tmp_path / "capabilities.json"
    mine.write_text(json.dumps({"models": [{"match": ["qwen3*"], "thinking_switch": "prompt"}]}))
    llm = make_client({"OPENAI_BASE_URL": fake.base_url}, capabilities=CapabilityTable.load(mine))
    fake.say("a").say("b")
    run(lambda: llm.complete("openai/qwen3:8b", USER, reasoning_effort="none"))
    run(lambda: llm.complete("openai/qwen3:8b", USER, reasoning_effort="medium"))
    assert [body["messages"][-1]["content"] for body in fake.requests] == [
        "Say something. /no_think",
        "Say something. /think",
    ]
    assert all("chat_template_kwargs" not in body and "reasoning_effort" not in body for body in fake.requests)
    assert USER == [{"role": "user", "content": "Say something."}]  # the caller's messages are left as they were


def test_think_blocks_and_reasoning_fields_are_kept_out_of_the_text(
    fake: FakeLLM, llm: LLMClient, run: Callable[..., Any]
) -> None:
    fake.say("<think>Maybe INPUT: (666,)?\nNo.</think>\nINPUT: (1,)")
    fake.say("INPUT: (2,)", reasoning="INPUT: (777,) would be silly")
    fake.say("Still thinking: INPUT: (5,)</think>INPUT: (3,)")  # the template opened the block in the prompt
    fake.say("<think>cut off by the limit, INPUT: (8,)", finish="length")
    replies = [run(lambda: llm.complete("openai/deepseek-r1", USER)) for _ in range(4)]
    assert [r.text.strip() for r in replies] == ["INPUT: (1,)", "INPUT: (2,)", "INPUT: (3,)", ""]
    assert "666" in replies[0].reasoning and "777" in replies[1].reasoning and "5" in replies[2].reasoning
    assert "8" in replies[3].reasoning and replies[3].finish_reason == "length"


def test_the_thinking_is_not_sent_back_in_the_next_turn(fake: FakeLLM, llm: LLMClient, run: Callable[..., Any]) -> None:
    fake.say("answer", reasoning="private chain of thought").say("next")
    first = run(lambda: llm.complete("openai/deepseek-r1", USER))
    run(lambda: llm.complete("openai/deepseek-r1", [*USER, first.message(), {"role": "user", "content": "more"}]))
    assert fake.requests[1]["messages"][1] == {"role": "assistant", "content": "answer"}


def test_a_table_of_ones_own_adds_models_and_overrides_fields_of_the_packaged_one(
    tmp_path: Path, fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any]
) -> None:
    mine = tmp_path / "capabilities.json"
    mine.write_text(json.dumps({"models": [{"match": ["my-reasoner*"], "reasoning": True, "temperature": False}]}))
    table = CapabilityTable.load(mine)
    assert table.lookup("openai/my-reasoner-v2").reasoning and not table.lookup("openai/my-reasoner-v2").temperature
    assert table.lookup("openai/o3").token_limit == "max_completion_tokens"  # the packaged rows still apply
    llm = make_client({"OPENAI_BASE_URL": fake.base_url}, capabilities=table)
    fake.say("ok")
    run(lambda: llm.complete("openai/my-reasoner-v2", USER, temperature=0.5, max_tokens=100))
    assert "temperature" not in fake.requests[0] and fake.requests[0]["max_tokens"] > 100


def test_a_broken_capability_table_names_the_file_and_field(tmp_path: Path) -> None:
    broken = tmp_path / "caps.json"
    broken.write_text(json.dumps({"models": [{"match": ["x*"], "token_limit": "max_words"}]}))
    with pytest.raises(LLMNotConfigured, match="caps.json.*token_limit"):
        CapabilityTable.load(broken)
    assert CapabilityTable.load(DEFAULT_CAPABILITIES).lookup("anthropic/claude-haiku-4-5").temperature is False


@pytest.mark.parametrize(
    ("model", "field", "with_room"),
    [("openai/gpt-5.4-mini", "max_completion_tokens", 16_300), ("openai/Qwen/Qwen3-8B", "max_tokens", 8_492)],
)
def test_a_limit_without_thinking_room_is_the_whole_replys_as_the_reference_sends_it(
    fake: FakeLLM, llm: LLMClient, run: Callable[..., Any], model: str, field: str, with_room: int
) -> None:
    fake.responder = lambda body: "ok"
    run(lambda: llm.complete(model, USER, max_tokens=300))
    run(lambda: llm.complete(model, USER, max_tokens=300, thinking_room=False))
    room, whole = fake.requests
    assert room[field] == with_room  # this project's: the 300 visible tokens, and room to think on top
    assert whole[field] == 300


def test_claude_thinking_adaptively_gets_the_whole_replys_limit_without_room(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any]
) -> None:
    claude = make_client({"ANTHROPIC_BASE_URL": fake.base_url, "ANTHROPIC_API_KEY": "k"})
    fake.responder = lambda body: "ok"
    run(lambda: claude.complete("anthropic/claude-opus-5", USER, max_tokens=300))
    run(lambda: claude.complete("anthropic/claude-opus-5", USER, max_tokens=300, thinking_room=False))
    assert [body["max_tokens"] for body in fake.requests] == [300 + 8192, 300]


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_the_answer_as_written_and_the_reasoning_field_are_kept_beside_the_text(
    fake: FakeLLM, llm: LLMClient, run: Callable[..., Any], streamed: bool
) -> None:
    llm.provider("openai/qwen3-8b").streaming = streamed
    fake.say("<think>try INPUT: (9,)</think>\nINPUT: (1,)")
    fake.say("INPUT: (2,)", reasoning="maybe INPUT: (7,)", reasoning_as="reasoning")
    fake.say("INPUT: (3,)", reasoning="maybe INPUT: (6,)")  # reasoning_content: not the reasoning field
    thought, field, content = (run(lambda: llm.complete("openai/qwen3-8b", USER)) for _ in range(3))
    assert (thought.text, thought.written) == ("INPUT: (1,)", "<think>try INPUT: (9,)</think>\nINPUT: (1,)")
    assert thought.reasoning_field is None
    assert (field.text, field.written, field.reasoning_field) == ("INPUT: (2,)", "INPUT: (2,)", "maybe INPUT: (7,)")
    assert content.reasoning_field is None and "6" in content.reasoning and content.written == "INPUT: (3,)"


def test_a_cached_reply_keeps_what_was_written_and_its_reasoning_field(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any], tmp_path: Path
) -> None:
    llm = make_client({"OPENAI_BASE_URL": fake.base_url}, cache_path=tmp_path / "cache.db")
    fake.say("<think>hm</think>INPUT: (1,)", reasoning="first", reasoning_as="reasoning")
    asked = run(lambda: llm.complete("openai/qwen3-8b", USER, temperature=0))
    again = run(lambda: llm.complete("openai/qwen3-8b", USER, temperature=0))
    assert again.cached and len(fake.requests) == 1
    assert (asked.written, asked.reasoning_field) == ("<think>hm</think>INPUT: (1,)", "first")
    assert (again.written, again.reasoning_field) == (asked.written, asked.reasoning_field)
