"""The authorization server as a resource server knows it: its metadata (RFC 8414, or OpenID Connect discovery) and
its signing keys (the JWKS its metadata names), fetched when first needed and cached.

The key set is fetched again when a token names a key id it does not hold (the issuer rotated its keys), at most
once per ``refetch_after_s`` whatever tokens arrive, and when it is older than ``max_age_s``. A fetch that fails
keeps the keys held: tokens signed with them keep working while the issuer is unreachable, and a token naming an
unknown key is refused. One fetch runs at a time; requests that need a key it may bring wait for it (within its
time limit), and requests whose key is held never wait. A cache serves one event loop (the server's).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias
from urllib.parse import urlsplit

import anyio
import httpx2

if TYPE_CHECKING:  # joserfc (with cryptography) is imported when a key set is read: a server without OAuth never does
    from joserfc.jwk import ECKey, OKPKey, RSAKey

from .fetching import FetchError, fetch_json

__all__ = ["IssuerKeys", "IssuerMetadata", "PublicKey", "UnknownKey"]

log = logging.getLogger("pau_mcp.oauth")

#: The answers read from the issuer: its metadata and key sets are a few KiB; anything past this is refused.
MAX_ANSWER_BYTES = 256 * 1024
#: Keys kept from one key set.
MAX_KEYS = 64

PublicKey: TypeAlias = "ECKey | RSAKey | OKPKey"


class UnknownKey(LookupError):
    """No key of the issuer's key set verifies this token; the message says why, in one line."""


@dataclass(frozen=True)
class IssuerMetadata:
    """What the issuer's metadata says that a resource server needs.

    Attributes:
        issuer: Its issuer identifier, as its metadata states it (the configured one, exactly).
        jwks_uri: Where its signing keys are.
        introspection_endpoint: Its RFC 7662 token introspection endpoint, if it has one.
    """

    issuer: str
    jwks_uri: str | None
    introspection_endpoint: str | None


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be: RFC 8414's well-known URL (inserted before the issuer's path), then
    OpenID Connect discovery's (appended to it)."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")
    origin = f"{parts.scheme}://{parts.netloc}"
    return [
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{origin}{path}/.well-known/openid-configuration",
    ]


async def discover(http: httpx2.AsyncClient, issuer: str, timeout_s: float) -> IssuerMetadata:
    """The issuer's metadata, from the first of its well-known URLs that answers.

    Raises:
        FetchError: none answered, or the metadata names another issuer (RFC 8414 section 3.3).
    """
    problems = []
    for url in metadata_urls(issuer):
        try:
            data = await fetch_json(http, url, limit=MAX_ANSWER_BYTES, timeout_s=timeout_s)
        except FetchError as exc:
            problems.append(str(exc))
            continue
        if data.get("issuer") != issuer:
            raise FetchError(
                f"{url} names the issuer {str(data.get('issuer'))[:200]!r}, not {issuer!r}: give --issuer exactly as "
                "the authorization server writes it"
            )
        return IssuerMetadata(issuer, _url(data.get("jwks_uri")), _url(data.get("introspection_endpoint")))
    raise FetchError(f"the issuer's metadata could not be read ({'; '.join(problems)})")


def _url(value: Any) -> str | None:
    return value if isinstance(value, str) and value.startswith(("https://", "http://")) else None


