"""A handshake-era request without a session (``--stateless``), answered as one exchange.

Without sessions a handshake-era request is one request and one answer, as every 2026-07-28 request is. The SDK
still serves each through the machinery of a session: a transport, a dispatcher and a server loop built for the
request and torn down after it. That cost 1.37 ms of server CPU per call against 1.06 ms for the same call in the
2026-07-28 era (benchmarks/engine_throughput.py), and several server processes (``--processes``) need
``--stateless``. ``one_exchange`` answers such a request with the SDK's single-exchange kernel instead
(``serve_one``, the one its 2026-07-28 entry uses), on the same born-ready connection the SDK's stateless path makes
(the version the request's header names, no client facts), so handlers, middleware and the answer's content are the
same; the answer is JSON with status 200, as the SDK's own JSON answers in this era.

What is not a plain request goes to the SDK as before (``None``): an ``initialize``, a notification, a request the
SDK would refuse (a wrong ``Accept`` or ``Content-Type``, a malformed message) and anything answered on a stream.

It relies on the SDK's ``_SingleExchangeDispatchContext`` (private to mcp/server/_streamable_http_modern.py);
tests/pau_mcp/server/test_http_sdk_members.py checks it on the installed SDK.
"""

from __future__ import annotations

import logging
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server._streamable_http_modern import _SingleExchangeDispatchContext
from mcp.server.connection import Connection
from mcp.server.runner import serve_one
from mcp.server.streamable_http import check_accept_headers
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data, progress_token_from_params
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

__all__ = ["MESSAGE_KEY", "one_exchange"]

#: The ASGI scope key of a request body's message, when the HTTP layer has read it already (``BodyGate``).
MESSAGE_KEY = "pau_mcp.message"

log = logging.getLogger("pau_mcp.server")

_JSON = "application/json"


def _plain_request(request: Request) -> types.JSONRPCRequest | None:
    """The request, if the SDK would take it as one plain request answered in JSON; else None."""
    if request.method != "POST" or not check_accept_headers(request)[0]:
        return None
    content_type = request.headers.get("content-type", "")
    if not any(part.strip() == _JSON for part in content_type.split(";")[0].split(",")):
        return None
    message = request.scope.get(MESSAGE_KEY)  # without BodyGate in front (no message read), the SDK answers
    if not isinstance(message, types.JSONRPCRequest) or message.method == "initialize":
        return None
    return message


async def one_exchange(
    app: Server[Any], lifespan_state: Any, version: str | None, scope: Scope, receive: Receive, send: Send
) -> bytes | None:
    """Answer a stateless handshake-era request as one exchange; or, if it is not a plain request, its body (read
    here) for the SDK to answer.

    Args:
        app: The MCP server.
        lifespan_state: The state its lifespan yielded (the session manager's).
        version: The protocol version the request's header names; None: the SDK's default for a request without.
        scope: The request's ASGI scope.
        receive: Its ASGI receive.
        send: Its ASGI send.
    """
    request = Request(scope, receive)
    body = await request.body()
    message = _plain_request(request)
    if message is None:
        return body
    connection = Connection.from_envelope(version or types.DEFAULT_NEGOTIATED_VERSION, None, None)
    exchange = _SingleExchangeDispatchContext(
        transport=TransportContext(kind="streamable-http", can_send_request=False),
        request_id=message.id,
        message_metadata=ServerMessageMetadata(request_context=request, can_send_request=False),
        progress_token=progress_token_from_params(message.params),
    )
    reply: types.JSONRPCResponse | types.JSONRPCError
    try:
        result = await serve_one(
            app, exchange, message.method, message.params, connection=connection, lifespan_state=lifespan_state
        )
        reply = types.JSONRPCResponse(jsonrpc="2.0", id=message.id, result=result)
    except Exception as exc:  # the wire gets the SDK's error for it, never the exception's text
        error = handler_exception_to_error_data(exc)
        if error is None:
            log.exception("the handler of a %s request raised", message.method)
            error = types.ErrorData(code=types.INTERNAL_ERROR, message="Internal server error")
        reply = types.JSONRPCError(jsonrpc="2.0", id=message.id, error=error)
    data = reply.model_dump_json(by_alias=True, exclude_unset=True).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", _JSON.encode()), (b"content-length", str(len(data)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": data})
    return None
