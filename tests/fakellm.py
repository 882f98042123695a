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

The same server speaks OpenAI's chat completions (``/v1/chat/completions``) and
Responses (``/v1/responses``) APIs, Azure OpenAI's deployment routes, and
Anthropic's Messages API (``/v1/messages``); a reply's ``reasoning`` comes back
as each API carries thinking. ``GET /v1/models`` lists ``fake.models`` (``None``:
the server has no model list, as some gateways do not).

When the queue is empty the ``responder`` decides (a function of the request
body returning a reply, a failure or a plain string); without one the server
answers 400, so a test that forgot a reply fails loudly instead of retrying.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.parse
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
    reasoning: str = ""
    finish: str | None = None


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
        gets: The paths of GET requests (model lists), in order.
        models: The model ids ``GET /v1/models`` lists; None answers 404 (no model list).
        require_key: When set, every request without this key (bearer, ``api-key`` or ``x-api-key``) gets a 401.
    """

    def __init__(self, responder: Responder | None = None) -> None:
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []
        self.gets: list[str] = []
        self.models: list[str] | None = None
        self.require_key: str | None = None
        self.in_flight = 0
        self.max_in_flight = 0
        self._queue: deque[Reply | Failure] = deque()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting ----------------------------------------------------------------------

    def say(
        self,
        text: str,
        *,
        input_tokens: int = 11,
        output_tokens: int = 7,
        delay_s: float = 0.0,
        reasoning: str = "",
        finish: str | None = None,
    ) -> FakeLLM:
        """Queue a text reply (``reasoning``: thinking text, sent as the API carries it; ``finish``: e.g. ``length``)."""
        with self._lock:
            self._queue.append(
                Reply(
                    text=text,
                    input_tokens=input_tokens,
                    output_tokens=output_tokens,
                    delay_s=delay_s,
                    reasoning=reasoning,
                    finish=finish,
                )
            )
        return self

    def call_tool(
        self,
        name: str,
        arguments: Any,
        *,
        text: str = "",
        input_tokens: int = 11,
        output_tokens: int = 7,
        reasoning: str = "",
    ) -> FakeLLM:
        """Queue a reply that calls one tool (``arguments``: a dict, or a string sent verbatim)."""
        reply = Reply(text, [(name, arguments)], input_tokens, output_tokens, reasoning=reasoning)
        with self._lock:
            self._queue.append(reply)
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
            if isinstance(body.get("instructions"), str):
                parts.append(body["instructions"])
            items = body.get("input") if isinstance(body.get("input"), list) else []
            for message in [*body.get("messages", []), *items]:
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

    def _refused_key(self, anthropic: bool) -> bool:
        wanted = self.owner.require_key
        if wanted is None:
            return False
        given = {self.headers.get("Authorization", ""), self.headers.get("api-key"), self.headers.get("x-api-key")}
        if wanted in given or f"Bearer {wanted}" in given:
            return False
        self._send(401, _error(401, "Incorrect API key provided", anthropic, "authentication_error"))
        return True

    def do_GET(self) -> None:
        owner = self.owner
        with owner._lock:
            owner.gets.append(self.path)
            models = None if owner.models is None else list(owner.models)
        path = urllib.parse.urlsplit(self.path).path.rstrip("/")
        anthropic = "anthropic-version" in {k.lower() for k in self.headers}
        if self._refused_key(anthropic):
            return
        head, _, last = path.rpartition("/")
        if models is None or not (path.endswith("/models") or head.endswith("/models")):
            self._send(404, _error(404, f"no route {self.path}", anthropic))
        elif path.endswith("/models"):
            if anthropic:
                data = [_anthropic_model(name) for name in models]
                self._send(200, {"data": data, "has_more": False, "first_id": None, "last_id": None})
            else:
                data = [{"id": name, "object": "model", "created": 0, "owned_by": "fakellm"} for name in models]
                self._send(200, {"object": "list", "data": data})
        elif urllib.parse.unquote(last) in models:
            name = urllib.parse.unquote(last)
            model = _anthropic_model(name) if anthropic else {"id": name, "object": "model", "created": 0}
            self._send(200, model)
        else:
            self._send(404, _error(404, f"model: {urllib.parse.unquote(last)}", anthropic, "not_found_error"))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        path = urllib.parse.urlsplit(self.path).path.rstrip("/")
        anthropic = path.endswith("/messages")
        responses = path.endswith("/responses")
        if not (anthropic or responses or path.endswith("/chat/completions")):
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send(400, {"error": {"message": "body is not JSON"}})
            return
        owner = self.owner
        if self._refused_key(anthropic):
            return
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
                self._send(reply.status, _error(reply.status, reply.message, anthropic), reply.headers)
                return
            if isinstance(reply, Raw):
                self._send(200, reply.payload)
                return
            if reply.delay_s:
                time.sleep(reply.delay_s)
            if anthropic:
                self._send(200, _anthropic_body(body, reply))
            elif responses:
                self._send(200, _responses_body(body, reply))
            else:
                self._send(200, openai_body(body, reply))
        finally:
            with owner._lock:
                owner.in_flight -= 1


def _error(status: int, message: str, anthropic: bool, kind: str = "scripted") -> dict[str, Any]:
    error = {"message": message, "type": kind, "code": str(status)}
    return {"type": "error", "error": error} if anthropic else {"error": error}


def _anthropic_model(name: str) -> dict[str, Any]:
    return {"id": name, "type": "model", "display_name": name, "created_at": "2026-01-01T00:00:00Z"}


def _arguments_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def openai_body(request: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """A chat completion carrying ``reply``, for ``request`` (the benchmark's instant model serves these too)."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
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
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": reply.finish or ("tool_calls" if reply.tool_calls else "stop"),
            }
        ],
        "usage": {
            "prompt_tokens": reply.input_tokens,
            "completion_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.output_tokens,
        },
    }


def _responses_body(request: dict[str, Any], reply: Reply) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if reply.reasoning:
        summary = [{"type": "summary_text", "text": reply.reasoning}]
        output.append({"type": "reasoning", "id": f"rs_{uuid.uuid4().hex[:12]}", "summary": summary})
    if reply.text:
        text = {"type": "output_text", "text": reply.text, "annotations": []}
        message = {"type": "message", "id": f"msg_{uuid.uuid4().hex[:12]}", "role": "assistant", "status": "completed"}
        output.append({**message, "content": [text]})
    for name, args in reply.tool_calls:
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{uuid.uuid4().hex[:12]}",
                "call_id": f"call_{uuid.uuid4().hex[:12]}",
                "name": name,
                "arguments": _arguments_text(args),
                "status": "completed",
            }
        )
    incomplete = reply.finish == "length"
    return {
        "id": f"resp_{uuid.uuid4().hex[:12]}",
        "object": "response",
        "created_at": int(time.time()),
        "model": request.get("model", "fake"),
        "status": "incomplete" if incomplete else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools", []),
        "usage": {
            "input_tokens": reply.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": reply.output_tokens,
            "output_tokens_details": {"reasoning_tokens": len(reply.reasoning.split())},
            "total_tokens": reply.input_tokens + reply.output_tokens,
        },
    }


def _anthropic_body(request: dict[str, Any], reply: Reply) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.reasoning:
        content.append({"type": "thinking", "thinking": reply.reasoning, "signature": f"sig-{uuid.uuid4().hex[:8]}"})
    if reply.text:
        content.append({"type": "text", "text": reply.text})
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
        "stop_reason": "max_tokens" if reply.finish == "length" else ("tool_use" if reply.tool_calls else "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
    }
