"""An issuer whose every answer a test controls, on a loopback port: its metadata and key set served over real HTTP
(and made slow, huge, failing or rotated at will), and JWTs signed with its keys (or others) carrying any claims.
For what a real authorization server will not do on purpose (tests/authserver.py is the real one)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from joserfc import jwt
from joserfc.jwk import ECKey

RESOURCE = "https://contest.example/mcp"


@dataclass
class KeyServer:
    """The issuer's state; change it between requests.

    Attributes:
        issuer: Its issuer URL (``http://127.0.0.1:PORT``).
        keys: Its signing keys (private), the key set publishes their public halves.
        mode: How the key set is answered: ``ok``, ``down`` (HTTP 503), ``huge`` (8 MiB), ``slow`` (a byte a second),
            ``held`` (as ``ok`` once ``release`` is set).
        jwks_requests: Key-set requests answered so far.
    """

    issuer: str = ""
    keys: list[ECKey] = field(default_factory=list)
    mode: str = "ok"
    jwks_requests: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def add_key(self, kid: str) -> ECKey:
        key = ECKey.generate_key("P-256", parameters={"kid": kid, "alg": "ES256", "use": "sig"})
        self.keys.append(key)
        return key

    def token(self, key: ECKey | None = None, header: dict[str, Any] | None = None, **claims: Any) -> str:
        """A JWT signed with ``key`` (default: the first key) with the usual claims, overridden by ``claims``
        (a claim given as None is left out)."""
        key = key or self.keys[0]
        now = int(time.time())
        body = {"iss": self.issuer, "aud": RESOURCE, "sub": "team-a", "client_id": "host-one", "scope": "explore",
                "iat": now, "exp": now + 600} | claims  # fmt: skip
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode({"alg": "ES256", "kid": key.kid, **(header or {})}, body, key)


@contextlib.contextmanager
def key_server() -> Iterator[KeyServer]:
    """A ``KeyServer`` with one key (``k1``), serving until the block ends."""
    state = KeyServer()
    state.add_key("k1")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 - the standard library's name
            if self.path == "/.well-known/oauth-authorization-server":
                self._json(
                    {"issuer": state.issuer, "jwks_uri": f"{state.issuer}/jwks",
                     "introspection_endpoint": f"{state.issuer}/introspect"}
                )  # fmt: skip
            elif self.path == "/jwks":
                state.jwks_requests += 1
                self._jwks()
            else:
                self.send_error(404)

        def do_POST(self) -> None:  # noqa: N802 - the standard library's name
            # Introspection (RFC 7662): every token is active, for team-a, until the answer says otherwise.
            self.rfile.read(int(self.headers.get("content-length") or 0))
            now = int(time.time())
            self._json({"active": True, "iss": state.issuer, "aud": RESOURCE, "sub": "team-a", "client_id": "host-one",
                        "scope": "explore", "exp": now + 600})  # fmt: skip

        def _jwks(self) -> None:
            if state.mode == "down":
                self.send_error(503)
            elif state.mode == "huge":
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.end_headers()  # no length: the client must stop reading by itself
                filler = json.dumps({"kty": "EC", "kid": "x" * 1000}).encode()
                self.wfile.write(b'{"keys": [' + b",".join([filler] * 8192) + b"]}")
            elif state.mode == "slow":
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", "100000")
                self.end_headers()
                while not state.stop.wait(1.0):
                    with contextlib.suppress(OSError):
                        self.wfile.write(b" ")
                        self.wfile.flush()
            else:
                if state.mode == "held":
                    state.release.wait(60)
                self._json({"keys": [dict(k.as_dict(private=False)) for k in state.keys]})

        def _json(self, data: dict[str, Any]) -> None:
            body = json.dumps(data).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.issuer = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.stop.set()
        server.shutdown()
        server.server_close()
