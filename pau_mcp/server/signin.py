"""Sign-in at the MCP endpoint (``serve --auth oauth``): the resource server built from settings, the scope each
request needs, and the credential a signed-in token spends.

A signed-in token's budget is its **subject's**: the token's ``sub`` (a person, a team's account, or a client signed
in as itself), one credential of the kind ``subject`` in the server's run, whatever host, OAuth client, replica or
token refresh carries it. The run store records the subject (and, with the session, the OAuth client that first
spoke for it), never the token. A token with ``operate`` may also name any label and run, as the main token's holder
does; without it, naming one is refused (403 at the HTTP edge, a JSON-RPC error for ``_meta``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp.server.auth.provider import AccessToken
from mcp.shared.exceptions import MCPError
from starlette.datastructures import Headers, QueryParams
from starlette.types import Scope

from ..config import Settings
from ..oauth import EXPLORE, OPERATE, SignIn, sign_in_from, signed_in
from .sessions import Credential

__all__ = ["needed_scope", "sign_in", "subject_credential"]


def sign_in(settings: Settings, other: Any) -> Callable[[str], SignIn] | None:
    """What ``--auth oauth`` puts in front of the MCP endpoint, built once the server's URL is known; None without it.

    Args:
        settings: The server's settings (``--issuer``, ``--resource``, introspection, ``--clock-skew``).
        other: The server's own bearer check (``app.verify_bearer``): the main token and session tokens still work.
    """
    return sign_in_from(settings, other.verify_token, "pau-mcp hidden functions")


def needed_scope(scope: Scope) -> str:
    """The scope a request at the MCP endpoint needs: ``operate`` when its URL or headers name a label or run (choosing
    a budget, as the main token's holder may), else ``explore``."""
    query = QueryParams(scope.get("query_string", b""))
    headers = Headers(scope=scope)
    named = query.get("session") or query.get("run") or headers.get("x-pau-session") or headers.get("x-pau-run")
    return OPERATE if named else EXPLORE


def subject_credential(access: AccessToken | None, label: str | None, run: str | None) -> Credential | None:
    """The credential a signed-in request spends: its subject's, unless a token with ``operate`` names a label or run
    (then None: the label is the credential, as for the main token). None for requests not signed in.

    Raises:
        MCPError: a token without ``operate`` names a label or run (in ``_meta``; the HTTP edge refused the others).
    """
    subject = signed_in(access)
    if subject is None:
        return None
    if label is None and run is None:
        return Credential("subject", subject)
    assert access is not None
    if OPERATE not in access.scopes:
        raise MCPError(
            types.INVALID_REQUEST,
            "naming a session label or run needs the 'operate' scope; this token spends its own subject's budget: "
            "leave the label and run out",
        )
    return None
