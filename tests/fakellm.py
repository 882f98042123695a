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

It also misbehaves on request, as real servers and the gateways in front of
them do:

    fake.answer_bytes(b"<html>Bad gateway</html>", content_type="text/html")   # a 200 that is not JSON
    fake.answer_bytes(b'{"id": "chatcmpl-1", "choi', cut=True)                 # the body ends early
    fake.call_tool("fn", '{"arg0": 1')                                         # arguments that are not JSON
    fake.say("a long reply", chunks=20, chunk_s=0.1)                           # a slow model: 2 s in all
    fake.strict_history = True                                                 # refuse invalid history, as llama-server
    fake.say("To test the function", chunks=5, cut_after=3)                    # a stream that ends early, cleanly
    fake.flood()                                                               # a reply that never ends
    fake.say("x" * 100, chunks=100, chunk_s=2.0)                               # one that drips a part every 2 s

A request with ``"stream": true`` is answered as a stream of server-sent
events in each API's own form (chat completion chunks, Messages API events,
Responses API events), one ``chunk_s`` apart; without it, a slow reply comes
whole after ``chunks * chunk_s``. With ``strict_history``, a conversation that
holds a tool call whose arguments are not JSON is refused with llama-server's
own 500, and one whose tool calls are not each answered with OpenAI's 400.