class IssuerKeys:
    """The issuer's metadata and signing keys, cached (see the module's docstring).

    Args:
        issuer: The issuer identifier.
        http: The HTTP client to ask it with.
        timeout_s: Time limit of one fetch (metadata or keys).
        refetch_after_s: Least time between two fetches of the key set.
        max_age_s: Key sets older than this are fetched again at the next token.
    """

    def __init__(
        self, issuer: str, http: httpx2.AsyncClient, *, timeout_s: float = 5.0, refetch_after_s: float = 30.0,
        max_age_s: float = 3600.0,
    ) -> None:  # fmt: skip
        self.issuer = issuer
        self._http = http
        self._timeout_s = timeout_s
        self._refetch_after_s = refetch_after_s
        self._max_age_s = max_age_s
        self._metadata: IssuerMetadata | None = None
        self._keys: dict[str, PublicKey] = {}
        self._fetched_at = -float("inf")  # last successful key set
        self._tried_at = -float("inf")  # last attempt, successful or not
        self._problem: str | None = None
        self._lock = anyio.Lock()
        self._fetching: anyio.Event | None = None
        self.fetches = 0

    async def metadata(self) -> IssuerMetadata:
        """The issuer's metadata (read once; retried at the next need if it failed).

        Raises:
            FetchError: it could not be read.
        """
        if self._metadata is None:
            async with self._lock:
                if self._metadata is None:
                    self._metadata = await discover(self._http, self.issuer, self._timeout_s)
        return self._metadata

    async def key(self, kid: str | None) -> PublicKey:
        """The public key a token's header names (by ``kid``; without one, the key set's only signing key).

        Raises:
            UnknownKey: the key set does not hold it, and could not be fetched again or did not have it either.
        """
        found = self._lookup(kid)
        if found is not None and time.monotonic() - self._fetched_at <= self._max_age_s:
            return found
        if self._fetching is not None:  # a fetch is under way: its answer is this request's
            await self._fetching.wait()
        elif time.monotonic() - self._tried_at >= self._refetch_after_s:
            await self._refresh()
        found = self._lookup(kid) or found
        if found is not None:
            return found
        named = f"key id {kid[:64]!r}" if kid else "no key id, and the issuer has several keys"
        why = f"; the key set could not be fetched: {self._problem}" if self._problem else ""
        raise UnknownKey(f"the token names {named}, which is not among the issuer's signing keys{why}")

    def _lookup(self, kid: str | None) -> PublicKey | None:
        if kid is not None:
            return self._keys.get(kid)
        return next(iter(self._keys.values())) if len(self._keys) == 1 else None

    async def _refresh(self) -> None:
        """Fetch the key set (one fetch at a time: the event loop runs no other task between the check of
        ``_fetching`` in ``key`` and its setting here)."""
        done = self._fetching = anyio.Event()
        self._tried_at = time.monotonic()
        self.fetches += 1
        try:
            if self._metadata is None:
                self._metadata = await discover(self._http, self.issuer, self._timeout_s)
            if self._metadata.jwks_uri is None:
                raise FetchError("the issuer's metadata names no jwks_uri")
            data = await fetch_json(
                self._http, self._metadata.jwks_uri, limit=MAX_ANSWER_BYTES, timeout_s=self._timeout_s
            )
            self._keys = _signing_keys(data)
            self._fetched_at = time.monotonic()
            self._problem = None
            log.info("read %d signing keys of %s", len(self._keys), self.issuer)
        except FetchError as exc:
            self._problem = str(exc)
            log.warning(
                "the signing keys of %s could not be fetched (keeping %d): %s", self.issuer, len(self._keys), exc
            )
        finally:
            self._fetching = None
            done.set()


def _signing_keys(data: dict[str, Any]) -> dict[str, PublicKey]:
    """The public signing keys of a JWKS, by key id; symmetric keys, encryption keys and keys that do not parse are
    left out (one bad key does not void the others).

    Raises:
        FetchError: the answer holds no ``keys`` list.
    """
    from joserfc.errors import JoseError
    from joserfc.jwk import ECKey, JWKRegistry, OKPKey, RSAKey

    listed = data.get("keys")
    if not isinstance(listed, list):
        raise FetchError("the key set has no 'keys' list")
    keys: dict[str, PublicKey] = {}
    for number, entry in enumerate(listed[:MAX_KEYS]):
        if not isinstance(entry, dict) or entry.get("kty") not in ("RSA", "EC", "OKP") or entry.get("use") == "enc":
            continue
        public = {k: v for k, v in entry.items() if k not in ("d", "p", "q", "dp", "dq", "qi", "oth")}
        try:
            key = JWKRegistry.import_key(public)
        except (JoseError, ValueError, TypeError):
            continue
        if isinstance(key, ECKey | RSAKey | OKPKey):
            kid = entry.get("kid")
            keys[kid if isinstance(kid, str) else f"#{number}"] = key
    return keys
