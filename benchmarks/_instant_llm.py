"""An instant scripted model for benchmarks, served from its own process (as a real provider would be).

Prints its base URL on stdout, then serves until stdin closes. ``--delay-ms N`` holds each chat reply for N ms,
as a provider's latency would (without using CPU meanwhile). The script: a tools
agent makes 20 tool calls and submits; the judge rates 2; the code writer returns
a constant function. For `pau-mcp create` (benchmarks/creation.py): the validator
accepts everything, the inputs are twenty calls of small integers (as many as
the header's parameters), the description carries the function's source (packed), and the code writer
unpacks it: a perfect describer and coder, so every gold check passes and what is measured is the
pipeline's own work.

A real provider's CPU is not on this machine, so the stand-in should take as
little of the benchmark's cores as it can: the replies are the tests' loopback
fake's (tests/fakellm.py), served by uvicorn with uvloop and httptools as a
bare ASGI app (about a third of the CPU per request of the fake's threaded
http.server).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
import threading
import zlib
from pathlib import Path
from typing import Any

import uvicorn

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fakellm import Reply, openai_body  # noqa: E402

from pau_mcp import eventloop  # noqa: E402
from pau_mcp.listening import listening_socket  # noqa: E402

__all__ = ["instant"]

_DELAY_S = 0.0


def instant(body: dict[str, Any]) -> Reply | str:
    """The reply to one request."""
    messages = body["messages"]
    if body.get("tools"):
        tool = next((t["function"]["name"] for t in body["tools"] if t["function"]["name"].startswith("fn_")), None)
        used = sum(1 for m in messages if m.get("role") == "tool")
        if tool and used < 20:
            return Reply(tool_calls=[(tool, {"args": f"({used},)"})])
        return Reply(tool_calls=[("submit", {"method": tool or "", "description": "returns a number"})])
    text = str(messages[-1].get("content"))
    if "<reference-" in text:  # the judge: its fences carry a per-request tag
        return "Rating: 2"
    if text.startswith("Write an input check"):
        params = text.split("def validate_input_args(", 1)[1].split(")", 1)[0]
        return f"```python\ndef validate_input_args({params}):\n    return None\n```"
    if text.startswith("Propose inputs"):
        header = text.split("def test_func(", 1)[-1].split(")", 1)[0]
        count = len([p for p in header.split(",") if p.strip() and not p.strip().startswith("*")])
        return "\n".join(
            "- test_func(" + ", ".join(str((i * 7 + k * 3) % 23 - 5) for k in range(count)) + ")" for i in range(20)
        )
    if text.startswith("Describe what the Python function"):
        fenced = text.split("\n<source-", 1)[1].split(">\n", 1)[1].rsplit("\n</source-", 1)[0]
        return "Returns what this code returns: " + base64.b64encode(zlib.compress(fenced.encode())).decode()
    if "Returns what this code returns: " in text:
        packed = text.split("Returns what this code returns: ", 1)[1].split()[0]
        return "```python\n" + zlib.decompress(base64.b64decode(packed)).decode() + "\n```"
    return "```python\ndef test_func(*args):\n    return 0\n```"


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    chunks: list[bytes] = []
    payload: dict[str, Any]
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    if scope["method"] == "GET" and scope["path"].rstrip("/").endswith("/models"):  # what the preflight asks
        status, payload = 200, {"object": "list", "data": [{"id": "instant", "object": "model", "owned_by": "bench"}]}
    elif scope["method"] == "POST" and scope["path"].rstrip("/").endswith("/chat/completions"):
        if _DELAY_S:
            await asyncio.sleep(_DELAY_S)
        request = json.loads(b"".join(chunks))
        decided = instant(request)
        status, payload = 200, openai_body(request, Reply(text=decided) if isinstance(decided, str) else decided)
    else:
        status, payload = 404, {"error": {"message": f"no route {scope['path']}"}}
    data = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def main() -> None:
    global _DELAY_S
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--delay-ms", type=float, default=0.0, help="latency added to each chat reply")
    _DELAY_S = parser.parse_args().delay_ms / 1000
    sock = listening_socket("127.0.0.1", 0)
    server = uvicorn.Server(
        uvicorn.Config(_app, loop="uvloop", http="httptools", lifespan="off", log_level="warning", access_log=False)
    )
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/v1", flush=True)

    def _stop_when_stdin_closes() -> None:
        sys.stdin.read()
        server.should_exit = True

    threading.Thread(target=_stop_when_stdin_closes, daemon=True).start()
    eventloop.run(server.serve, [sock])


if __name__ == "__main__":
    main()
