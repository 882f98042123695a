"""The MCP server: tools, resources and prompts from the catalog, over stdio or Streamable HTTP.

Built on the SDK's low-level ``Server``: tool schemas come from data, so they
are published verbatim and arguments are validated here (``MethodService``).
"""

from __future__ import annotations

import hmac
import json
import uuid
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

from mcp.server import NotificationOptions, Server
from starlette.datastructures import Headers, QueryParams
from starlette.types import Scope

if TYPE_CHECKING:
    from mcp.server.auth.provider import TokenVerifier

from .. import __version__
from ..limits import PAGE_SIZE, ProtocolLimits
from ..oauth import OPERATE, signed_in
from .features import Features
from .fixtures import FixtureSuite
from .handlers import Handlers
from .service import MethodService
from .sessions import DEFAULT_LABEL, Sessions
from .slots import CallSlots
from .tokens import SessionToken, TokenSigner, looks_like_session_token
from .tool_pages import ToolPages

__all__ = ["PAGE_SIZE", "build_server", "session_owner", "verify_bearer"]

_INSTRUCTIONS = (
    "Each fn_... tool is a hidden Python function you cannot read. Call it with inputs you choose to work out "
    "what it does, then call `submit` with its tool name and your description. Calls are limited per function "
    "and per credential: over stdio that is this server process, so a client that starts a new server for "
    "every call starts its count again each time (keep one server running); over HTTP it is your session "
    "token, or the label your requests name, whatever connections or sessions carry them. Every result has a "
    "`status`: over_budget means the function was not run and you should submit."
)

#: What a server built without limits gives: 100 items a list page, no limit on calls at once.
_NO_LIMITS = ProtocolLimits()


def session_owner(tokens: TokenSigner | None, cap_anonymous: bool = True) -> Callable[[Scope], Hashable]:
    """Who a request that opens a handshake-era MCP session speaks for, as the cap on sessions per credential counts.

    The credential ``caller`` resolves for the request's budget: a session token (verified by the SDK's auth, or
    here on a server without ``--token``) is its label in its run; any other request is the label and run it
    names on the URL or in headers (the main token's default label without one). An opening request is not
    refused here for naming them badly: its later requests are, by ``caller``.

    Args:
        tokens: Verifies session tokens on a server without ``--token``; None accepts none.
        cap_anonymous: False on a loopback server without ``--token``: a request with no session token that names
            no label and no run speaks for no capped credential (owner None). Everyone who can reach that server
            holds its main token and could name a label of 8 sessions for each client anyway, so a cap there would
            stop only the ordinary local clients (an Inspector, a desktop host, agents holding GET streams, the
            conformance suite) that all share the one anonymous credential.
    """

    def owner(scope: Scope) -> Hashable:
        access = getattr(scope.get("user"), "access_token", None)
        subject = signed_in(access)
        if subject is not None and access is not None and OPERATE not in access.scopes:
            return ("subject", None, subject)
        token: SessionToken | None = None
        if subject is None and access is not None and access.claims:
            token = SessionToken.from_claims(access.claims)
        elif access is None and tokens is not None:
            header = Headers(scope=scope).get("authorization", "")
            credential = header[7:].strip() if header[:7].lower() == "bearer " else ""
            token = tokens.verify(credential) if looks_like_session_token(credential) else None
        if token is not None:
            return ("token", token.run, token.label)
        query = QueryParams(scope.get("query_string", b""))
        headers = Headers(scope=scope)
        label = query.get("session") or headers.get("x-pau-session") or DEFAULT_LABEL
        run = query.get("run") or headers.get("x-pau-run")
        if not cap_anonymous and label == DEFAULT_LABEL and not run:
            return None
        # Kept while the session is open: no longer than a valid label (longer ones are refused at first use).
        return ("label", run[:_LABEL_CHARS] if run else None, label[:_LABEL_CHARS])

    return owner


#: The longest label or run name (``sessions.label_problem``), and so the longest kept to count sessions by.
_LABEL_CHARS = 128


def verify_bearer(expected: str | None, tokens: TokenSigner | None = None) -> TokenVerifier:
    """A token verifier for the SDK's bearer auth: the main token, or any valid session token of ``tokens``.

    A session token's principal is its label and run, so the SDK keeps each MCP session to the credential
    that opened it; the main token is one principal.
    """
    from mcp.server.auth.provider import AccessToken

    class _Verifier:
        async def verify_token(self, token: str) -> AccessToken | None:
            if expected is not None and hmac.compare_digest(token.encode(), expected.encode()):
                return AccessToken(token=token, client_id="pau-mcp-agent", scopes=["pau"])
            session = tokens.verify(token) if tokens is not None else None
            if session is None:
                return None
            return AccessToken(
                token=token,
                client_id="pau-mcp-session",
                scopes=["pau"],
                subject=json.dumps([session.run, session.label]),
                expires_at=session.expires_at,
                claims=session.claims(),
            )

    return _Verifier()


def build_server(
    service: MethodService,
    sessions: Sessions,
    limits: ProtocolLimits = _NO_LIMITS,
    *,
    tokens: TokenSigner | None = None,
    stateless: bool = False,
    fixtures: FixtureSuite | None = None,
    state_key: str | None = None,
    stdio_key: str | None = None,
) -> Server[Any]:
    """The low-level MCP server for one catalog, in both protocol eras.

    Every request is resolved once, here at the edge, to the credential that spends its budget and to what it
    sees (``Handlers.caller``); nothing below knows which era or transport it came by. Beside the catalog's tools it
    serves a fixture suite's (``fixture_service``), the Tasks extension (``tasks``: a long call answered with a task,
    for a client that negotiated it) and ``subscriptions/listen`` streams (``listen``).

    Args:
        service: Runs calls and submissions.
        sessions: The sessions credentials own, and the narrowing of open connections.
        limits: Items per list page and the calls of one credential at once (``ProtocolLimits.from_settings``);
            the default: 100 items a page and no limit on calls.
        tokens: Verifies session tokens (the deployment's signer); None accepts none.
        stateless: HTTP without MCP sessions (``--stateless``): no request has a connection to narrow with ``open``.
        fixtures: A fixture suite to serve beside the catalog (``serve --suite conformance``); None: none.
        state_key: The secret the 2026-07-28 era's ``requestState`` is sealed with (the deployment key, so replicas
            read each other's); None: a key of this process alone.
        stdio_key: The session key of a stdio server (its process); None: a new one.
    """
    features = Features(service.store, fixtures, state_key)
    handlers = Handlers(
        service, sessions, CallSlots(running=limits.calls_running, waiting=limits.calls_waiting), features,
        tokens=tokens, stateless=stateless, process_key=stdio_key or f"stdio-{uuid.uuid4().hex[:12]}",
        page_size=limits.page_size,
    )  # fmt: skip
    server = Server(
        "pau-mcp",
        version=__version__,
        title="pau-mcp hidden functions",
        instructions=_INSTRUCTIONS,
        get_tool_input_schema=handlers.input_schema,
        on_list_tools=handlers.list_tools,
        on_call_tool=handlers.call_tool,
        on_list_resources=handlers.list_resources,
        on_read_resource=handlers.read_resource,
        on_list_prompts=handlers.list_prompts,
        on_get_prompt=handlers.get_prompt,
    )
    features.install(server, handlers.caller, handlers.seen, handlers.process_key, limits.page_size)
    server.middleware.append(ToolPages(handlers.page))  # innermost: a span still covers a page answered again
    return server


def initialization_options(server: Server[Any]) -> Any:
    """Initialization options announcing tools/list_changed."""
    return server.create_initialization_options(NotificationOptions(tools_changed=True))