``cut_after=N`` sends only the first N events of a streamed reply (the role chunk is the first) and then closes the
connection cleanly, as a proxy or a server restarting between requests does: no finish marker, no ``[DONE]``.
``flood()`` queues a reply that never ends: a stream of text parts (or, to a request without ``stream``, a JSON
body whose text never closes) for as long as the client reads; ``sent`` counts the bytes of each reply sent.
"""

from __future__ import annotations

import json
import socket
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

__all__ = ["Body", "Failure", "FakeLLM", "Flood", "Raw", "Reply", "openai_body"]

#: What llama-server answers (HTTP 500) when a tool call in the history has arguments that are not JSON: its chat
#: templates parse them (common/chat.cpp); every later request of that conversation gets the same answer.
LLAMA_SERVER_BAD_ARGUMENTS = (
    "Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] parse error at line 1, column {column}: "
    "syntax error while parsing value - unexpected end of input; expected '[', '{{', or a literal"
)


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
    chunks: int = 1
    chunk_s: float = 0.0
    reasoning_as: str = "reasoning_content"
    cut_after: int | None = None


@dataclass
class Flood:
    """A reply that never ends: ``part`` sent over and over, ``chunk_s`` apart, until the client stops reading."""

    part: str = "flood "
    chunk_s: float = 0.0


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


@dataclass
class Body:
    """A reply of exactly these bytes: a gateway's HTML page, JSON cut short, or (``cut``) a body that ends early.

    With ``cut``, the headers announce the whole of ``data`` but only its first half is sent before the connection
    closes, as when a proxy or the server dies mid-reply.
    """

    data: bytes
    status: int = 200
    content_type: str = "application/json"
    cut: bool = False
    content_encoding: str | None = None


Responder = Callable[[dict[str, Any]], "Reply | Failure | Raw | Body | Flood | str"]


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
        strict_history: When set, a chat request whose history holds a tool call with arguments that are not JSON
            gets llama-server's 500, and one with a tool call left unanswered (or an answer to no call) OpenAI's 400.
        refused: The (status, message) of every request ``strict_history`` refused, in order.
        sent: The bytes of each streamed or flooded reply's body sent, in order (a reply cut by the client counts
            what was written before it stopped reading).
    """

    def __init__(self, responder: Responder | None = None) -> None:
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []
        self.gets: list[str] = []
        self.models: list[str] | None = None
        self.require_key: str | None = None
        self.strict_history = False
        self.refused: list[tuple[int, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.sent: list[int] = []
        self._queue: deque[Reply | Failure | Raw | Body | Flood] = deque()
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
        chunks: int = 1,
        chunk_s: float = 0.0,
        reasoning_as: str = "reasoning_content",
        cut_after: int | None = None,
    ) -> FakeLLM:
        """Queue a text reply (``reasoning``: thinking text, sent as the API carries it; ``finish``: e.g. ``length``).

        ``chunks`` and ``chunk_s`` make a slow model: a streamed request gets the text in ``chunks`` parts, one
        every ``chunk_s`` seconds; any other request gets it whole after ``chunks * chunk_s`` seconds.
        ``reasoning_as`` names the chat completion field that carries the thinking: ``reasoning_content``
        (DeepSeek's, older vLLM's) or ``reasoning`` (OpenRouter's, recent vLLM's). ``cut_after``: a streamed request
        gets only the stream's first ``cut_after`` events before the connection closes cleanly.
        """
        with self._lock:
            self._queue.append(
                Reply(
                    text=text,
                    input_tokens=input_tokens,
                    output_tokens=output_tokens,
                    delay_s=delay_s,
                    reasoning=reasoning,
                    finish=finish,
                    chunks=max(1, chunks),
                    chunk_s=chunk_s,
                    reasoning_as=reasoning_as,
                    cut_after=cut_after,
                )
            )
        return self

    def flood(self, part: str = "flood ", *, chunk_s: float = 0.0, times: int = 1) -> FakeLLM:
        """Queue ``times`` replies that never end: ``part`` again and again, ``chunk_s`` apart, until the client
        stops reading (a stream to a streamed request, else a JSON body whose text never closes)."""
        with self._lock:
            for _ in range(times):
                self._queue.append(Flood(part, chunk_s))
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

    def answer_bytes(
        self,
        data: bytes,
        *,
        status: int = 200,
        content_type: str = "application/json",
        cut: bool = False,
        times: int = 1,
        content_encoding: str | None = None,
    ) -> FakeLLM:
        """Queue ``times`` replies of exactly ``data`` (``cut``: the connection closes halfway through the body;
        ``content_encoding``: the header sent with it, e.g. ``gzip`` for compressed bytes, whatever was asked)."""
        with self._lock:
            for _ in range(times):
                self._queue.append(Body(data, status, content_type, cut, content_encoding))
        return self

    def sent_by(self, count: int = 1, timeout_s: float = 10.0) -> list[int]:
        """``sent`` once ``count`` replies have ended on the server's side (a flood ends when its client stops
        reading, which the server learns a moment later); waits at most ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                if len(self.sent) >= count or time.monotonic() > deadline:
                    return list(self.sent)
            time.sleep(0.01)

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
            given = body.get("input")
            items: list[Any] = given if isinstance(given, list) else []
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

    def _next(self, body: dict[str, Any]) -> Reply | Failure | Raw | Body | Flood:
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

    def _send_bytes(self, reply: Body) -> None:
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.data)))
        if reply.content_encoding:
            self.send_header("Content-Encoding", reply.content_encoding)
        if reply.cut:
            self.send_header("Connection", "close")
        self.end_headers()
        if reply.cut:
            self.wfile.write(reply.data[: len(reply.data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(reply.data)

    def _stream(self, request: dict[str, Any], reply: Reply, api: str) -> None:
        """Server-sent events carrying ``reply`` in ``api``'s stream form, one text part every ``chunk_s``."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        parts = _parts(reply.text, reply.chunks)
        events = {"chat": _chat_events, "anthropic": _anthropic_events, "responses": _responses_events}[api]
        sent = 0
        try:
            for number, (event, delay) in enumerate(events(request, reply, parts)):
                if reply.cut_after is not None and number >= reply.cut_after:
                    break
                if delay:
                    time.sleep(reply.chunk_s)
                sent += self._event(api, event)
        finally:
            self._count_sent(sent)

    def _event(self, api: str, event: dict[str, Any]) -> int:
        """Write one server-sent event; its size in bytes."""
        name = event.get("type") if api != "chat" else None
        data = event if event is not _DONE else "[DONE]"
        line = f"event: {name}\n" if name else ""
        payload = data if isinstance(data, str) else json.dumps(data)
        encoded = f"{line}data: {payload}\n\n".encode()
        self.wfile.write(encoded)
        self.wfile.flush()
        return len(encoded)

    def _count_sent(self, sent: int) -> None:
        with self.owner._lock:
            self.owner.sent.append(sent)

    def _flood(self, request: dict[str, Any], flood: Flood, api: str | None) -> None:
        """A reply that never ends: stream events carrying ``flood.part`` (``api``), or a JSON body that never closes
        (``api`` None), until the client stops reading."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream" if api else "application/json")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        sent = 0
        try:
            if api is None:
                head = b'{"id": "chatcmpl-flood", "object": "chat.completion", "choices": [{"index": 0, "message": ' \
                       b'{"role": "assistant", "content": "'  # fmt: skip
                self.wfile.write(head)
                sent += len(head)
            else:
                reply = Reply(text=flood.part)
                first, *_ = {"chat": _chat_events, "anthropic": _anthropic_events, "responses": _responses_events}[api](
                    request, reply, [flood.part]
                )
                sent += self._event(api, first[0])
                if api == "anthropic":
                    sent += self._event(api, {"type": "content_block_start", "index": 0,
                                              "content_block": {"type": "text", "text": ""}})  # fmt: skip
            part = _flood_part(api, flood.part)
            while True:
                if flood.chunk_s:
                    time.sleep(flood.chunk_s)
                self.wfile.write(part)
                sent += len(part)
        except OSError:
            pass  # the client stopped reading: what a flood waits for
        finally:
            self._count_sent(sent)

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
            refusal = _history_problem(body) if owner.strict_history and not anthropic and not responses else None
            if refusal is not None:
                with owner._lock:
                    owner.refused.append(refusal)
                status, message = refusal
                kind = "server_error" if status >= 500 else "invalid_request_error"
                self._send(status, {"error": {"code": status, "message": message, "type": kind}})
                return
            reply = owner._next(body)
            if isinstance(reply, Body):
                self._send_bytes(reply)
                return
            if isinstance(reply, Failure) and reply.text is not None:
                self._send_text(reply.status, reply.text)
                return
            if isinstance(reply, Failure):
                self._send(reply.status, _error(reply.status, reply.message, anthropic), reply.headers)
                return
            if isinstance(reply, Raw):
                self._send(200, reply.payload)
                return
            if isinstance(reply, Flood):
                api = "anthropic" if anthropic else "responses" if responses else "chat"
                self._flood(body, reply, api if body.get("stream") else None)
                return
            if reply.delay_s:
                time.sleep(reply.delay_s)
            if body.get("stream"):
                self._stream(body, reply, "anthropic" if anthropic else "responses" if responses else "chat")
                return
            if reply.chunk_s:
                time.sleep(reply.chunks * reply.chunk_s)
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
        message[reply.reasoning_as] = reply.reasoning
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


_DONE: dict[str, Any] = {}  # the chat stream's closing "[DONE]" line


def _flood_part(api: str | None, part: str) -> bytes:
    """One repeated piece of a flood: a text event of ``api``'s stream, or (None) text inside a JSON string."""
    if api is None:
        return json.dumps(part)[1:-1].encode() * 64
    if api == "chat":
        event: dict[str, Any] = {"id": "chatcmpl-flood", "object": "chat.completion.chunk", "created": 0, "model": "m",
                                 "choices": [{"index": 0, "delta": {"content": part}, "finish_reason": None}]}  # fmt: skip
        return f"data: {json.dumps(event)}\n\n".encode() * 16
    if api == "anthropic":
        event = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": part}}
    else:
        event = {"type": "response.output_text.delta", "item_id": "msg_flood", "output_index": 0, "content_index": 0,
                 "delta": part, "logprobs": [], "sequence_number": 1}  # fmt: skip
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode() * 16


def _parts(text: str, chunks: int) -> list[str]:
    """``text`` in ``chunks`` consecutive pieces (some empty when it is shorter)."""
    size = -(-len(text) // chunks) if text else 0
    return [text[i * size : (i + 1) * size] for i in range(chunks)] if size else [""] * chunks


def _chat_events(request: dict[str, Any], reply: Reply, parts: list[str]) -> list[tuple[dict[str, Any], bool]]:
    """Chat completion chunks: the role, the text part by part, tool calls, the finish, usage when asked, [DONE]."""
    whole = openai_body(request, reply)
    head = {k: whole[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return head | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    events: list[tuple[dict[str, Any], bool]] = [(chunk({"role": "assistant", "content": ""}), False)]
    if reply.reasoning:
        events.append((chunk({reply.reasoning_as: reply.reasoning}), False))
    events += [(chunk({"content": part}), True) for part in parts if part] or [(chunk({}), True)]
    for index, call in enumerate(whole["choices"][0]["message"].get("tool_calls") or ()):
        arguments = call["function"]["arguments"]
        middle = len(arguments) // 2
        start = {"index": index, "id": call["id"], "type": "function"}
        first = start | {"function": {"name": call["function"]["name"], "arguments": arguments[:middle]}}
        events.append((chunk({"tool_calls": [first]}), False))
        events.append((chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[middle:]}}]}), False))
    events.append((chunk({}, whole["choices"][0]["finish_reason"]), False))
    if (request.get("stream_options") or {}).get("include_usage"):
        events.append((head | {"choices": [], "usage": whole["usage"]}, False))
    events.append((_DONE, False))
    return events


