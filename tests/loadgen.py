"""The loads the starvation tests and benchmarks put on a server, from a process of their own so that whoever
measures shares no interpreter lock with them.

``LARGE_CALLS``: sessions calling one tool without pause, each with arguments of just under 64 KiB of JSON (the most
the default argument cap lets through). Run it as ``python -c LARGE_CALLS URL TOOL SESSIONS``.

``HOG_CALLS``: one credential (the main token's label LABEL) keeping CONCURRENCY calls of TOOL in flight without
pause, in the 2026-07-28 era; with a slow method, each runs to the CPU limit. Run it as ``python -c HOG_CALLS URL
MAIN_TOKEN LABEL TOOL ARGUMENTS_JSON CONCURRENCY``.

``PIPELINE_FLOOD``: CONNECTIONS connections, each writing REQUESTS pipelined requests (a ping of about 190 bytes,
with no credential) and never reading an answer; it prints ``sent BYTES`` once written (what the server would take
within 30 s) and holds the connections open until its stdin closes. Run it as ``python -c PIPELINE_FLOOD HOST PORT
PATH CONNECTIONS REQUESTS``.
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

PIPELINE_FLOOD = """
import socket, sys, time
host, port, path, connections, requests = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
body = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
one = (f"POST {path} HTTP/1.1\\r\\nHost: {host}:{port}\\r\\nContent-Type: application/json\\r\\n"
       f"Accept: application/json, text/event-stream\\r\\nContent-Length: {len(body)}\\r\\n\\r\\n").encode() + body
payload = one * requests
sockets = []
for _ in range(connections):
    sock = socket.create_connection((host, port), timeout=30)
    sock.setblocking(False)
    sockets.append([sock, 0])
deadline = time.monotonic() + 30
while any(sent < len(payload) for _, sent in sockets) and time.monotonic() < deadline:
    for entry in sockets:
        sock, sent = entry
        if sent < len(payload):
            try:
                entry[1] += sock.send(payload[sent:])
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                entry[1] = len(payload)
    time.sleep(0.001)
print("sent", sum(min(sent, len(payload)) for _, sent in sockets), flush=True)
sys.stdin.read()
for sock, _ in sockets:
    sock.close()
"""
