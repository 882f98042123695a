"""Run by the interop tests in a virtual environment of its own, with langchain-mcp-adapters 0.3.2 (which pins
``mcp<2``): drives a real `pau-mcp serve` as a LangChain application would, and prints what it saw as JSON.

    python langchain_client.py '{"connection": {...}, "tool": "fn_...", "calls": [..], "mode": "default"}'

``mode``: ``default`` takes the tools of ``MultiServerMCPClient.get_tools()`` (a new MCP session for every
call); ``session`` keeps one session (``async with client.session(...)`` and ``load_mcp_tools``).
"""

import asyncio
import json
import sys
from typing import Any

from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools


async def _invoke(tool: Any, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    message = await tool.ainvoke({"name": tool.name, "args": arguments, "id": call_id, "type": "tool_call"})
    content = message.content
    text = content if isinstance(content, str) else "\n".join(part.get("text", "") for part in content)
    artifact = message.artifact or {}
    return {"text": text, "status": message.status, "structured": artifact.get("structured_content")}


async def _drive(tools: list[Any], spec: dict[str, Any]) -> dict[str, Any]:
    by_name = {tool.name: tool for tool in tools}
    out: dict[str, Any] = {"tools": sorted(by_name), "schema": by_name[spec["tool"]].args_schema, "results": []}
    for i, arguments in enumerate(spec["calls"]):
        out["results"].append(await _invoke(by_name[spec["tool"]], arguments, f"call-{i}"))
    submit = {"method": spec["tool"], "description": spec.get("description", "the product of the digits")}
    out["submit"] = await _invoke(by_name["submit"], submit, "submit")
    return out


async def main(spec: dict[str, Any]) -> dict[str, Any]:
    client = MultiServerMCPClient({"pau": spec["connection"]})
    if spec["mode"] == "session":
        async with client.session("pau") as session:
            return await _drive(await load_mcp_tools(session), spec)
    return await _drive(await client.get_tools(), spec)


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))))
