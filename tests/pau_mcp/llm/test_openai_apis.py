"""The official openai SDK as transport: chat completions, the Responses API and Azure OpenAI, over loopback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fakellm import FakeLLM

from pau_mcp.llm import CapabilityTable, LLMClient, LLMNotConfigured, Price, Pricing, Usage

USER = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say something."}]
TOOLS = [
    {"type": "function", "function": {"name": "fn_abc", "description": "hidden", "parameters": {"type": "object"}}}
]


def test_models_the_table_routes_to_the_responses_api_get_replies_tokens_and_costs_from_it(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any]
) -> None:
    pricing = Pricing({"openai/o3-pro": Price(input=20, output=80)})
    llm = make_client({"OPENAI_BASE_URL": fake.base_url}, pricing=pricing)
    fake.say("It adds one.", input_tokens=1000, output_tokens=500, reasoning="thought about it")
    reply = run(lambda: llm.complete("openai/o3-pro", USER, max_tokens=300, reasoning_effort="high"))
    assert fake.paths[0] == "/v1/responses"
    body = fake.requests[0]
    assert body["instructions"] == "Be brief." and body["input"] == [{"role": "user", "content": "Say something."}]
    assert body["reasoning"] == {"effort": "high"} and body["max_output_tokens"] > 300 and body["store"] is False
    assert reply.text == "It adds one." and reply.reasoning == "thought about it"
    assert reply.usage == Usage(1000, 500) and reply.cost_usd == pytest.approx((1000 * 20 + 500 * 80) / 1e6)


def test_the_responses_api_carries_tool_calls_and_their_results_across_turns(
    tmp_path: Path, fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any]
) -> None:
    table = tmp_path / "caps.json"
    table.write_text(json.dumps({"models": [{"match": ["gpt-4.1*"], "api": "responses"}]}))
    llm = make_client({"OPENAI_BASE_URL": fake.base_url}, capabilities=CapabilityTable.load(table))
    fake.call_tool("fn_abc", {"arg0": 3}).say("Doubles.")
    first = run(lambda: llm.complete("openai/gpt-4.1-mini", USER, tools=TOOLS, tool_choice="required"))
    (call,) = first.tool_calls
    assert call.name == "fn_abc" and call.parsed_arguments() == {"arg0": 3} and first.finish_reason == "tool_calls"
    sent = fake.requests[0]
    assert sent["tools"] == [
        {
            "type": "function",
            "name": "fn_abc",
            "description": "hidden",
            "parameters": {"type": "object"},
            "strict": False,
        }
    ]  # not strict: MCP tools' schemas are not written for strict mode
    assert sent["tool_choice"] == "required"
    follow = [*USER, first.message(), {"role": "tool", "tool_call_id": call.id, "content": "6"}]
    assert run(lambda: llm.complete("openai/gpt-4.1-mini", follow, tools=TOOLS)).text == "Doubles."
    items = fake.requests[1]["input"]
    assert items[1] == {"type": "function_call", "call_id": call.id, "name": "fn_abc", "arguments": '{"arg0": 3}'}
    assert items[2] == {"type": "function_call_output", "call_id": call.id, "output": "6"}


def test_azure_deployments_go_to_the_deployment_route_with_the_api_version_and_key(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any]
) -> None:
    env = {"AZURE_OPENAI_ENDPOINT": fake.root_url, "AZURE_OPENAI_API_KEY": "az-key", "OPENAI_API_VERSION": "2024-10-21"}
    llm = make_client(env)
    fake.say("from azure")
    reply = run(lambda: llm.complete("azure/my-gpt4o", USER, temperature=0, max_tokens=50))
    assert reply.text == "from azure"
    assert fake.paths[0] == "/openai/deployments/my-gpt4o/chat/completions?api-version=2024-10-21"
    assert fake.headers[0]["api-key"] == "az-key" and fake.requests[0]["temperature"] == 0


@pytest.mark.parametrize(
    ("missing", "variable"),
    [("AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_ENDPOINT"), ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_API_KEY"),
     ("OPENAI_API_VERSION", "OPENAI_API_VERSION")],
)  # fmt: skip
def test_an_azure_setting_missing_is_named(make_client: Callable[..., LLMClient], missing: str, variable: str) -> None:
    env = {"AZURE_OPENAI_ENDPOINT": "http://127.0.0.1:9", "AZURE_OPENAI_API_KEY": "k", "OPENAI_API_VERSION": "v"}
    del env[missing]
    with pytest.raises(LLMNotConfigured, match=variable):
        make_client(env).check("azure/deployment")


def test_a_responses_reply_cut_off_by_its_limit_says_length(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any]
) -> None:
    llm = make_client({"OPENAI_BASE_URL": fake.base_url})
    fake.say("It adds", finish="length")
    reply = run(lambda: llm.complete("openai/o3-pro", USER, max_tokens=5))
    assert reply.text == "It adds" and reply.finish_reason == "length"
