"""Session tokens: bearer tokens the operator issues, each naming one budget identity (a label in a run).

A token is ``pau1.<payload>.<signature>``: the payload is URL-safe base64 (unpadded) of a JSON object
``{"label", "run", "methods", "iat", "exp"}``, and the signature URL-safe base64 of HMAC-SHA256 over
``pau1.<payload>`` with a subkey of the deployment's key. It is signed, not encrypted: whoever holds it can read
its label, run, tool names and times, so it holds nothing secret (tool names, never method ids). Only a holder of
the deployment key can make one; a server accepts it like its main ``--token``, and its budget is its label's,
whatever MCP session or connection carries it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from ..contract import label_problem

log = logging.getLogger("pau_mcp.server")

__all__ = ["TOKEN_PREFIX", "SessionToken", "TokenSigner", "looks_like_session_token"]

TOKEN_PREFIX = "pau1"
_SUBKEY_LABEL = b"pau-mcp session token v1"  # never a method id (ids have no spaces): the subkey names no tool
_MAX_TOKEN = 8192


@dataclass(frozen=True)
class SessionToken:
    """What a valid session token says.

    Attributes:
        label: The session's label: its budget identity and its key in the run store.
        run: The run it records under; None for the server's run.
        methods: Tool names it may see; None for every method the server serves.
        issued_at: Seconds since the epoch.
        expires_at: Seconds since the epoch; None for no expiry.
    """

    label: str
    run: str | None = None
    methods: tuple[str, ...] | None = None
    issued_at: int = 0
    expires_at: int | None = None

    @classmethod
    def from_claims(cls, claims: dict[str, object]) -> SessionToken:
        """The token a verified payload describes.

        Raises:
            KeyError, TypeError, ValueError: the payload lacks a field or has one of the wrong type.
        """
        methods, run, expires = claims.get("methods"), claims.get("run"), claims.get("exp")
        if methods is not None and not isinstance(methods, list):
            raise TypeError("methods must be a list")
        return cls(
            label=str(claims["label"]),
            run=None if run is None else str(run),
            methods=None if methods is None else tuple(str(m) for m in methods),
            issued_at=_whole(claims["iat"], "iat"),
            expires_at=None if expires is None else _whole(expires, "exp"),
        )

    def claims(self) -> dict[str, object]:
        """The payload as JSON-ready data."""
        return {
            "label": self.label,
            "run": self.run,
            "methods": list(self.methods) if self.methods is not None else None,
            "iat": self.issued_at,
            "exp": self.expires_at,
        }


def _whole(value: object, name: str) -> int:
    """A payload's number field as an int (as ``int()`` reads it).

    Raises:
        TypeError, ValueError: not a number, or text that is not one.
    """
    if not isinstance(value, int | float | str):
        raise TypeError(f"{name} must be a number")
    return int(value)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TokenSigner:
    """Issues and verifies the session tokens of one deployment.

    Args:
        key: The deployment's secret (``Settings.deployment_key()``); tokens are signed with a subkey of it.
        source: Where the key comes from (``Settings.deployment_key_source()``), for the log line that says why a
            token was refused; never the key.
    """

    def __init__(self, key: str, source: str = "the deployment key") -> None:
        self._key = hmac.new(key.encode(), _SUBKEY_LABEL, hashlib.sha256).digest()
        self.source = source
        self._refusals = _Refusals()

    def _sign(self, signed: str) -> str:
        return _b64(hmac.new(self._key, signed.encode("ascii"), hashlib.sha256).digest())

    def issue(
        self, label: str, run: str | None = None, methods: Iterable[str] | None = None,
        expires_in: float | None = None, now: float | None = None,
    ) -> str:  # fmt: skip
        """A new token.

        Args:
            label: The session's label (letters, digits and ``_ . : / @ + -``, at most 128).
            run: Record under this run instead of the server's.
            methods: Tool names it may see (never method ids: the payload is readable).
            expires_in: Seconds it stays valid; None for no expiry.
            now: The issuing time (default: now).

        Raises:
            ValueError: a bad label, run or lifetime; the message says what is allowed.
        """
        for what, value in (("label", label), ("run", run)):
            problem = label_problem(value, what) if value is not None else None
            if problem:
                raise ValueError(problem)
        if expires_in is not None and expires_in <= 0:
            raise ValueError("a token must live for a positive number of seconds")
        issued = int(now if now is not None else time.time())
        token = SessionToken(
            label=label,
            run=run,
            methods=tuple(sorted(set(methods))) if methods is not None else None,
            issued_at=issued,
            expires_at=issued + max(1, round(expires_in)) if expires_in is not None else None,
        )
        payload = _b64(json.dumps(token.claims(), sort_keys=True, separators=(",", ":")).encode())
        signed = f"{TOKEN_PREFIX}.{payload}"
        return f"{signed}.{self._sign(signed)}"

    def verify(self, text: str, now: float | None = None) -> SessionToken | None:
        """The token's claims if it is one of this deployment's, well formed and not expired; else None (and the
        reason goes to the server's log, at most once a minute for each kind of reason)."""
        token, problem = self.check(text, now)
        if problem is not None and looks_like_session_token(text):
            self._refusals.note(problem)
        return token

    def check(self, text: str, now: float | None = None) -> tuple[SessionToken | None, str | None]:
        """The token's claims, or None and why it is refused (a line for the operator's log, naming where the key
        comes from and never the key)."""
        if len(text) > _MAX_TOKEN or not text.startswith(TOKEN_PREFIX + "."):
            return None, "it is not a session token of this program"
        parts = text.split(".")
        if len(parts) != 3:
            return None, "it is malformed (not three dot-separated parts)"
        signed = f"{parts[0]}.{parts[1]}"
        try:
            if not hmac.compare_digest(self._sign(signed), parts[2]):
                return None, (
                    f"its signature does not match this deployment's key ({self.source}): it was issued with "
                    "another key, or altered; issue it again with this server's --data-dir or --tool-key"
                )
            claims = json.loads(_unb64(parts[1]))
        except (ValueError, TypeError, binascii.Error, UnicodeError):
            return None, "it is malformed (its parts are not base64 JSON)"
        try:
            token = SessionToken.from_claims(claims)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None, "it is malformed (its payload lacks a field)"
        if token.expires_at is not None and token.expires_at <= (now if now is not None else time.time()):
            return None, f"it expired at {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(token.expires_at))}"
        return token, None


class _Refusals:
    """Logs why session tokens are refused: each kind of reason at once, then at most once a minute with how many
    more there were, so that a client sending bad tokens without pause cannot fill the log."""

    def __init__(self, every_s: float = 60.0) -> None:
        self.every_s = every_s
        self._last: dict[str, tuple[float, int]] = {}
        self._lock = threading.Lock()

    def note(self, problem: str) -> None:
        kind = problem.split(":", 1)[0].split("(", 1)[0]
        now = time.monotonic()
        with self._lock:
            last, since = self._last.get(kind, (-self.every_s, 0))
            if now - last < self.every_s:
                self._last[kind] = (last, since + 1)
                return
            self._last[kind] = (now, 0)
        more = f" ({since} more like it in the last minute)" if since else ""
        log.warning("a session token was refused: %s%s", problem, more)


def looks_like_session_token(text: str) -> bool:
    """True when a bearer credential has the form of a session token (valid or not)."""
    return text.startswith(TOKEN_PREFIX + ".")
