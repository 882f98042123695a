"""Every reply is bounded in size, depth and time: a server that floods, inflates, nests or drips fails one request.

A server that kept streaming drove `pau-mcp eval` to 2.48 GB in 110 s, and one that dripped a token every 2 s never
ended; a body nested 50,000 deep raised RecursionError out of the client. Each is now one failed request, with a
message that names the setting, and none is retried (the same request would bring the same reply).
"""

from __future__ import annotations

import gzip
import json
import sqlite3
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fakellm import FakeLLM

from pau_mcp.llm import CapabilityTable, LLMClient, LLMError

USER = [{"role": "user", "content": "Say something."}]
MIB = 1 << 20
MODELS = ["openai/m", "anthropic/claude-x", "openai/resp-1"]


def _env(fake: FakeLLM) -> dict[str, str]:
    return {"OPENAI_BASE_URL": fake.base_url, "ANTHROPIC_BASE_URL": fake.root_url}


def _capabilities(tmp_path: Path) -> CapabilityTable:
    table = tmp_path / "capabilities.json"
    table.write_text(json.dumps({"models": [{"match": ["resp-*"], "api": "responses"}]}))
    return CapabilityTable.load(table)


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("model", MODELS)
def test_a_reply_that_never_ends_is_cut_at_the_size_cap_and_not_retried(
    fake: FakeLLM,
    make_client: Callable[..., LLMClient],
    run: Callable[..., Any],
    tmp_path: Path,
    model: str,
    streamed: bool,
) -> None:
    fake.flood()
    llm = make_client(_env(fake), capabilities=_capabilities(tmp_path), max_reply_bytes=MIB)
    llm.provider(model).streaming = streamed
    with pytest.raises(LLMError) as info:
        run(lambda: llm.complete(model, USER, temperature=0), seconds=60)
    message = str(info.value)
    assert "cut at 1 MiB" in message and "--llm-max-reply-mb" in message and "\n" not in message
    assert len(fake.requests) == 1  # the same request would bring the same flood
    # The client stopped reading at the cap: what the server got written is the cap plus what the sockets buffer
    # (a few MiB on loopback), not the flood it would go on sending.
    (sent,) = fake.sent_by(1)
    assert MIB < sent < 12 * MIB


def test_a_compressed_body_that_inflates_past_the_cap_is_cut_without_being_inflated(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any]
) -> None:
    # 200 MiB of zeros, about 200 KB compressed: the client asked for no compression, the server sends it anyway.
    bomb = gzip.compress(b'{"choices": [{"message": {"content": "' + b"0" * (200 * MIB), compresslevel=9)
    fake.answer_bytes(bomb, content_encoding="gzip")
    with pytest.raises(LLMError, match="cut at 1 MiB"):
        run(lambda: make_client(_env(fake), max_reply_bytes=MIB).complete("openai/m", USER, temperature=0))
    assert fake.headers[0]["accept-encoding"] == "identity"


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_a_reply_compressed_although_not_asked_is_read(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any], encoding: str
) -> None:
    body = json.dumps({
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "small"}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }).encode()  # fmt: skip
    fake.answer_bytes(gzip.compress(body) if encoding == "gzip" else zlib.compress(body), content_encoding=encoding)
    assert run(lambda: make_client(_env(fake)).complete("openai/m", USER, temperature=0)).text == "small"


def test_a_reply_in_an_encoding_that_is_not_read_fails_in_one_line(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any]
) -> None:
    fake.answer_bytes(b"\x1b\x00\x00", content_encoding="br")
    with pytest.raises(LLMError, match="'br' encoding.*uncompressed"):
        run(lambda: make_client(_env(fake)).complete("openai/m", USER, temperature=0))
    assert len(fake.requests) == 1


