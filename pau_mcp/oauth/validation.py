"""Access tokens checked as a resource server must (OAuth 2.1 section 5.2, RFC 9068, RFC 8707, RFC 7662).

A token is either a JWT, verified with the issuer's published keys (``issuer.IssuerKeys``) by joserfc, or, when the
server is given introspection credentials, whatever the issuer issued, asked of its introspection endpoint on every
request (so a revoked token is refused at once). Either way its claims must name this issuer (``iss``), this resource
(``aud``, the server's canonical URL), be within their time (``exp``, ``nbf``, with ``clock_skew_s`` of leeway) and
name a subject (``sub``, or the ``client_id`` of a client signed in as itself). A refusal says why in one line.

Why joserfc: it is the JOSE library of the Authlib project, maintained, typed, and what Authlib's own ``jose``
module now defers to; a resource server needs JWS and JWK only, not an OAuth client or server framework. It refuses
``alg: none`` and takes an explicit list of algorithms; this module allows asymmetric ones only, so a token signed
with a public key as an HMAC secret can never verify.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx2

from .fetching import FetchError, fetch_json
from .issuer import MAX_ANSWER_BYTES, IssuerKeys, UnknownKey

__all__ = [
    "ALGORITHMS",
    "MAX_SUBJECT_CHARS",
    "MAX_TOKEN_BYTES",
    "AuthServerDown",
    "Grant",
    "ResourceServer",
    "TokenRefused",
    "canonical",
]

#: Signature algorithms accepted: asymmetric only (RFC 9068 names RS256 as the one every server must support).
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
#: The longest bearer token read; access tokens are a few KiB at most.
MAX_TOKEN_BYTES = 16 * 1024
#: The longest subject kept as a budget's key.
MAX_SUBJECT_CHARS = 255


class TokenRefused(ValueError):
    """The token is not valid here (HTTP 401); the message is one line saying why."""


class AuthServerDown(RuntimeError):
    """The token could not be checked because the authorization server could not be asked (HTTP 503)."""


@dataclass(frozen=True)
class Grant:
    """What a valid access token grants.

    Attributes:
        subject: Who it speaks for: its ``sub`` (a person, or a client signed in as itself); the budget's key.
        client_id: The OAuth client it was issued to, if it says.
        scopes: The scopes it carries, as issued.
        expires_at: Its ``exp``, seconds since the epoch.
    """

    subject: str
    client_id: str | None
    scopes: frozenset[str]
    expires_at: int | None


def canonical(url: str) -> str:
    """A resource or audience URL as compared: scheme and host in lower case, no default port, no trailing slash."""
    parts = urlsplit(url.strip())
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    port = parts.port if parts.port not in ({"http": 80, "https": 443}.get(scheme), None) else None
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}" + (f"?{parts.query}" if parts.query else "")


class ResourceServer:
    """Checks the access tokens of one resource (an MCP endpoint, or the scorer) issued by one issuer.

    Args:
        issuer: The issuer identifier, exactly as the authorization server states it.
        resource: This resource's canonical URL: the audience every token must name.
        http: The HTTP client to ask the issuer with.
        clock_skew_s: Leeway for ``exp``, ``nbf`` and ``iat``.
        introspection: ``(client_id, secret)`` to check every token by RFC 7662 introspection instead of as a JWT.
        timeout_s: Time limit of one request to the issuer.
    """

    def __init__(
        self, issuer: str, resource: str, http: httpx2.AsyncClient, *, clock_skew_s: float = 60.0,
        introspection: tuple[str, str] | None = None, timeout_s: float = 5.0,
    ) -> None:  # fmt: skip
        self.issuer = issuer
        self.resource = resource
        self._audience = canonical(resource)
        self._http = http
        self._skew = clock_skew_s
        self._introspection = introspection
        self._timeout_s = timeout_s
        self.keys = IssuerKeys(issuer, http, timeout_s=timeout_s)

    async def check(self, token: str, now: float | None = None) -> Grant:
        """What the token grants, if it is valid for this resource now.

        Raises:
            TokenRefused: it is not (one line saying why).
            AuthServerDown: introspection could not reach the authorization server.
        """
        if len(token) > MAX_TOKEN_BYTES:
            raise TokenRefused(f"the token is {len(token):,} characters; this server reads at most {MAX_TOKEN_BYTES:,}")
        if self._introspection is not None:
            claims = await self._introspect(token)
        else:
            claims = await self._verify_jwt(token)
        return self._grant(claims, time.time() if now is None else now)

    async def _verify_jwt(self, token: str) -> dict[str, Any]:
        header = _header(token)
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            raise TokenRefused(
                f"the token's signature algorithm {str(alg)[:20]!r} is not accepted (signed tokens only: "
                f"{', '.join(ALGORITHMS)})"
            )
        kid = header.get("kid")
        try:
            key = await self.keys.key(kid if isinstance(kid, str) else None)
        except UnknownKey as exc:
            raise TokenRefused(str(exc)) from None
        from joserfc import jwt  # here, not at import: a server without OAuth never needs it (nor its 50 ms)
        from joserfc.errors import JoseError

        try:
            decoded = jwt.decode(token, key, algorithms=[alg])
        except JoseError as exc:
            raise TokenRefused(f"the token's signature does not verify with the issuer's key ({exc.error})") from None
        except (ValueError, TypeError):
            raise TokenRefused("the token is not a well-formed signed JWT") from None
        return dict(decoded.claims)

    async def _introspect(self, token: str) -> dict[str, Any]:
        try:
            metadata = await self.keys.metadata()
        except FetchError as exc:
            raise AuthServerDown(str(exc)) from None
        if metadata.introspection_endpoint is None:
            raise AuthServerDown("the issuer's metadata names no introspection_endpoint")
        assert self._introspection is not None
        try:
            answer = await fetch_json(
                self._http, metadata.introspection_endpoint, limit=MAX_ANSWER_BYTES, timeout_s=self._timeout_s,
                form={"token": token, "token_type_hint": "access_token"}, auth=self._introspection,
            )  # fmt: skip
        except FetchError as exc:
            if exc.status == 400:  # the server would not consider this token (RFC 7662 section 2.3)
                raise TokenRefused(
                    f"the authorization server's introspection refused the token ({exc.detail or 'HTTP 400'})"
                ) from None
            raise AuthServerDown(f"token introspection failed: {exc}") from None
        if answer.get("active") is not True:
            raise TokenRefused(
                "the token is not active: the authorization server says it is revoked, expired or unknown"
            )
        answer.setdefault("iss", self.issuer)  # RFC 7662 makes it optional: the one issuer asked vouches for it
        return answer

    def _grant(self, claims: dict[str, Any], now: float) -> Grant:
        if claims.get("iss") != self.issuer:
            raise TokenRefused(
                f"the token was issued by {str(claims.get('iss'))[:200]!r}, not this server's issuer {self.issuer!r}"
            )
        audiences = claims.get("aud")
        listed = [audiences] if isinstance(audiences, str) else audiences if isinstance(audiences, list) else []
        if not any(isinstance(a, str) and canonical(a) == self._audience for a in listed[:50]):
            shown = ", ".join(repr(str(a)[:100]) for a in listed[:3]) or "none"
            raise TokenRefused(
                f"the token is for the audience {shown}, not this resource {self.resource!r}: request it with "
                f"resource={self.resource} (RFC 8707)"
            )
        _in_time(claims, now, self._skew)
        client_id = claims.get("client_id")
        client = client_id if isinstance(client_id, str) and client_id else None
        subject = claims.get("sub")
        who = subject if isinstance(subject, str) and subject else client
        if who is None:
            raise TokenRefused("the token names no subject (sub) and no client_id, so it has no budget to spend")
        if len(who) > MAX_SUBJECT_CHARS or not who.isprintable():
            raise TokenRefused(f"the token's subject is longer than {MAX_SUBJECT_CHARS} characters or not printable")
        return Grant(subject=who, client_id=client, scopes=_scopes(claims), expires_at=_number(claims.get("exp")))


def _header(token: str) -> dict[str, Any]:
    """A compact JWS's protected header, read (not trusted) to choose its key."""
    parts = token.split(".")
    if len(parts) != 3:
        what = "an encrypted JWT (JWE)" if len(parts) == 5 else "not a JWT"
        raise TokenRefused(f"the token is {what}; this server takes signed JWT access tokens")
    try:
        header = json.loads(base64.urlsafe_b64decode(parts[0] + "=" * (-len(parts[0]) % 4)))
    except (ValueError, binascii.Error, UnicodeDecodeError, RecursionError):
        raise TokenRefused("the token's header is not base64url JSON") from None
    if not isinstance(header, dict):
        raise TokenRefused("the token's header is not a JSON object")
    return header


def _number(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _in_time(claims: dict[str, Any], now: float, skew: float) -> None:
    expires, not_before, issued = (_number(claims.get(name)) for name in ("exp", "nbf", "iat"))
    if expires is None:
        raise TokenRefused("the token has no expiry (exp); this server takes only tokens that expire")
    if expires + skew <= now:
        raise TokenRefused(f"the token expired {int(now - expires)} s ago; sign in again or refresh it")
    if not_before is not None and not_before - skew > now:
        raise TokenRefused(f"the token is not valid for another {int(not_before - now)} s (nbf)")
    if issued is not None and issued - skew > now:
        raise TokenRefused("the token says it was issued in the future (iat); check the clocks")


def _scopes(claims: dict[str, Any]) -> frozenset[str]:
    """The scopes of ``scope`` (RFC 9068, RFC 7662: space-separated) or ``scp`` (a list, as some servers write it)."""
    for name in ("scope", "scp"):
        value = claims.get(name)
        if isinstance(value, str):
            return frozenset(value.split()[:100])
        if isinstance(value, list):
            return frozenset(str(s) for s in value[:100])
    return frozenset()