def _anthropic_events(request: dict[str, Any], reply: Reply, parts: list[str]) -> list[tuple[dict[str, Any], bool]]:
    """The Messages API's stream: message_start, each block's start, deltas and stop, message_delta, message_stop."""
    whole = _anthropic_body(request, reply)
    start = {k: v for k, v in whole.items() if k not in ("content", "stop_reason", "usage")}
    usage = whole["usage"]
    events: list[tuple[dict[str, Any], bool]] = [
        ({"type": "message_start", "message": start | {"content": [], "stop_reason": None,
          "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1}}}, False),
    ]  # fmt: skip
    for index, block in enumerate(whole["content"]):
        kind = block["type"]
        if kind == "text":
            events.append(
                ({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}, False)
            )
            events += [({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": part}}, True)
                       for part in parts if part]  # fmt: skip
        elif kind == "thinking":
            events.append(
                (
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                    },
                    False,
                )
            )
            events.append(
                (
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "thinking_delta", "thinking": block["thinking"]},
                    },
                    False,
                )
            )
            events.append(({"type": "content_block_delta", "index": index,
                            "delta": {"type": "signature_delta", "signature": block["signature"]}}, False))  # fmt: skip
        else:
            events.append(
                (
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}},
                    },
                    False,
                )
            )
            events.append(({"type": "content_block_delta", "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}}, False))  # fmt: skip
        events.append(({"type": "content_block_stop", "index": index}, False))
    events.append(({"type": "message_delta", "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
                    "usage": {"output_tokens": usage["output_tokens"]}}, False))  # fmt: skip
    events.append(({"type": "message_stop"}, False))
    return events


def _responses_events(request: dict[str, Any], reply: Reply, parts: list[str]) -> list[tuple[dict[str, Any], bool]]:
    """The Responses API's stream: response.created, the text's deltas, response.completed with the whole response."""
    whole = _responses_body(request, reply)
    created = whole | {"status": "in_progress", "output": [], "usage": None}
    events: list[tuple[dict[str, Any], bool]] = [({"type": "response.created", "response": created}, False)]
    message = next((item for item in whole["output"] if item["type"] == "message"), None)
    for part in parts if message is not None else ():
        if part and message is not None:  # the loop runs only with a message: this tells mypy so
            delta = {"type": "response.output_text.delta", "item_id": message["id"], "output_index": 0,
                     "content_index": 0, "delta": part, "logprobs": []}  # fmt: skip
            events.append((delta, True))
    events.append(({"type": "response.completed", "response": whole}, not parts or message is None))
    for number, (event, _) in enumerate(events):
        event["sequence_number"] = number
    return events


def _history_problem(body: dict[str, Any]) -> tuple[int, str] | None:
    """Why a strict server refuses this chat history, as (status, message); None when it is valid."""
    messages = body.get("messages") or []
    waiting: list[str] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            if message.get("tool_call_id") not in waiting:
                return (
                    400,
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
                )
            waiting.remove(message["tool_call_id"])
            continue
        if waiting:
            return 400, (
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(waiting)}"
            )
        for call in message.get("tool_calls") or () if role == "assistant" else ():
            arguments = (call.get("function") or {}).get("arguments")
            if isinstance(arguments, str):
                try:
                    json.loads(arguments)
                except ValueError as exc:
                    return 500, LLAMA_SERVER_BAD_ARGUMENTS.format(column=getattr(exc, "colno", 1))
            waiting.append(call.get("id"))
    if waiting:
        return 400, f"An assistant message with 'tool_calls' must be followed by tool messages: {', '.join(waiting)}"
    return None
