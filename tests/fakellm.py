"""A scripted OpenAI-compatible (and Anthropic-compatible) chat server on loopback, for tests.

Real HTTP on an ephemeral port, served from a thread, so the OpenAI client and
the ``anthropic`` SDK talk to it exactly as they talk to a provider:

    with FakeLLM() as fake:
        fake.say("Rating: 4")                               # queue a text reply
        fake.call_tool("fn_abc", {"arg0": 1})               # queue a tool-call reply
        fake.fail(429, retry_after=0)                       # queue a failure
        env = {"OPENAI_BASE_URL": fake.base_url}
        ...
        fake.requests                                       # every request body, in order

When the queue is empty the ``responder`` decides (a function of the request
body returning a reply, a failure or a plain string); without one the server
answers 400, so a test that forgot a reply fails loudly instead of retrying.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Failure", "FakeLLM", "Raw", "Reply", "openai_body"]


@dataclass
class Reply:
    """A successful reply: text, tool calls as (name, arguments) pairs, and token counts."""

    text: str = ""
    tool_calls: list[tuple[str, Any]] = field(default_factory=list)
    input_tokens: int = 11
    output_tokens: int = 7
    delay_s: float = 0.0


@dataclass
class Failure:
    """An error reply with a status, a provider message and optional headers (Retry-After).

    With ``text``, the body is that plain text instead of the API's JSON error (as a proxy's error page is).
    """

    status: int
    message: str = "scripted failure"
    headers: dict[str, str] = field(default_factory=dict)
    text: str | None = None


@dataclass
class Raw:
    """A 200 reply with exactly this JSON payload (for servers that answer something other than the API)."""

    payload: Any


Responder = Callable[[dict[str, Any]], "Reply | Failure | Raw | str"]


class FakeLLM:
    """The fake server; use as a context manager.

    Args:
        responder: Decides replies once the queue is empty.

    Attributes:
        requests: Every JSON request body received (chat completions and messages), in order.
        headers: The matching request headers (lower-case names).
        paths: The matching request paths.
    """

    def __init__(self, responder: Responder | None = None) -> None:
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._queue: deque[Reply | Failure] = deque()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting ----------------------------------------------------------------------

    def say(self, text: str, *, input_tokens: int = 11, output_tokens: int = 7, delay_s: float = 0.0) -> FakeLLM:
        """Queue a text reply."""
        with self._lock:
            self._queue.append(
                Reply(text=text, input_tokens=input_tokens, output_tokens=output_tokens, delay_s=delay_s)
            )
        return self

    def call_tool(
        self, name: str, arguments: Any, *, text: str = "", input_tokens: int = 11, output_tokens: int = 7
    ) -> FakeLLM:
        """Queue a reply that calls one tool (``arguments``: a dict, or a string sent verbatim)."""
        with self._lock:
            self._queue.append(
                Reply(text=text, tool_calls=[(name, arguments)], input_tokens=input_tokens, output_tokens=output_tokens)
            )
        return self

    def fail(
        self,
        status: int,
        *,
        times: int = 1,
        retry_after: float | str | None = None,
        message: str | None = None,
        text: str | None = None,
    ) -> FakeLLM:
        """Queue ``times`` error replies with this status (and a Retry-After header when given; ``text``: a plain body)."""
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
        with self._lock:
            for _ in range(times):
                self._queue.append(Failure(status, message or f"scripted {status}", headers, text))
        return self

    def answer_raw(self, payload: Any) -> FakeLLM:
        """Queue a 200 reply carrying ``payload`` as it is."""
        with self._lock:
            self._queue.append(Raw(payload))
        return self

    @property
    def pending(self) -> int:
        """Queued replies not yet sent."""
        with self._lock:
            return len(self._queue)

    def prompts(self) -> list[str]:
        """The text of every request's messages joined, one string per request (for assertions)."""
        out = []
        for body in self.requests:
            parts = [body.get("system") or ""] if isinstance(body.get("system"), str) else []
            for message in body.get("messages", []):
                content = message.get("content")
                if isinstance(content, str):
                    parts.append(content)
                elif isinstance(content, list):
                    parts.extend(
                        str(block.get("text", block.get("content", ""))) for block in content if isinstance(block, dict)
                    )
            out.append("\n".join(parts))
        return out

    # -- serving ------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (``http://127.0.0.1:PORT/v1``)."""
        return f"{self.root_url}/v1"

    @property
    def root_url(self) -> str:
        """The bare server URL (Anthropic's SDK adds ``/v1`` itself)."""
        assert self._server is not None, "start the fake server first (use it as a context manager)"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeLLM:
        """Listen on an ephemeral loopback port in a daemon thread."""
        fake = self

        class Handler(_Handler):
            owner = fake

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="fakellm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next(self, body: dict[str, Any]) -> Reply | Failure | Raw:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.responder is None:
            return Failure(400, "fakellm: no reply scripted for this request")
        decided = self.responder(body)
        return Reply(text=decided) if isinstance(decided, str) else decided


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (a timeout test) leaves a reset connection behind: expected, not worth a traceback.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    owner: FakeLLM
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = (
        True  # headers and body go out in two writes: without this each reply waits for a delayed ACK
    )

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_text(self, status: int, text: str) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": "fake", "object": "model", "owned_by": "fakellm"}]})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        anthropic = self.path.rstrip("/").endswith("/messages")
        if not (anthropic or self.path.rstrip("/").endswith("/chat/completions")):
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send(400, {"error": {"message": "body is not JSON"}})
            return
        owner = self.owner
        with owner._lock:
            owner.requests.append(body)
            owner.headers.append({k.lower(): v for k, v in self.headers.items()})
            owner.paths.append(self.path)
            owner.in_flight += 1
            owner.max_in_flight = max(owner.max_in_flight, owner.in_flight)
        try:
            reply = owner._next(body)
            if isinstance(reply, Failure) and reply.text is not None:
                self._send_text(reply.status, reply.text)
                return
            if isinstance(reply, Failure):
                error = {"message": reply.message, "type": "scripted", "code": str(reply.status)}
                payload = {"type": "error", "error": error} if anthropic else {"error": error}
                self._send(reply.status, payload, reply.headers)
                return
            if isinstance(reply, Raw):
                self._send(200, reply.payload)
                return
            if reply.delay_s:
                time.sleep(reply.delay_s)
            self._send(200, _anthropic_body(body, reply) if anthropic else openai_body(body, reply))
        finally:
            with owner._lock:
                owner.in_flight -= 1


def _arguments_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def openai_body(request: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """A chat completion carrying ``reply``, for ``request`` (the benchmark's instant model serves these too)."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {"name": name, "arguments": _arguments_text(args)},
            }
            for name, args in reply.tool_calls
        ]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "fake"),
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
        "usage": {
            "prompt_tokens": reply.input_tokens,
            "completion_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.output_tokens,
        },
    }


def _anthropic_body(request: dict[str, Any], reply: Reply) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    for name, args in reply.tool_calls:
        content.append(
            {
                "type": "tool_use",
                "id": f"toolu_{uuid.uuid4().hex[:12]}",
                "name": name,
                "input": args if isinstance(args, dict) else json.loads(args),
            }
        )
    return {
        "id": f"msg_{uuid.uuid4().hex[:12]}",
        "type": "message",
        "role": "assistant",
        "model": request.get("model", "fake"),
        "content": content,
        "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
    }
