"""The Streamable HTTP app and the limits that keep one client from exhausting the server.

From the socket inward:

* the connection guard (``pau_mcp.guard``, shared with the scorer endpoint): a cap on open connections, a
  read timeout and a head size limit, so idle or trickling clients cannot hold connections.
* ``HostGate``: DNS-rebinding protection on every address (421 for a foreign ``Host``, 403 for a foreign
  ``Origin``), before authentication.
* ``BodyGate``: bodies over the message limit get 413, malformed messages a one-line JSON-RPC error with
  their id; only then does the SDK parse them.
* ``BoundedSessions``: at most ``max_sessions`` open sessions, and ``sessions_per_credential`` per credential,
  each closed after ``session_idle_s`` without a request; at a cap, the credential's own idle sessions are
  reclaimed first, then (at the overall cap) the longest-idle session once idle for half that time (or a minute,
  if shorter); otherwise the new session gets a 429 or 503 that says why and what to do.
"""

from __future__ import annotations

import contextvars
import functools
import ipaddress
import logging
import math
import socket
from collections.abc import Callable, Hashable, Iterable
from typing import Any
from urllib.parse import urlsplit

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server._streamable_http_modern import handle_modern_request
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthorizationContext, BearerAuthBackend, RequireAuthMiddleware
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from typing_extensions import override

from ..listening import is_loopback
from ..oauth import SignIn
from .card import card_endpoint
from .exchange import MESSAGE_KEY, one_exchange
from .signin import needed_scope
from .splice import splicing
from .wire import oversized, refusal

__all__ = ["BUSY_BODY", "BodyGate", "BoundedSessions", "HostGate", "SessionOwner", "http_app"]

log = logging.getLogger("pau_mcp.server")

#: A session is reclaimed at the cap only after this long idle, at most.
_RECLAIM_AFTER_S = 60.0


def _json_error(status: int, code: int, message: str, request_id: str | int | None = None) -> tuple[int, bytes]:
    body = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))
    return status, body.model_dump_json(by_alias=True, exclude_unset=True).encode()


#: The 503 body of a newcomer when every connection is busy (``pau_mcp.guard``): a JSON-RPC error, as every refusal.
BUSY_BODY = _json_error(
    503, types.INTERNAL_ERROR, "Too many open connections, all busy with requests; retry in a moment."
)[1]


