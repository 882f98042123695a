"""``LLMClient`` through the real SDKs against a loopback server: costs, retries, errors, the cache, limits."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fakellm import FakeLLM, Reply

from pau_mcp.llm import DEFAULT_PRICING, LLMClient, LLMError, LLMNotConfigured, Price, Pricing, Usage, parse_model

USER = [{"role": "user", "content": "Say something."}]


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


_MADE: list[LLMClient] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    """Close every client a test made, as the commands do, so none is left for the garbage collector."""
    yield
    while _MADE:
        anyio.run(_MADE.pop().aclose)


def client(fake: FakeLLM, **options: Any) -> LLMClient:
    options.setdefault("backoff_s", 0.01)
    made = LLMClient(env={"OPENAI_BASE_URL": fake.base_url, **options.pop("env", {})}, **options)
    _MADE.append(made)
    return made


def run(step: Callable[[], Any], seconds: float = 60) -> Any:
    async def bounded() -> Any:
        with anyio.fail_after(seconds):
            return await step()

    return anyio.run(bounded)


def test_a_reply_carries_text_tokens_and_the_cost_from_a_pricing_file(fake: FakeLLM, tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"models": {"openai/fake-model": {"input": 2.0, "output": 10.0}}}))
    llm = client(fake, pricing=Pricing.load(prices))
    fake.say("hello", input_tokens=1000, output_tokens=500)
    reply = run(lambda: llm.complete("openai/fake-model", USER))
    assert reply.text == "hello" and reply.usage == Usage(1000, 500)
    assert reply.cost_usd == pytest.approx((1000 * 2.0 + 500 * 10.0) / 1e6)
    assert reply.priced and not reply.cached and reply.finish_reason == "stop"
    assert llm.spend.calls == 1 and llm.spend.cost_usd == pytest.approx(0.007) and llm.spend.usage == Usage(1000, 500)
    assert fake.requests[0]["model"] == "fake-model" and fake.requests[0]["messages"] == USER


def test_a_model_missing_from_the_price_table_costs_nothing_and_is_reported_unpriced(fake: FakeLLM) -> None:
    llm = client(fake)
    fake.say("hi", input_tokens=10_000, output_tokens=10_000)
    reply = run(lambda: llm.complete("openai/nobody-prices-this", USER))
    assert reply.cost_usd == 0.0 and not reply.priced
    assert llm.spend.unpriced == {"openai/nobody-prices-this"}


def test_a_dated_model_is_priced_like_its_entry_and_a_different_model_is_not() -> None:
    pricing = Pricing(
        {"openai/gpt-4o-mini": Price(input=0.15, output=0.6), "openai/gpt-4o": Price(input=2.5, output=10)}
    )
    assert pricing.price("openai/gpt-4o-mini-2024-07-18") == Price(input=0.15, output=0.6)
    assert pricing.price("anthropic/x-20250101") is None
    assert pricing.price("openai/gpt-4o-mini-high") is None  # not a date suffix: not silently priced as gpt-4o-mini
    assert pricing.cost("openai/gpt-4o", Usage(1_000_000, 0)) == pytest.approx(2.5)


def test_the_packaged_price_table_loads_and_a_broken_one_names_the_file(tmp_path: Path) -> None:
    assert Pricing.load(DEFAULT_PRICING).price("openai/gpt-4o-mini") is not None
    broken = tmp_path / "broken.json"
    broken.write_text('{"models": {"openai/x": {"input": -1, "output": 2}}}')
    with pytest.raises(LLMNotConfigured, match="broken.json.*models.openai/x.input"):
        Pricing.load(broken)


def test_429_and_5xx_replies_are_retried_until_one_succeeds(fake: FakeLLM) -> None:
    llm = client(fake)
    fake.fail(429, retry_after=0).fail(500).fail(503).say("finally")
    reply = run(lambda: llm.complete("openai/m", USER))
    assert reply.text == "finally"
    assert len(fake.requests) == 4


def test_a_retry_after_header_is_honoured(fake: FakeLLM) -> None:
    llm = client(fake, backoff_s=0.001)
    fake.fail(429, retry_after=1).say("ok")
    started = time.perf_counter()
    assert run(lambda: llm.complete("openai/m", USER)).text == "ok"
    assert time.perf_counter() - started >= 0.9
    assert len(fake.requests) == 2


def test_retries_end_with_an_error_carrying_the_providers_message(fake: FakeLLM) -> None:
    llm = client(fake, retries=2)
    fake.fail(500, times=3, message="the model is overloaded")
    with pytest.raises(LLMError) as info:
        run(lambda: llm.complete("openai/m", USER))
    assert "the model is overloaded" in str(info.value) and "500" in str(info.value) and "3 attempts" in str(info.value)
    assert info.value.status == 500 and not info.value.fatal
    assert len(fake.requests) == 3


@pytest.mark.parametrize(
    "payload",
    [{"choices": []}, {"error": "nope"}, [1, 2], {"choices": [{"message": {"tool_calls": [{"function": {}}]}}]}],
)
def test_a_reply_that_is_not_a_chat_completion_is_an_error_naming_the_base_url_to_check(
    fake: FakeLLM, payload: object
) -> None:
    fake.answer_raw(payload)
    with pytest.raises(LLMError) as info:
        run(lambda: client(fake).complete("openai/m", USER))
    assert "not a chat completion" in str(info.value) and "base URL" in str(info.value)


def test_a_401_raises_at_once_with_the_providers_message_and_the_key_to_check(fake: FakeLLM) -> None:
    llm = client(fake)
    fake.fail(401, message="Incorrect API key provided: sk-...")
    with pytest.raises(LLMError) as info:
        run(lambda: llm.complete("openai/m", USER))
    assert "Incorrect API key provided" in str(info.value) and "OPENAI_API_KEY" in str(info.value)
    assert info.value.status == 401 and info.value.fatal
    assert len(fake.requests) == 1


@pytest.mark.parametrize("status", [400, 403, 404])
def test_other_permanent_errors_are_not_retried(fake: FakeLLM, status: int) -> None:
    llm = client(fake)
    fake.fail(status, message=f"refused with {status}")
    with pytest.raises(LLMError, match=f"refused with {status}") as info:
        run(lambda: llm.complete("openai/m", USER))
    assert info.value.status == status and info.value.fatal == (status != 400)
    assert len(fake.requests) == 1


def test_an_error_page_that_is_not_json_is_reported_with_its_text(fake: FakeLLM) -> None:
    fake.fail(400, text="upstream refused: body too large")
    with pytest.raises(LLMError, match="400: upstream refused: body too large") as info:
        run(lambda: client(fake).complete("openai/m", USER))
    assert info.value.status == 400 and len(fake.requests) == 1


def test_text_that_is_not_valid_unicode_still_reaches_the_server_and_is_cached(fake: FakeLLM, tmp_path: Path) -> None:
    fake.say("seen")
    odd = [{"role": "user", "content": "caf\u00e9 \ud800 \U0001f600"}]
    llm = client(fake, cache_path=tmp_path / "cache.db")
    assert run(lambda: llm.complete("openai/m", odd, temperature=0)).text == "seen"
    assert fake.requests[0]["messages"] == [{"role": "user", "content": "caf\u00e9 \ufffd \U0001f600"}]
    assert run(lambda: llm.complete("openai/m", odd, temperature=0)).cached and len(fake.requests) == 1


def test_organization_and_project_variables_are_sent_as_headers_and_the_client_names_itself(fake: FakeLLM) -> None:
    fake.say("ok")
    run(lambda: client(fake, env={"OPENAI_ORG_ID": "org-7", "OPENAI_PROJECT_ID": "proj-9"}).complete("openai/m", USER))
    assert fake.headers[0]["openai-organization"] == "org-7" and fake.headers[0]["openai-project"] == "proj-9"
    assert fake.headers[0]["user-agent"].startswith("pau-mcp/")


def test_requests_go_through_the_proxy_the_environment_names_unless_no_proxy_lists_the_host(
    fake: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "no_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", fake.root_url)  # the fake answers as the proxy would, relaying to the model
    behind = {"OPENAI_BASE_URL": "http://llm.invalid/v1"}
    fake.say("through the proxy")
    proxied = LLMClient(env=behind)
    _MADE.append(proxied)
    assert run(lambda: proxied.complete("openai/m", USER)).text == "through the proxy"
    assert fake.paths == ["http://llm.invalid/v1/chat/completions"]
    monkeypatch.setenv("no_proxy", "llm.invalid")
    llm = LLMClient(env=behind, retries=0)
    _MADE.append(llm)
    with pytest.raises(LLMError, match="cannot reach http://llm.invalid/v1"):
        run(lambda: llm.complete("openai/m", USER))
    assert len(fake.requests) == 1


def test_an_identical_second_call_is_answered_from_the_cache_without_a_request(fake: FakeLLM, tmp_path: Path) -> None:
    cache = tmp_path / "llm-cache.db"
    llm = client(fake, cache_path=cache, pricing=Pricing({"openai/m": Price(input=1, output=1)}))
    fake.say("first", input_tokens=100, output_tokens=50)
    first = run(lambda: llm.complete("openai/m", USER, temperature=0))
    second = run(lambda: llm.complete("openai/m", USER, temperature=0))
    assert len(fake.requests) == 1
    assert (first.cached, second.cached) == (False, True)
    assert second.text == "first" and second.usage == first.usage and second.cost_usd == 0.0
    assert llm.spend.calls == 2 and llm.spend.cached_calls == 1 and llm.spend.usage == Usage(100, 50)
    # Another client on the same file (another process, say) hits it too.
    assert run(lambda: client(fake, cache_path=cache).complete("openai/m", USER, temperature=0)).cached
    assert len(fake.requests) == 1


def test_a_call_differing_in_any_parameter_or_bypassing_the_cache_asks_again(fake: FakeLLM, tmp_path: Path) -> None:
    llm = client(fake, cache_path=tmp_path / "c.db")
    fake.responder = lambda body: "fresh"
    run(lambda: llm.complete("openai/m", USER, temperature=0))
    run(lambda: llm.complete("openai/m", USER, temperature=0.5))
    run(lambda: llm.complete("openai/other", USER, temperature=0))
    run(lambda: llm.complete("openai/m", USER, temperature=0, tools=[{"type": "function", "function": {"name": "f"}}]))
    run(lambda: llm.complete("openai/m", USER, temperature=0, cache=False))
    assert len(fake.requests) == 5
    no_cache = client(fake, cache_path=None)
    run(lambda: no_cache.complete("openai/m", USER, temperature=0))
    assert len(fake.requests) == 6


def test_identical_requests_in_flight_at_once_make_one_call(fake: FakeLLM, tmp_path: Path) -> None:
    llm = client(fake, cache_path=tmp_path / "c.db")
    fake.responder = lambda body: Reply(text="slow", delay_s=0.3)
    texts: list[str] = []

    async def both() -> None:
        async def one() -> None:
            texts.append((await llm.complete("openai/m", USER, temperature=0)).text)

        async with anyio.create_task_group() as group:
            group.start_soon(one)
            group.start_soon(one)

    run(both)
    assert texts == ["slow", "slow"] and len(fake.requests) == 1


def test_requests_in_flight_never_exceed_the_concurrency_limit(fake: FakeLLM) -> None:
    llm = client(fake, concurrency=2)
    fake.responder = lambda body: Reply(text="ok", delay_s=0.2)

    async def many() -> None:
        async with anyio.create_task_group() as group:
            for n in range(6):
                group.start_soon(llm.complete, "openai/m", [{"role": "user", "content": f"question {n}"}])

    run(many)
    assert len(fake.requests) == 6 and fake.max_in_flight == 2


def test_tools_are_sent_and_tool_calls_come_back_ready_for_the_next_turn(fake: FakeLLM) -> None:
    llm = client(fake)
    tools = [
        {
            "type": "function",
            "function": {
                "name": "fn_abc",
                "description": "a hidden function",
                "parameters": {"type": "object", "properties": {"arg0": {}}},
            },
        }
    ]
    fake.call_tool("fn_abc", {"arg0": 3}).say("It doubles its input.")
    first = run(lambda: llm.complete("openai/m", USER, tools=tools, tool_choice="auto"))
    assert first.finish_reason == "tool_calls" and first.text == ""
    (call,) = first.tool_calls
    assert call.name == "fn_abc" and call.parsed_arguments() == {"arg0": 3}
    assert fake.requests[0]["tools"] == tools and fake.requests[0]["tool_choice"] == "auto"
    conversation = [*USER, first.message(), {"role": "tool", "tool_call_id": call.id, "content": "6"}]
    second = run(lambda: llm.complete("openai/m", conversation, tools=tools))
    assert second.text == "It doubles its input."
    sent = fake.requests[1]["messages"]
    assert sent[1]["tool_calls"][0]["id"] == call.id and sent[2] == {
        "role": "tool",
        "tool_call_id": call.id,
        "content": "6",
    }


def test_tool_arguments_that_are_not_json_are_kept_verbatim(fake: FakeLLM) -> None:
    fake.call_tool("fn_abc", "{not json")
    reply = run(
        lambda: client(fake).complete("openai/m", USER, tools=[{"type": "function", "function": {"name": "fn_abc"}}])
    )
    assert reply.tool_calls[0].arguments == "{not json" and reply.tool_calls[0].parsed_arguments() is None


def test_a_custom_base_url_without_a_key_sends_a_placeholder_and_a_set_key_is_used(fake: FakeLLM) -> None:
    fake.say("a").say("b")
    run(lambda: client(fake).complete("openai/m", USER))
    run(lambda: client(fake, env={"OPENAI_API_KEY": "sk-test-123"}).complete("openai/m", USER))
    assert fake.headers[0]["authorization"] == "Bearer pau-mcp-no-key"
    assert fake.headers[1]["authorization"] == "Bearer sk-test-123"


def test_the_official_endpoint_without_a_key_says_which_variables_to_set() -> None:
    llm = LLMClient(env={})
    with pytest.raises(LLMNotConfigured, match="OPENAI_API_KEY.*OPENAI_BASE_URL"):
        run(lambda: llm.complete("openai/gpt-4o-mini", USER))


@pytest.mark.parametrize("model", ["gpt-4o-mini", "mistral/large", "openai/", "", None])
def test_a_model_string_without_a_known_provider_is_refused_with_the_expected_form(model: str | None) -> None:
    with pytest.raises(LLMNotConfigured, match="provider/model"):
        parse_model(model)


def test_openai_compatible_model_names_may_hold_slashes() -> None:
    assert parse_model("openai/meta-llama/Llama-3.1-8B-Instruct") == ("openai", "meta-llama/Llama-3.1-8B-Instruct")


def test_an_unreachable_server_is_retried_then_reported_as_fatal_with_the_base_url() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    llm = LLMClient(env={"OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1"}, retries=1, backoff_s=0.01)
    with pytest.raises(LLMError) as info:
        run(lambda: llm.complete("openai/m", USER))
    assert info.value.fatal and f"127.0.0.1:{port}" in str(info.value) and "OPENAI_BASE_URL" in str(info.value)


def test_anthropic_models_go_through_the_messages_api_with_system_tools_and_tool_results(fake: FakeLLM) -> None:
    llm = LLMClient(env={"ANTHROPIC_BASE_URL": fake.root_url}, backoff_s=0.01)
    tools = [
        {"type": "function", "function": {"name": "fn_abc", "description": "hidden", "parameters": {"type": "object"}}}
    ]
    fake.call_tool("fn_abc", {"arg0": 1}, text="Let me try.").say("It returns 2.")
    messages = [{"role": "system", "content": "Be brief."}, *USER]
    first = run(lambda: llm.complete("anthropic/claude-test", messages, tools=tools, tool_choice="required"))
    assert first.text == "Let me try." and first.tool_calls[0].parsed_arguments() == {"arg0": 1}
    body = fake.requests[0]
    assert fake.paths[0] == "/v1/messages" and body["model"] == "claude-test" and body["system"] == "Be brief."
    assert body["tools"] == [{"name": "fn_abc", "description": "hidden", "input_schema": {"type": "object"}}]
    assert body["tool_choice"] == {"type": "any"} and body["max_tokens"] > 0
    call = first.tool_calls[0]
    follow = [*messages, first.message(), {"role": "tool", "tool_call_id": call.id, "content": "2"}]
    assert run(lambda: llm.complete("anthropic/claude-test", follow, tools=tools)).text == "It returns 2."
    sent = fake.requests[1]["messages"]
    assert sent[1]["content"][1] == {"type": "tool_use", "id": call.id, "name": "fn_abc", "input": {"arg0": 1}}
    assert sent[2] == {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "2"}]}


def test_anthropic_errors_carry_the_providers_message(fake: FakeLLM) -> None:
    llm = LLMClient(env={"ANTHROPIC_BASE_URL": fake.root_url}, backoff_s=0.01)
    fake.fail(529, message="Overloaded").fail(401, message="invalid x-api-key")
    with pytest.raises(LLMError, match="invalid x-api-key.*ANTHROPIC_API_KEY") as info:
        run(lambda: llm.complete("anthropic/claude-test", USER))
    assert info.value.fatal and len(fake.requests) == 2


def test_one_client_serves_successive_event_loops(fake: FakeLLM, tmp_path: Path) -> None:
    llm = client(fake)
    fake.say("one").say("two")
    assert run(lambda: llm.complete("openai/m", USER)).text == "one"
    assert run(lambda: llm.complete("openai/m", USER)).text == "two"


def test_a_reply_slower_than_the_timeout_is_retried_then_reported_with_the_setting_to_raise(fake: FakeLLM) -> None:
    llm = client(fake, timeout_s=0.3, retries=1)
    fake.responder = lambda body: Reply(text="too late", delay_s=1.0)
    with pytest.raises(LLMError, match="no response within 0.3 s, 2 times.*--llm-timeout") as info:
        run(lambda: llm.complete("openai/m", USER))
    assert not info.value.fatal and len(fake.requests) == 2
