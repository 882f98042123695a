"""Sign-in at the HTTP edge of a resource: the RFC 9728 metadata document, and a gate that lets a request through
only with a valid bearer token holding the scope it needs, answering every other one as the MCP authorization
specification says (401 with ``WWW-Authenticate: Bearer resource_metadata=..., scope=...``; 403 with
``error="insufficient_scope"`` and the scope needed; 400 for a malformed ``Authorization`` header; 503 when the
authorization server cannot be asked). Every refusal's description is one line, also in the JSON body.

The gate puts the SDK's ``AuthenticatedUser`` in the ASGI scope, so everything behind it (the SDK's session
ownership, ``AuthContextMiddleware``, the server's credentials) reads the token as it reads the SDK's own bearer auth.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url, cors_middleware
from mcp.shared.auth import ProtectedResourceMetadata
from pydantic import AnyHttpUrl
from starlette.authentication import AuthCredentials
from starlette.datastructures import Headers
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .scopes import SCOPES, effective
from .validation import MAX_TOKEN_BYTES, AuthServerDown, ResourceServer, TokenRefused

__all__ = ["SIGNED_IN", "OtherBearer", "SignIn", "signed_in"]

log = logging.getLogger("pau_mcp.oauth")

#: The claim marking an ``AccessToken`` the gate made from a signed-in token (its value: the subject).
SIGNED_IN = "dev.pau-mcp/subject"

#: The project's own bearer credentials (the main token, session tokens), tried before sign-in: an ``AccessToken``
#: for one of them, else None.
OtherBearer = Callable[[str], Awaitable[AccessToken | None]]

#: The scope a request needs, chosen from the request (``SCOPES``' names).
Needed = Callable[[Scope], str]

_TOKEN68 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/=")


def signed_in(access: AccessToken | None) -> str | None:
    """The subject of an ``AccessToken`` the gate made from a signed-in token; None for any other (or none)."""
    if access is None or not access.claims:
        return None
    subject = access.claims.get(SIGNED_IN)
    return subject if isinstance(subject, str) else None


def _quoted(text: str) -> str:
    """``text`` as an HTTP quoted-string's content: printable ASCII only, quotes and backslashes escaped."""
    cleaned = "".join(c if " " <= c <= "~" else "?" for c in text[:400])
    return cleaned.replace("\\", "\\\\").replace('"', '\\"')


