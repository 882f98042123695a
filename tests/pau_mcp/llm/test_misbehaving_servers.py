"""What a misbehaving model server sends never escapes the client as anything but ``LLMError``, and is retried by the
same rules as a 5xx: bodies that are not JSON, bodies cut short, slow servers, requests the server cannot parse."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fakellm import LLAMA_SERVER_BAD_ARGUMENTS, FakeLLM

from pau_mcp.llm import CapabilityTable, LLMClient, LLMError

USER = [{"role": "user", "content": "Say something."}]
RESPONSES = {"models": [{"match": ["resp-*"], "api": "responses"}]}


@pytest.fixture
def notices() -> Iterator[list[str]]:
    """The client's notices (retries, timeouts), one line each, as the commands print them."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger("pau_mcp.llm")
    handler = Collect(logging.WARNING)
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.WARNING)
    yield lines
    logger.removeHandler(handler)
    logger.setLevel(level)


def _env(fake: FakeLLM) -> dict[str, str]:
    return {"OPENAI_BASE_URL": fake.base_url, "ANTHROPIC_BASE_URL": fake.root_url}


def _capabilities(tmp_path: Path) -> CapabilityTable:
    table = tmp_path / "capabilities.json"
    table.write_text(json.dumps(RESPONSES))
    return CapabilityTable.load(table)


BAD_BODIES: dict[str, dict[str, Any]] = {
    "a gateway's html page": {"data": b"<html><body>502 Bad Gateway</body></html>", "content_type": "text/html"},
    "json cut short": {"data": b'{"id": "chatcmpl-1", "object": "chat.completion", "choi'},
    "a body the connection drops halfway": {"data": json.dumps({"id": "x", "choices": []}).encode() + b" " * 64, "cut": True},
    "an empty body": {"data": b""},
    "bytes that are not utf-8": {"data": b'{"id": "\xff\xfe"}'},
}  # fmt: skip


@pytest.mark.parametrize("model", ["openai/m", "anthropic/claude-x", "openai/resp-1"])
@pytest.mark.parametrize("bad", list(BAD_BODIES))
def test_a_200_that_cannot_be_read_is_retried_and_then_answered(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any], tmp_path: Path, model: str, bad: str
) -> None:
    fake.answer_bytes(**BAD_BODIES[bad]).say("fine")
    llm = make_client(_env(fake), capabilities=_capabilities(tmp_path))
    assert run(lambda: llm.complete(model, USER, temperature=0)).text == "fine"
    assert len(fake.requests) == 2


@pytest.mark.parametrize("model", ["openai/m", "anthropic/claude-x"])
def test_a_server_that_keeps_answering_pages_fails_with_one_line_naming_the_body_and_the_setting(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any], notices: list[str], model: str
) -> None:
    fake.answer_bytes(b"<html>\n<h1>Service temporarily unavailable</h1>\n</html>", content_type="text/html", times=3)
    llm = make_client(_env(fake), retries=2)
    with pytest.raises(LLMError) as info:
        run(lambda: llm.complete(model, USER, temperature=0))
    message = str(info.value)
    assert "\n" not in message and "not JSON" in message and "Service temporarily unavailable" in message
    assert "after 3 attempts" in message and ("OPENAI_BASE_URL" in message or "ANTHROPIC_BASE_URL" in message)
    assert not info.value.fatal  # one episode's (or score's) failure, not a reason to stop a batch
    assert len(fake.requests) == 3
    assert len(notices) == 2 and all("retrying in" in line and "not JSON" in line for line in notices)


def test_a_connection_cut_mid_reply_is_not_reported_as_an_unreachable_server(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any]
) -> None:
    fake.answer_bytes(b'{"choices": [' + b" " * 200 + b"]}", cut=True, times=2)
    with pytest.raises(LLMError) as info:
        run(lambda: make_client(_env(fake), retries=1).complete("openai/m", USER, temperature=0))
    assert "connection broke before the reply was complete" in str(info.value)
    assert "cannot reach" not in str(info.value) and not info.value.fatal


def test_a_body_that_says_the_server_cannot_parse_the_request_is_not_retried(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any]
) -> None:
    said = LLAMA_SERVER_BAD_ARGUMENTS.format(column=7)
    fake.fail(500, message=said, times=3)
    with pytest.raises(LLMError) as info:
        run(lambda: make_client(_env(fake)).complete("openai/m", USER, temperature=0))
    assert len(fake.requests) == 1
    assert "Failed to parse tool call arguments as JSON" in str(info.value)
    assert "every attempt would fail the same way" in str(info.value) and info.value.status == 500


