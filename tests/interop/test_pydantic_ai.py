"""pydantic-ai against a real `pau-mcp serve`, over stdio and over HTTP with the main token (a label in the URL) and
with a session token: list, call, run into the budget, submit; with its default retries, and with the
`max_retries` docs/clients.md recommends. It speaks the 2026-07-28 revision (``server/discover`` first)."""

from __future__ import annotations

import json
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


async def _run(fake: FakeLLM, toolset: Any) -> str:  # a pydantic_ai MCP toolset: the optional library is read as Any
    pydantic_ai = need("pydantic_ai")
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("gpt-fake", provider=OpenAIProvider(base_url=fake.base_url, api_key="test-key"))
    agent = pydantic_ai.Agent(model, toolsets=[toolset])
    with anyio.fail_after(180):
        result = await agent.run("Explore the fn_ tool and submit your description.")
    return str(result.output)


def _tool_results(fake: FakeLLM) -> list[dict[str, Any]]:
    return [json.loads(r["messages"][-1]["content"]) for r in fake.requests[1:] if r["messages"][-1]["role"] == "tool"]


def test_pydantic_ai_with_default_retries_goes_on_past_the_budget_and_submits(data_dir: Path) -> None:
    """Two calls over the budget in a row: an observation each, so the default `max_retries=1` never ends the run."""
    mcp = need("pydantic_ai.mcp")
    transports = need("fastmcp.client.transports")
    toolset = mcp.MCPToolset(
        transports.StdioTransport(
            sys.executable, serve_args(data_dir, "--budget", "2"), env=env(data_dir), cwd=str(ROOT)
        )
    )
    with FakeLLM() as fake:
        for value in (234, 57, 105, 106):
            fake.call_tool(TOOL, {"arg0": value})
        fake.call_tool("submit", {"method": TOOL, "description": "the product of the digits"})
        fake.say("Submitted.")
        assert anyio.run(_run, fake, toolset) == "Submitted."
        results = _tool_results(fake)
    assert [r.get("status") for r in results] == ["ok", "ok", "over_budget", "over_budget", "recorded"]
    assert results[0]["value"] == "24" and results[2]["queries_left"] == 0
    assert [(counted, total) for _, counted, total in counted_calls(data_dir)] == [(2, 4)]
    assert submissions(data_dir) == [("builtin/b001", "the product of the digits")]
    assert [c.split("; ")[-1] for c in clients(data_dir)] == ["MCP 2026-07-28"]


def test_pydantic_ai_over_http_with_the_main_token_and_a_label_runs_into_the_budget_and_submits(data_dir: Path) -> None:
    mcp = need("pydantic_ai.mcp")
    main = "main-token-0123456789"
    with http_server(data_dir, "--token", main, "--budget", "2") as url:
        toolset = mcp.MCPToolset(f"{url}?session=pydantic-main", headers={"Authorization": f"Bearer {main}"})
        with FakeLLM() as fake:
            for value in (234, 57, 105):
                fake.call_tool(TOOL, {"arg0": value})
            fake.call_tool("submit", {"method": TOOL, "description": "the product of the digits"})
            fake.say("Submitted.")
            assert anyio.run(_run, fake, toolset) == "Submitted."
            results = _tool_results(fake)
    assert [r.get("status") for r in results] == ["ok", "ok", "over_budget", "recorded"]
    assert counted_calls(data_dir) == [("pydantic-main", 2, 3)]
    assert submissions(data_dir) == [("builtin/b001", "the product of the digits")]
    assert [c.split("; ")[-1] for c in clients(data_dir)] == ["MCP 2026-07-28"]


def test_pydantic_ai_over_http_with_a_session_token_and_max_retries_recovers_from_bad_arguments(data_dir: Path) -> None:
    """The recipe: a session token for the budget, `max_retries=3` so refused arguments in a row are corrected."""
    mcp = need("pydantic_ai.mcp")
    token = issue_token(data_dir, "pydantic-agent", "--run", "interop")
    with http_server(data_dir, "--token", "main-token-0123456789", "--budget", "2") as url:
        toolset = mcp.MCPToolset(url, headers={"Authorization": f"Bearer {token}"}, max_retries=3)
        with FakeLLM() as fake:
            fake.call_tool(TOOL, {"arg0": "234"})
            fake.call_tool(TOOL, {"arg0": [2, 3, 4]})
            for value in (234, 57, 105):
                fake.call_tool(TOOL, {"arg0": value})
            fake.call_tool("submit", {"method": TOOL, "description": "the product of the digits"})
            fake.say("Submitted.")
            assert anyio.run(_run, fake, toolset) == "Submitted."
            tool_messages = [r["messages"][-1] for r in fake.requests[1:]]
    refused = [str(m.get("content")) for m in tool_messages[:2]]
    assert all("an integer" in text and "args" in text for text in refused)
    later = [json.loads(m["content"]) for m in tool_messages[2:]]
    assert [r["status"] for r in later] == ["ok", "ok", "over_budget", "recorded"]
    assert counted_calls(data_dir) == [("pydantic-agent", 2, 5)]
    assert submissions(data_dir) == [("builtin/b001", "the product of the digits")]