class SignIn:
    """One resource's sign-in: its resource server, its metadata, and the gate in front of its endpoints.

    Args:
        server: Checks tokens for this resource.
        other: The resource's own bearer credentials, accepted beside signed-in tokens; None for none.
        name: The resource's human-readable name, in its metadata.
    """

    def __init__(self, server: ResourceServer, other: OtherBearer | None = None, name: str = "pau-mcp") -> None:
        self.server = server
        self.other = other
        self.metadata_url = str(build_resource_metadata_url(AnyHttpUrl(server.resource)))
        # Validated from text, so that the URLs keep their exact form (the model adds no trailing slash to them).
        self.metadata = ProtectedResourceMetadata.model_validate(
            {
                "resource": server.resource,
                "authorization_servers": [server.issuer],
                "scopes_supported": list(SCOPES),
                "bearer_methods_supported": ["header"],
                "resource_name": name,
            }
        )

    def routes(self) -> list[Route]:
        """The metadata document at RFC 9728's well-known path for this resource (with the resource's path appended,
        as MCP clients ask first) and at the bare well-known path."""
        endpoint = cors_middleware(ProtectedResourceMetadataHandler(self.metadata).handle, ["GET", "OPTIONS"])
        paths = dict.fromkeys([AnyHttpUrl(self.metadata_url).path or "/", "/.well-known/oauth-protected-resource"])
        return [Route(path, endpoint=endpoint, methods=["GET", "OPTIONS"]) for path in paths]

    def protect(self, app: ASGIApp, needed: Needed | str) -> ASGIApp:
        """``app`` behind the gate: requests get through with a token holding ``needed`` (a scope, or a function
        choosing it per request), or with one of the resource's own bearer credentials."""
        return _Gate(self, app, needed if callable(needed) else (lambda _scope: needed))

    async def _admit(self, scope: Scope, needed: str) -> tuple[int, dict[str, Any], list[str]] | None:
        """None after putting the token's user in ``scope``; else the refusal: status, body, challenge params."""
        header = Headers(scope=scope).get("authorization")
        if header is None or not header[:7].lower().startswith("bearer"):
            return 401, {"error": "invalid_token", "error_description": _missing(header)}, []
        token = header[7:].strip() if header[6:7] == " " else ""
        if not token or not set(token) <= _TOKEN68:
            line = "the Authorization header must be 'Bearer ' followed by one token (RFC 6750 token68 characters)"
            return 400, {"error": "invalid_request", "error_description": line}, ['error="invalid_request"']
        if len(token) > MAX_TOKEN_BYTES:
            line = f"the token is {len(token):,} characters; this server reads at most {MAX_TOKEN_BYTES:,}"
            return 401, _invalid(line), _invalid_params(line)
        if self.other is not None:
            access = await self.other(token)
            if access is not None:
                _let_in(scope, access)
                return None
        try:
            grant = await self.server.check(token)
        except TokenRefused as exc:
            log.debug("token refused: %s", exc)
            return 401, _invalid(str(exc)), _invalid_params(str(exc))
        except AuthServerDown as exc:
            log.warning("a token could not be checked: %s", exc)
            line = f"the authorization server could not be asked about this token ({exc}); retry shortly"
            return 503, {"error": "temporarily_unavailable", "error_description": line}, []
        held = effective(grant.scopes)
        if needed not in held:
            line = f"this needs the scope {needed!r} ({SCOPES[needed]}); the token has {' '.join(sorted(grant.scopes)) or 'none'}"
            params = ['error="insufficient_scope"', f'error_description="{_quoted(line)}"']
            return 403, {"error": "insufficient_scope", "error_description": line, "scope": needed}, params
        _let_in(
            scope,
            AccessToken(
                token=token, client_id=grant.client_id or grant.subject, scopes=sorted(held),
                expires_at=grant.expires_at, resource=self.server.resource, subject=grant.subject,
                claims={"iss": self.server.issuer, SIGNED_IN: grant.subject},
            ),
        )  # fmt: skip
        return None

    def challenge(self, needed: str, params: list[str]) -> str:
        """The ``WWW-Authenticate`` value of a refusal."""
        return "Bearer " + ", ".join(
            [*params, f'resource_metadata="{_quoted(self.metadata_url)}"', f'scope="{needed}"']
        )


class _Gate:
    """``SignIn.protect``'s ASGI app (a class: Starlette routes a plain function as a request handler)."""

    def __init__(self, signin: SignIn, app: ASGIApp, needed: Needed) -> None:
        self.signin = signin
        self.app = app
        self.needed = needed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        needed = self.needed(scope)
        refusal = await self.signin._admit(scope, needed)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, body, params = refusal
        await _send(send, status, body, self.signin.challenge(needed, params) if status != 503 else None)


def _missing(header: str | None) -> str:
    if header is None:
        return "sign in: send Authorization: Bearer <access token> (the authorization server is named in resource_metadata)"
    return "this server takes Bearer tokens only: send Authorization: Bearer <access token>"


def _invalid(line: str) -> dict[str, Any]:
    return {"error": "invalid_token", "error_description": line}


def _invalid_params(line: str) -> list[str]:
    return ['error="invalid_token"', f'error_description="{_quoted(line)}"']


def _let_in(scope: Scope, access: AccessToken) -> None:
    scope["user"] = AuthenticatedUser(access)
    scope["auth"] = AuthCredentials(access.scopes)


async def _send(send: Send, status: int, body: dict[str, Any], challenge: str | None) -> None:
    data = json.dumps(body, ensure_ascii=True).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    if challenge is not None:
        headers.append((b"www-authenticate", challenge.encode("latin-1")))
    if status == 503:
        headers.append((b"retry-after", b"5"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
