"""The load the starvation test and benchmark put on a server: sessions calling one tool without pause, each with
arguments of just under 64 KiB of JSON (the most the default argument cap lets through), from a process of their own
so that whoever measures shares no interpreter lock with them.

Run it as ``python -c LARGE_CALLS URL TOOL SESSIONS``.
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
