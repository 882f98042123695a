"""The official MCP Python SDK's own OAuth client (``OAuthClientProvider``, the auth of its httpx client) signs in to
`pau-mcp serve --auth oauth` as a host does: the server's 401 names its protected-resource metadata, the metadata
names the authorization server (a real one, npm oidc-provider, tests/authserver.py), the client registers itself,
sends the person to sign in (a simulated browser) with PKCE and the resource indicator, exchanges the code, and
calls a tool with the token; the budget is the signed-in person's."""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from authserver import ALL_SCOPES, authorization_server, browse
from interop_support import TOOL, http_server
from mcp.client.auth import OAuthClientProvider
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from pau_mcp.tls import shared_context

pytestmark = pytest.mark.interop

CALLBACK = "http://127.0.0.1:9/callback"


class _Storage:
    """Where a host keeps its registration and tokens (here, in memory)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _sign_in_and_explore(url: str, mode: str) -> tuple[list[dict[str, Any]], _Storage, list[str]]:
    storage = _Storage()
    came_back: list[dict[str, str]] = []
    visited: list[str] = []

    async def redirect(authorization_url: str) -> None:  # the host opens the browser
        visited.append(authorization_url)
        came_back.append(await anyio.to_thread.run_sync(browse, authorization_url, CALLBACK))

    async def callback() -> AuthorizationCodeResult:  # and receives the redirect back
        query = came_back.pop()
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))

    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata.model_validate(
            {
                "client_name": "pau-mcp interop host",
                "redirect_uris": [CALLBACK],
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
            }
        ),  # fmt: skip
        storage=storage,
        redirect_handler=redirect,
        callback_handler=callback,
    )
    with anyio.fail_after(120):
        async with httpx2.AsyncClient(verify=shared_context(), auth=provider, timeout=60) as http:
            async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
                assert TOOL in {t.name for t in (await client.list_tools()).tools}
                results = [(await client.call_tool(TOOL, {"arg0": v})).structured_content or {} for v in (234, 57, 105)]
                submitted = await client.call_tool(
                    "submit", {"method": TOOL, "description": "the product of the digits"}
                )
                results.append(submitted.structured_content or {})
    return results, storage, visited


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_official_oauth_client_signs_in_through_the_authorization_server_and_calls_a_tool(
    data_dir: Path, tmp_path: Path, mode: str
) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with authorization_server(tmp_path, {url: {"scope": ALL_SCOPES}}, clients=[]) as issuer:
        args = ("--port", str(port), "--auth", "oauth", "--issuer", issuer.issuer, "--budget", "2", "--run", "contest")
        with http_server(data_dir, *args) as served:
            assert served == url
            results, storage, visited = anyio.run(_sign_in_and_explore, url, mode)
    assert [r["status"] for r in results] == ["ok", "ok", "over_budget", "recorded"]
    assert results[0]["budget_scope"] == "subject"
    # The host registered itself, asked for this resource and the scope the server's challenge named, with PKCE.
    assert storage.client is not None and storage.tokens is not None
    assert f"resource=http%3A%2F%2F127.0.0.1%3A{port}%2Fmcp" in visited[0]
    assert "code_challenge_method=S256" in visited[0] and "scope=explore" in visited[0]
    with sqlite3.connect(Path(data_dir) / "runs.db") as store:
        sessions = store.execute("SELECT key, credential FROM sessions").fetchall()
        recorded = "\n".join(str(row) for row in store.execute("SELECT * FROM calls"))
    assert sessions == [("team-a", "subject")]
    assert storage.tokens.access_token not in recorded