@pytest.mark.parametrize("model", MODELS)
def test_a_reply_that_drips_past_the_deadline_fails_its_request_without_a_retry(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any], tmp_path: Path, model: str
) -> None:
    # A part every 0.2 s never trips the 5 s timeout between parts; 100 parts would take 20 s.
    fake.say("slow " * 100, chunks=100, chunk_s=0.2)
    llm = make_client(_env(fake), capabilities=_capabilities(tmp_path), timeout_s=5, deadline_s=1.0)
    llm.provider(model).streaming = True
    with pytest.raises(LLMError) as info:
        run(lambda: llm.complete(model, USER, temperature=0), seconds=60)
    message = str(info.value)
    assert "did not come whole within 1 s" in message and "--llm-deadline" in message and not info.value.fatal
    assert len(fake.requests) == 1


def test_a_whole_reply_that_drips_past_the_deadline_fails_too(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any]
) -> None:
    fake.say("slow", chunks=100, chunk_s=0.2)  # not streamed: the whole body after 20 s
    llm = make_client(_env(fake), timeout_s=60, deadline_s=1.0)
    with pytest.raises(LLMError, match="within 1 s"):
        run(lambda: llm.complete("openai/m", USER, temperature=0), seconds=60)


def _nested_body(depth: int) -> bytes:
    return (
        b'{"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [{"index": 0, '
        b'"finish_reason": "stop", "message": {"role": "assistant", "content": "hi", "extra": '
        + b"[" * depth
        + b"]" * depth
        + b"}}]}"
    )


@pytest.mark.parametrize("model", ["openai/m", "anthropic/claude-x"])
def test_a_body_nested_fifty_thousand_deep_fails_its_request_instead_of_raising_recursion_error(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any], model: str
) -> None:
    if model.startswith("anthropic"):
        body = b'{"id": "m", "type": "message", "role": "assistant", "model": "c", "content": [{"type": "tool_use", ' \
               b'"id": "t", "name": "f", "input": {"a": ' + b"[" * 50_000 + b"]" * 50_000 + b'}}], ' \
               b'"stop_reason": "tool_use", "usage": {"input_tokens": 1, "output_tokens": 1}}'  # fmt: skip
    else:
        body = _nested_body(50_000)
    fake.answer_bytes(body, times=3)
    with pytest.raises(LLMError, match="nests deeper than it can be read"):
        run(lambda: make_client(_env(fake)).complete(model, USER, temperature=0))
    assert len(fake.requests) == 1


def test_tool_call_arguments_nested_a_megabyte_deep_read_as_no_arguments(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any]
) -> None:
    fake.call_tool("fn", "[" * MIB)
    tools = [{"type": "function", "function": {"name": "fn", "parameters": {"type": "object"}}}]
    (call,) = run(lambda: make_client(_env(fake)).complete("openai/m", USER, tools=tools, temperature=0)).tool_calls
    assert call.parsed_arguments() is None  # one unreadable call for the agent to answer, not a crash


def test_a_cached_reply_that_cannot_be_read_is_dropped_and_asked_again(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any], tmp_path: Path
) -> None:
    cache = tmp_path / "cache.db"
    fake.say("first").say("second")
    assert (
        run(lambda: make_client(_env(fake), cache_path=cache).complete("openai/m", USER, temperature=0)).text == "first"
    )
    with sqlite3.connect(cache) as db:
        db.execute("UPDATE responses SET response = ?", ("[" * 50_000,))
    again = run(lambda: make_client(_env(fake), cache_path=cache).complete("openai/m", USER, temperature=0))
    assert again.text == "second" and not again.cached and len(fake.requests) == 2
    third = run(lambda: make_client(_env(fake), cache_path=cache).complete("openai/m", USER, temperature=0))
    assert third.text == "second" and third.cached


def test_a_cached_entry_of_another_shape_is_dropped_and_asked_again(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any], tmp_path: Path
) -> None:
    cache = tmp_path / "cache.db"
    fake.say("first").say("second")
    run(lambda: make_client(_env(fake), cache_path=cache).complete("openai/m", USER, temperature=0))
    with sqlite3.connect(cache) as db:
        db.execute("UPDATE responses SET response = ?", (json.dumps({"text": "old", "tool_calls": [{"x": 1}]}),))
    again = run(lambda: make_client(_env(fake), cache_path=cache).complete("openai/m", USER, temperature=0))
    assert again.text == "second" and not again.cached
