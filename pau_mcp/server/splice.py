"""Answers whose bulk was encoded once: a handler leaves a marker where a JSON array goes, the HTTP layer writes
the bytes there.

The SDK turns every result into wire bytes itself (a pydantic dump of the whole reply, then ``json.dumps``), and
offers no way to hand it bytes encoded before. For a page of ``tools/list`` (about 370 KB for 100 method tools)
that writing was almost all of the page's server CPU, spent again on every request for a page that never changes
(benchmarks/tool_list.py). So the page's tools travel through the SDK as one small placeholder tool whose name is a
marker made for this request alone, and ``BodyGate`` replaces the placeholder's array in the answer's bytes with
the array encoded once (``ToolPages``).

Only a request that the HTTP layer can splice is offered a ``Splice`` (its scope carries one, put there by
``BodyGate`` before the request reaches the SDK); stdio and in-memory servers never see a marker. A marker is
random per request and is replaced in that request's own answer only, so no answer can carry another request's
page, and none carries a marker: an answer whose marker cannot be replaced is refused whole (a 500 that says so).
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

from starlette.types import Message, Scope, Send

__all__ = ["SCOPE_KEY", "Splice", "offered", "splicing"]

log = logging.getLogger("pau_mcp.server")

#: The ASGI scope key of a request's ``Splice``.
SCOPE_KEY = "pau_mcp.splice"

_PREFIX = "pau-mcp-splice-"
_FAILED = (
    b'{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"The server could not write this answer; '
    b'retry the request, and report it to the operator if it fails again."}}'
)


@dataclass
class Splice:
    """One request's pending splice: the marker its answer carries and the JSON array that replaces it."""

    marker: bytes = b""
    array: bytes = b""

    def placeholder(self, array: bytes) -> list[dict[str, Any]]:
        """The array to put in the answer in place of ``array`` (already JSON): one tool named by a new marker."""
        name = f"{_PREFIX}{secrets.token_hex(16)}"
        self.marker, self.array = name.encode("ascii"), array
        return [{"name": name, "inputSchema": {"type": "object"}}]

    def apply(self, body: bytes) -> list[bytes] | None:
        """``body`` in pieces, the placeholder's array replaced (the pieces are written as they are: the array is
        not copied again); ``[body]`` without a marker; None if the marker is there but not as the placeholder this
        splice made."""
        if not self.marker:
            return [body]
        at = body.find(self.marker)
        if at < 0:
            return [body]  # an answer without the page (an error raised after the middleware)
        start, end = body.rfind(b"[", 0, at), body.find(b"]", at)
        if start < 0 or end < 0 or not _is_placeholder(body[start : end + 1], self.marker):
            return None
        return [body[:start], self.array, body[end + 1 :]]


def _is_placeholder(text: bytes, marker: bytes) -> bool:
    try:
        value: object = json.loads(text)
    except ValueError:
        return False
    return value == [{"name": marker.decode("ascii"), "inputSchema": {"type": "object"}}]


def offered(scope: MutableMapping[str, Any] | None) -> Splice | None:
    """The ``Splice`` of a request whose transport splices (its ASGI scope), else None."""
    if scope is None:
        return None
    splice = scope.get(SCOPE_KEY)
    return splice if isinstance(splice, Splice) else None


def splicing(scope: Scope, send: Send) -> Send:
    """``send`` for a request offered a splice: its answer's bytes with the placeholder replaced.

    An answer of known length is held whole (the SDK writes one in a single piece) and goes out spliced with its new
    length; a stream's start goes at once, and the event that holds the marker (the SDK writes each in one piece)
    is spliced on its way.
    """
    splice = scope[SCOPE_KEY] = Splice()
    held: list[Message] = []
    pieces: list[bytes] = []

    async def send_spliced(message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start" and any(k == b"content-length" for k, _ in message.get("headers", ())):
            held.append(message)
            return
        if kind != "http.response.body":
            await send(message)
            return
        if not held:  # a stream
            event = splice.apply(message.get("body", b"")) or [_refused()]
            await _send_pieces(send, event, message.get("more_body", False))
            return
        pieces.append(message.get("body", b""))
        if message.get("more_body", False):
            return
        start, spliced = held.pop(), splice.apply(b"".join(pieces))
        answer = spliced if spliced is not None else [_refused()]
        if spliced is None:
            start = {**start, "status": 500}
        length = str(sum(map(len, answer))).encode()
        await send({**start, "headers": [(k, length if k == b"content-length" else v) for k, v in start["headers"]]})
        await _send_pieces(send, answer, False)

    return send_spliced


def _refused() -> bytes:
    log.error("a tool page's placeholder was not found as written in its answer; the answer was refused")
    return _FAILED


async def _send_pieces(send: Send, pieces: list[bytes], more: bool) -> None:
    for number, piece in enumerate(pieces, 1):
        await send({"type": "http.response.body", "body": piece, "more_body": more or number < len(pieces)})