async def _respond(send: Send, status: int, body: bytes, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


# -- DNS rebinding -------------------------------------------------------------------------------------------------


def _hostname(authority: str) -> str | None:
    """The host of a ``Host`` header or an origin's authority, without port or brackets; None if malformed."""
    authority = authority.strip().lower()
    if authority.startswith("["):
        host, bracket, port = authority[1:].partition("]")
        if not bracket or (port and not (port.startswith(":") and port[1:].isdigit())):
            return None
        return host
    host, colon, port = authority.partition(":")
    if colon and not port.isdigit():
        return None
    return host.rstrip(".") or None


class HostGate:
    """Refuses requests whose ``Host`` (421) or ``Origin`` (403) names a host this server does not answer to.

    A browser tricked by DNS rebinding sends the attacker's name in both; an IP literal cannot be rebound.
    Bound to a loopback address, the server answers to loopback addresses and ``localhost``; bound to any
    other address, to IP literals, ``localhost`` and this machine's names. ``extra`` adds names (a proxy's).
    """

    def __init__(self, app: ASGIApp, bound: str, extra: Iterable[str] = ()) -> None:
        self.app = app
        self.loopback_only = is_loopback(bound)
        names = {"localhost"} | {name.lower().rstrip(".") for name in extra}
        if not self.loopback_only:
            names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
        self.names = names

    @functools.lru_cache(maxsize=256)  # noqa: B019 - one gate per server, and the few names clients use repeat
    def allows(self, host: str | None) -> bool:
        """True when ``host`` (bare, no port) names this server."""
        if not host:
            return False
        if host in self.names or host.endswith(".localhost"):
            return True
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return address.is_loopback or not self.loopback_only

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if not self.allows(_hostname(headers.get("host", ""))):
            await _respond(
                send,
                *_json_error(
                    421, types.INVALID_REQUEST,
                    "Misdirected request: the Host header does not name this server (DNS-rebinding protection); "
                    "use its address or localhost, or start it with --allowed-host NAME.",
                ),
            )  # fmt: skip
            return
        origin = headers.get("origin")
        if origin is not None:
            parts = urlsplit(origin)
            if parts.scheme not in ("http", "https") or not self.allows(_hostname(parts.netloc)):
                await _respond(
                    send,
                    *_json_error(403, types.INVALID_REQUEST, f"Forbidden: requests from the web origin {origin[:100]!r} are not accepted."),
                )  # fmt: skip
                return
        await self.app(scope, receive, send)


# -- bodies --------------------------------------------------------------------------------------------------------


class BodyGate:
    """Reads a POST body of at most ``limit`` bytes and refuses what the SDK would drop or word poorly.

    Over the limit: 413 with the request's id (read from the first bytes). Not a JSON-RPC message: 400 with a
    one-line reason (``wire.refusal``); a malformed notification gets 202 and nothing else, as the SDK would.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            head = await _head(receive)
            await _respond(send, *_refused(oversized(head, int(declared), self.limit), 413))
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                start = b"".join(chunks)[:4096] if chunks else chunk[:4096]
                await _respond(send, *_refused(oversized(start.decode("utf-8", "replace"), size, self.limit), 413))
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        checked = _problem(body)
        if isinstance(checked, tuple):
            await _respond(send, *checked)
            return
        # Read once: ``exchange`` takes the message as it is (the SDK's own paths parse the body again).
        scope[MESSAGE_KEY] = checked
        # A request that asks for progress or log messages may be answered on a stream (``BoundedSessions``); a
        # false positive (the words inside an argument) only lets its answer be a stream too.
        scope[_WANTS_STREAM] = _PROGRESS in body or _LOG_LEVEL in body
        replay = _replaying(body, receive)
        # A tools/list may be answered from a page encoded once (``splice``); a false positive costs nothing.
        await self.app(scope, replay, splicing(scope, send) if _LIST_TOOLS in body else send)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """``receive`` for an app after ``body`` was read: the body first, then whatever ``receive`` brings."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _head(receive: Receive) -> str:
    message = await receive()
    return message.get("body", b"")[:4096].decode("utf-8", "replace") if message["type"] == "http.request" else ""


def _refused(error: types.JSONRPCError, status: int) -> tuple[int, bytes]:
    return status, error.model_dump_json(by_alias=True, exclude_unset=True).encode()


def _problem(body: bytes) -> tuple[int, bytes] | types.JSONRPCMessage | None:
    """The response to a body that is not one JSON-RPC message; else the message, or None to let the SDK answer."""
    if not body.strip():
        return None  # the SDK's own parse error
    try:
        message = types.jsonrpc_message_adapter.validate_json(body, by_name=False)
    except ValidationError:
        error = refusal(body.decode("utf-8", "replace"))
        return (202, b"") if error is None else _refused(error, 400)
    if isinstance(message, types.JSONRPCNotification) and b'"id"' in body:
        error = refusal(body.decode("utf-8", "replace"), request=True)
        if error is not None:
            return _refused(error, 400)
    return message


#: The scope key ``BodyGate`` sets on a request that asked for progress or log messages.
_WANTS_STREAM = "pau_mcp.wants_stream"
_PROGRESS = b'"progressToken"'
_LOG_LEVEL = b'"io.modelcontextprotocol/logLevel"'
_LIST_TOOLS = b'"tools/list"'


# -- sessions ------------------------------------------------------------------------------------------------------


#: Who an opening request speaks for, as the per-credential cap counts sessions (``app.session_owner``).
SessionOwner = Callable[[Scope], Hashable]

#: The owner of the request being admitted, for ``_admit_session`` (which the SDK calls with the requestor alone).
_opening: contextvars.ContextVar[Hashable] = contextvars.ContextVar("pau_mcp_opening_owner", default=None)


class BoundedSessions(StreamableHTTPSessionManager):
    """The SDK's session manager with a cap per credential as well as overall, reclaiming idle sessions, and
    refusals that say what to do.

    A new session is admitted only while its credential (``owner``) holds fewer than ``per_owner`` sessions and
    the server fewer than ``max_sessions``. To make room, the credential's own session idle longest is closed
    first, however briefly it has been idle (only the credential itself loses by it); at the overall cap, failing
    that, the session idle longest of all, once idle for half of ``session_idle_timeout`` (or a minute, if
    shorter). Otherwise the opening request gets a 429 (its credential's cap) or a 503 (the server's).

    Relies on members the SDK keeps private (as of mcp 2.2 and 2.3): the manager's session table
    (``_server_instances``, ``_session_owners``), each transport's idle countdown (``idle_scope`` and
    ``_requests_in_flight``), ``_admit_session``, called under ``_session_creation_lock``, and ``_discard_session``,
    which every ended session goes through. pyproject allows any mcp 2.x from 2.3: the type gate checks these
    members' types (``@override`` fails when one is gone), and tests/pau_mcp/server/test_http_sdk_members.py checks
    them on the installed SDK and says what to do when one changed.

    Args:
        on_session_end: Called with the id of every session that ends (closed, idle, reclaimed).
        owner: The credential an opening request speaks for (it may answer None: a credential with no cap of its
            own); None: no cap per credential.
        per_owner: Sessions one credential may hold open at once; None for no limit but ``max_sessions``.
        **kwargs: The SDK manager's.
    """

    def __init__(
        self, *, on_session_end: Callable[[str], None] | None = None, owner: SessionOwner | None = None,
        per_owner: int | None = None, **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(**kwargs)
        self._on_session_end = on_session_end
        self._owner = owner
        self.per_owner = per_owner
        self._owner_of: dict[str, Hashable] = {}
        #: Each credential's open sessions, oldest first.
        self._owned: dict[Hashable, dict[str, None]] = {}

    def owned(self, owner: Hashable) -> int:
        """Sessions a credential holds open."""
        return len(self._owned.get(owner, ()))

    def _forget(self, session_id: str) -> None:
        owner = self._owner_of.pop(session_id, None)
        sessions = self._owned.get(owner)
        if sessions is not None:
            sessions.pop(session_id, None)
            if not sessions:
                del self._owned[owner]

    @override
    async def _discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        self._forget(session_id)
        await super()._discard_session(session_id, transport)
        if self._on_session_end is not None:
            self._on_session_end(session_id)

    def _reclaim(self, among: Iterable[str] | None = None, after_s: float | None = None) -> bool:
        """Close the session idle longest (of ``among``, or of all) if idle for ``after_s`` (default: half of
        ``session_idle_timeout``, at most a minute); True if one was closed."""
        assert self.session_idle_timeout is not None
        now = anyio.current_time()
        least_recent: tuple[float, str] | None = None
        for session_id in list(self._server_instances if among is None else among):
            transport = self._server_instances.get(session_id)
            if transport is None:
                continue
            scope = transport.idle_scope
            if scope is None or transport._requests_in_flight or math.isinf(scope.deadline):
                continue
            idle_since = scope.deadline - self.session_idle_timeout
            if least_recent is None or idle_since < least_recent[0]:
                least_recent = (idle_since, session_id)
        if after_s is None:
            after_s = min(_RECLAIM_AFTER_S, self.session_idle_timeout / 2)
        if least_recent is None or now - least_recent[0] < after_s:
            return False
        session_id = least_recent[1]
        transport = self._server_instances.pop(session_id)
        self._session_owners.pop(session_id, None)
        self._forget(session_id)
        assert transport.idle_scope is not None
        transport.idle_scope.cancel()  # its server task ends and terminates the transport
        log.info("session %s reclaimed after %.1f s idle to make room for a new one", session_id, now - least_recent[0])
        return True

    def _make_room(self, owner: Hashable) -> str | None:
        """Reclaim what a new session of ``owner`` needs; None if it may open one, else which cap holds it back
        (``credential`` or ``server``). Called under the creation lock."""
        own = self._owned.get(owner, {})
        # Owner None is a credential with no cap of its own (``app.session_owner``): only the server's applies.
        per_owner = self.per_owner if self._owner is not None and owner is not None else None
        if per_owner is not None and len(own) >= per_owner and not self._reclaim(own, after_s=0):
            return "credential"
        full = self.max_sessions is not None and len(self._server_instances) >= self.max_sessions
        if full and not self._reclaim(self._owned.get(owner, {}), after_s=0) and not self._reclaim():
            return "server"
        return None

    @override
    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        owner = _opening.get()
        if self._make_room(owner) is not None:
            return None  # another opening of the same credential took the room first: the SDK's own 503
        transport = super()._admit_session(requestor)
        if transport is not None and transport.mcp_session_id is not None:
            self._owner_of[transport.mcp_session_id] = owner
            self._owned.setdefault(owner, {})[transport.mcp_session_id] = None
        return transport

    @override
    async def _handle_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        # A 2026-07-28 request that asked for progress or log messages is answered in the SDK's deferred mode: in
        # JSON unless its handler sends something first, which commits the answer to a stream (SSE). Any other is
        # answered in JSON, as the handshake era's are unless ``json_response`` is off (a listen stream is always
        # one: the SDK sees to it).
        header = MCP_PROTOCOL_VERSION_HEADER.encode("ascii")
        version = next((v.decode("latin-1") for k, v in scope["headers"] if k == header), None)
        if version is None or version in HANDSHAKE_PROTOCOL_VERSIONS or self._task_group is None:
            await super()._handle_request(scope, receive, send)
            return
        json_only = not scope.get(_WANTS_STREAM, False)
        await handle_modern_request(
            self.app, self.security_settings, json_only, self._lifespan_state, scope, receive, send
        )

    @override
    async def _handle_stateless_request(
        self, protocol_version_hint: str | None, scope: Scope, receive: Receive, send: Send
    ) -> None:
        # A plain request answered in JSON is one exchange (``exchange``); the rest goes to the SDK, body and all.
        if not self.json_response:
            await super()._handle_stateless_request(protocol_version_hint, scope, receive, send)
            return
        body = await one_exchange(self.app, self._lifespan_state, protocol_version_hint, scope, receive, send)
        if body is not None:
            await super()._handle_stateless_request(protocol_version_hint, scope, _replaying(body, receive), send)

    @override
    async def _handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        if Headers(scope=scope).get(MCP_SESSION_ID_HEADER) is not None:
            await super()._handle_stateful_request(scope, receive, send)
            return
        owner = self._owner(scope) if self._owner is not None else None
        async with self._session_creation_lock:
            held_back = self._make_room(owner)
        if held_back == "credential":
            await _respond(
                send,
                *_json_error(
                    429, types.INVALID_REQUEST,
                    f"Too many open MCP sessions for this credential: it holds {self.owned(owner)}, the most one "
                    "session token or label may (--max-sessions-per-credential / PAU_MCP_MAX_SESSIONS_PER_CREDENTIAL "
                    "on the server), and each is busy with a request or an open stream. Reuse one, or end one you no "
                    "longer need (HTTP DELETE with its Mcp-Session-Id, or close its client), then retry; a new "
                    "session gives no new budget.",
                ),
                headers=[(b"retry-after", b"1")],
            )  # fmt: skip
            return
        if held_back == "server":
            assert self.session_idle_timeout is not None
            retry = max(1, round(min(_RECLAIM_AFTER_S, self.session_idle_timeout / 2)))
            await _respond(
                send,
                *_json_error(
                    503, types.INTERNAL_ERROR,
                    f"Too many open sessions: this server keeps at most {self.max_sessions} (--max-sessions / "
                    "PAU_MCP_MAX_SESSIONS) and none has been idle long enough to close; retry in "
                    f"{retry} s, and end sessions you no longer need (HTTP DELETE).",
                ),
                headers=[(b"retry-after", str(retry).encode())],
            )  # fmt: skip
            return
        token = _opening.set(owner)
        try:
            await super()._handle_stateful_request(scope, receive, send)
        finally:
            _opening.reset(token)


# -- the app -------------------------------------------------------------------------------------------------------


def http_app(
    server: Server[Any], *, bound: str, stateless: bool, message_bytes: int, max_sessions: int,
    session_idle_s: float, allowed_hosts: Iterable[str] = (), token_verifier: Any = None,
    on_session_end: Callable[[str], None] | None = None, sessions_per_credential: int | None = None,
    session_owner: SessionOwner | None = None, handshake_streams: bool = False, signin: SignIn | None = None,
) -> ASGIApp:  # fmt: skip
    """The Streamable HTTP app at ``/mcp``, with every limit above but the connection guard.

    Answers are JSON in the handshake era (about 0.7 ms less per call than a stream) unless ``handshake_streams``;
    in the 2026-07-28 era they are JSON unless the handler sends something before its answer.

    Args:
        server: The MCP server.
        bound: The address the server listens on (chooses the hosts it answers to).
        stateless: No MCP sessions for handshake-era clients either (budgets are the credential's in every mode).
        message_bytes: The largest request body.
        max_sessions: Sessions open at once.
        session_idle_s: Seconds after which an idle session is closed.
        allowed_hosts: More host names to answer to (a reverse proxy's).
        token_verifier: Bearer-token check; None serves without authentication.
        on_session_end: Called with the id of every MCP session that ends.
        sessions_per_credential: Sessions one credential may hold open at once; None for no limit of its own.
        session_owner: The credential a request that opens a session speaks for (``app.session_owner``).
        handshake_streams: Answer handshake-era requests on a stream (SSE), so that a tool can send progress and
            log messages and put requests to its client before it answers (the fixture suites' tools do).
        signin: Sign-in (``--auth oauth``) in place of ``token_verifier``: its gate in front of ``/mcp`` (which still
            takes the main token and session tokens) and its metadata routes.
    """
    manager = BoundedSessions(
        on_session_end=on_session_end,
        owner=session_owner,
        per_owner=sessions_per_credential,
        app=server,
        json_response=not handshake_streams,
        stateless=stateless,
        # The Host and Origin checks are HostGate's, for every address; the SDK's cover only a few.
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_request_body_size=message_bytes + 1,
        session_idle_timeout=session_idle_s,
        max_sessions=max_sessions,
    )
    endpoint: ASGIApp = BodyGate(StreamableHTTPASGIApp(manager), message_bytes)
    middleware: list[Middleware] = []
    if token_verifier is not None:
        middleware = [
            Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(token_verifier)),
            Middleware(AuthContextMiddleware),
        ]
        # The body is read only once the token is checked: anonymous clients cannot make the server buffer.
        endpoint = RequireAuthMiddleware(endpoint, ["pau"], None)
    routes = [Route("/mcp", endpoint=endpoint)]
    if signin is not None:
        # The body is read only once the token is checked, as above.
        routes = [
            Route("/mcp", endpoint=signin.protect(AuthContextMiddleware(endpoint), needed_scope)),
            *signin.routes(),
        ]
    # Discovery before connecting (the experimental Server Card): no credential needed, no tool named.
    card = card_endpoint(server, token_verifier is not None or signin is not None)
    routes.append(Route("/server-card", endpoint=card, methods=["GET"]))
    app = Starlette(routes=routes, middleware=middleware, lifespan=lambda _: manager.run())
    # Outermost, so that a rebound request is refused before authentication.
    return HostGate(app, bound, allowed_hosts)
