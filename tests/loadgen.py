"""The loads the starvation tests and benchmarks put on a server, from a process of their own so that whoever
measures shares no interpreter lock with them.

``LARGE_CALLS``: sessions calling one tool without pause, each with arguments of just under 64 KiB of JSON (the most
the default argument cap lets through). Run it as ``python -c LARGE_CALLS URL TOOL SESSIONS``.

``HOG_CALLS``: one credential (the main token's label LABEL) keeping CONCURRENCY calls of TOOL in flight without
pause, in the 2026-07-28 era; with a slow method, each runs to the CPU limit. Run it as ``python -c HOG_CALLS URL
MAIN_TOKEN LABEL TOOL ARGUMENTS_JSON CONCURRENCY``.
"""

LARGE_CALLS = """
import sys, anyio
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
url, tool, sessions = sys.argv[1], sys.argv[2], int(sys.argv[3])
arguments = {"args": "(" + repr(list(range(10_900))) + ",)"}
async def session():
    async with streamable_http_client(url) as (read, write, *_), ClientSession(read, write) as client:
        await client.initialize()
        while True:
            await client.call_tool(tool, arguments)
async def main():
    async with anyio.create_task_group() as group:
        for _ in range(sessions):
            group.start_soon(session)
anyio.run(main)
"""

HOG_CALLS = """
import json, sys, anyio, httpx2
url, token, label, tool, arguments, concurrency = sys.argv[1:7]
arguments = json.loads(arguments)
meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "hog", "version": "1"}}
headers = {"authorization": f"Bearer {token}", "x-pau-session": label, "accept": "application/json, text/event-stream",
           "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": tool}
body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments, "_meta": meta}}
async def caller(client):
    while True:
        await client.post(url, json=body, headers=headers)
async def main():
    async with httpx2.AsyncClient(timeout=600, limits=httpx2.Limits(max_connections=64)) as client:
        async with anyio.create_task_group() as group:
            for _ in range(int(concurrency)):
                group.start_soon(caller, client)
anyio.run(main)
"""