def test_a_conversation_too_long_for_the_model_is_not_retried_and_says_what_helps(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any]
) -> None:
    fake.fail(500, message="the request exceeds the available context size, try increasing it", times=3)
    with pytest.raises(LLMError, match="--max-tokens") as info:
        run(lambda: make_client(_env(fake)).complete("openai/m", USER, temperature=0))
    assert len(fake.requests) == 1 and "--budget" in str(info.value)


def test_a_gateways_500_about_an_upstream_response_and_a_rate_limit_on_tokens_are_still_retried(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any]
) -> None:
    fake.fail(502, message="failed to parse the upstream response")
    fake.fail(429, message="Rate limit reached: too many tokens per minute", retry_after=0).say("recovered")
    assert run(lambda: make_client(_env(fake)).complete("openai/m", USER, temperature=0)).text == "recovered"
    assert len(fake.requests) == 3


def test_tool_call_arguments_sent_as_an_object_are_read_as_json_text(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any]
) -> None:
    # Some llama-server builds put an object where the API says a string.
    fake.answer_raw(
        {
            "id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None,
                         "tool_calls": [{"id": "c1", "type": "function",
                                         "function": {"name": "f", "arguments": {"arg0": 1}}}]}}],
        }
    )  # fmt: skip
    (call,) = run(lambda: make_client(_env(fake)).complete("openai/m", USER, temperature=0)).tool_calls
    assert call.arguments == '{"arg0": 1}' and call.parsed_arguments() == {"arg0": 1}


@pytest.mark.parametrize("model", ["openai/m", "anthropic/claude-x", "openai/resp-1"])
def test_a_slow_but_live_server_is_read_as_a_stream_after_one_timeout(
    fake: FakeLLM,
    make_client: Callable[..., LLMClient],
    run: Callable[..., Any],
    notices: list[str],
    tmp_path: Path,
    model: str,
) -> None:
    text = "a reply written slowly, a few words at a time"
    # Each reply takes 1.2 s in all, longer than the 0.5 s timeout, but a part comes every 0.15 s.
    fake.say(text, chunks=8, chunk_s=0.15, reasoning="thinking it over", input_tokens=30, output_tokens=12)
    fake.say(text, chunks=8, chunk_s=0.15, reasoning="thinking it over", input_tokens=30, output_tokens=12)
    fake.call_tool("fn", {"arg0": 5}, input_tokens=31, output_tokens=9)
    llm = make_client(_env(fake), timeout_s=0.5, capabilities=_capabilities(tmp_path))
    first = run(lambda: llm.complete(model, USER, temperature=0))
    assert first.text == text and first.reasoning == "thinking it over"
    assert (first.usage.input_tokens, first.usage.output_tokens) == (30, 12)
    tools = [{"type": "function", "function": {"name": "fn", "parameters": {"type": "object"}}}]
    second = run(lambda: llm.complete(model, USER, tools=tools, temperature=0))
    assert [(c.name, c.parsed_arguments()) for c in second.tool_calls] == [("fn", {"arg0": 5})]
    assert [bool(body.get("stream")) for body in fake.requests] == [False, True, True]
    (notice,) = notices
    assert "no response within 0.5 s" in notice and "--llm-timeout" in notice and "stream" in notice


def test_a_stream_that_goes_quiet_for_longer_than_the_timeout_fails_as_a_timeout(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any], notices: list[str]
) -> None:
    # Silences of 100 s: a client that waited one out instead of timing out would outlast the minute given (a timeout
    # of the test, not the LLMError), however slow or fast the machine is.
    for _ in range(3):
        fake.say("one part, then a long silence", chunks=2, chunk_s=100)
    llm = make_client(_env(fake), timeout_s=0.4, retries=2)
    with pytest.raises(LLMError, match="no response within 0.4 s, 3 times.*--llm-timeout"):
        run(lambda: llm.complete("openai/m", USER, temperature=0), seconds=60)
    assert len(notices) == 2 and "stream" in notices[0] and "no further part" in notices[1]


def test_retries_are_announced_one_line_each_with_the_attempt_and_the_wait(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any], notices: list[str]
) -> None:
    fake.fail(503, message="loading model", times=2).say("ready")
    assert run(lambda: make_client(_env(fake), retries=3).complete("openai/m", USER, temperature=0)).text == "ready"
    assert len(notices) == 2
    assert all(line.startswith("openai/m: 503: loading model; retrying in ") for line in notices)
    assert "(attempt 2 of 4)" in notices[0] and "(attempt 3 of 4)" in notices[1]
