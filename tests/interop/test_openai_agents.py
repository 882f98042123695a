"""The OpenAI Agents SDK (`openai-agents`) against a real `pau-mcp serve`, with strict schemas, over stdio and over
HTTP with the main token (a label in the URL) and with a session token: list, call in both argument forms, run into
the budget, submit. It speaks the 2026-07-28 revision (it sends ``server/discover`` first)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from fakellm import FakeLLM
from interop_support import (
    ROOT,
    TOOL,
    clients,
    counted_calls,
    env,
    http_server,
    issue_token,
    need,
    serve_args,
    submissions,
)  # fmt: skip

pytestmark = pytest.mark.interop


def _script(fake: FakeLLM) -> None:
    """What a strict-mode model sends: every property, the unused argument form as null or a placeholder."""
    fake.call_tool(TOOL, {"arg0": 234, "args": None})
    fake.call_tool(TOOL, {"arg0": 0, "args": "(57,)"})
    fake.call_tool(TOOL, {"arg0": 105, "args": None})
    fake.call_tool("submit", {"method": TOOL, "description": "the product of the digits", "code": None})
    fake.say("I submitted my description.")


async def _run(fake: FakeLLM, server: Any) -> str:  # an agents MCP server: the optional library is read as Any
    agents = need("agents")
    from openai import AsyncOpenAI

    agents.set_tracing_disabled(True)
    model = agents.OpenAIChatCompletionsModel(
        model="gpt-fake", openai_client=AsyncOpenAI(base_url=fake.base_url, api_key="test-key")
    )
    async with server:
        agent = agents.Agent(
            name="explorer",
            instructions="Find out what the hidden function does, then submit.",
            mcp_servers=[server],
            mcp_config={"convert_schemas_to_strict": True},
            model=model,
        )
        with anyio.fail_after(180):
            result = await agents.Runner.run(agent, "Explore the fn_ tool and submit your description.", max_turns=10)
    return str(result.final_output)


def _check(fake: FakeLLM, final: str) -> None:
    assert final == "I submitted my description."
    results = [r["messages"][-1] for r in fake.requests[1:4]]
    texts = [str(r["content"]) for r in results]
    assert "test_func(234) returned 24" in texts[0]
    assert "test_func(57) returned 35" in texts[1]
    assert "budget" in texts[2] and "spent" in texts[2] and "not run" in texts[2]
    assert "Recorded your description" in str(fake.requests[4]["messages"][-1]["content"])
    listed = {t["function"]["name"]: t["function"] for t in fake.requests[0]["tools"]}
    assert set(listed) == {TOOL, "submit"}  # no `open`: in the 2026-07-28 era a tool list depends on the credential
    for name, function in listed.items():
        assert function["parameters"]["additionalProperties"] is False, name
        assert function["parameters"]["required"] == list(function["parameters"]["properties"]), name
    assert all(t["function"].get("strict") is True for t in fake.requests[0]["tools"])
    assert listed[TOOL]["parameters"]["properties"]["arg0"]["type"] == "integer"


def test_the_agents_sdk_over_stdio_with_strict_schemas_calls_runs_into_the_budget_and_submits(data_dir: Path) -> None:
    mcp = need("agents.mcp")
    server = mcp.MCPServerStdio(
        params={"command": sys.executable, "args": serve_args(data_dir, "--budget", "2"), "env": env(data_dir),
                "cwd": str(ROOT)},
        cache_tools_list=True, client_session_timeout_seconds=60,
    )  # fmt: skip
    with FakeLLM() as fake:
        _script(fake)
        final = anyio.run(_run, fake, server)
        _check(fake, final)
    assert [(counted, total) for _, counted, total in counted_calls(data_dir)] == [(2, 3)]
    assert submissions(data_dir) == [("builtin/b001", "the product of the digits")]
    assert [c.split("; ")[-1] for c in clients(data_dir)] == ["MCP 2026-07-28"]


def test_the_agents_sdk_over_http_with_the_main_token_and_a_label_calls_runs_into_the_budget_and_submits(
    data_dir: Path,
) -> None:
    mcp = need("agents.mcp")
    main = "main-token-0123456789"
    with http_server(data_dir, "--token", main, "--budget", "2") as url:
        server = mcp.MCPServerStreamableHttp(
            params={"url": f"{url}?session=agents-main", "headers": {"Authorization": f"Bearer {main}"}},
            cache_tools_list=True, client_session_timeout_seconds=60,
        )  # fmt: skip
        with FakeLLM() as fake:
            _script(fake)
            final = anyio.run(_run, fake, server)
            _check(fake, final)
    assert counted_calls(data_dir) == [("agents-main", 2, 3)]
    assert submissions(data_dir) == [("builtin/b001", "the product of the digits")]


def test_the_agents_sdk_over_http_with_a_session_token_calls_runs_into_the_budget_and_submits(data_dir: Path) -> None:
    mcp = need("agents.mcp")
    token = issue_token(data_dir, "agents-sdk", "--run", "interop")
    with http_server(data_dir, "--token", "main-token-0123456789", "--budget", "2") as url:
        server = mcp.MCPServerStreamableHttp(
            params={"url": url, "headers": {"Authorization": f"Bearer {token}"}},
            cache_tools_list=True, client_session_timeout_seconds=60,
        )  # fmt: skip
        with FakeLLM() as fake:
            _script(fake)
            final = anyio.run(_run, fake, server)
            _check(fake, final)
    assert counted_calls(data_dir) == [("agents-sdk", 2, 3)]
    assert submissions(data_dir) == [("builtin/b001", "the product of the digits")]
    assert [c.split("; ")[-1] for c in clients(data_dir)] == ["MCP 2026-07-28"]
