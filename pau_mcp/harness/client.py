"""The harness's MCP client stack: one connection pool per run, HTTP clients over it, MCP sessions each under a
session token scoped to its tools, and the checks that say in one line why a ``--server`` cannot be used."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from urllib.parse import urlsplit

import anyio
import httpx2
import mcp_types as types
from httpx_aiohttp.httpx2 import AiohttpTransport
from mcp.client.client import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from ..eras import client_mode
from ..server.tokens import TokenSigner
from ..tls import shared_context
from .configuration import EvalError

__all__ = [
    "Connect", "ConnectTools", "accepts_connections", "check_served", "connection_pool", "http_client", "leaf_error",
    "mcp_session", "scoped_sessions",
]  # fmt: skip


#: How long an episode's session token stays valid (an episode that outlives it fails and is run again).
_EPISODE_TOKEN_S = 24 * 3600


class _Borrowed(httpx2.AsyncBaseTransport):
    """A run's one connection pool, lent to a client that must not close it."""

    def __init__(self, pool: httpx2.AsyncBaseTransport) -> None:
        self._pool = pool

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await self._pool.handle_async_request(request)

    async def aclose(self) -> None:
        pass


def connection_pool() -> httpx2.AsyncBaseTransport:
    """One connection pool for every episode of a run: a client per episode built its own TLS context (~30 ms).

    Requests go through aiohttp (which sets TCP_NODELAY): about 40% less CPU per request than httpx's own
    transport, and the MCP client's requests are half of what the harness spends per episode.
    """
    return AiohttpTransport(verify=shared_context())


def http_client(token: str | None, pool: httpx2.AsyncBaseTransport | None = None) -> httpx2.AsyncClient:
    """An HTTP client sending ``token``, over ``pool`` when given (a client over a borrowed pool costs ~20 us)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = _Borrowed(pool) if pool is not None else connection_pool()
    return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300), transport=transport)


@contextlib.asynccontextmanager
async def mcp_session(client: httpx2.AsyncClient, url: str, era: str = "modern") -> AsyncIterator[ClientSession]:
    """The official MCP client over Streamable HTTP in an ``--mcp-era``, ready (handshake or discover done).

    Raises:
        MCPError, httpx2.HTTPError: the server refused or could not be reached.
    """
    async with Client(streamable_http_client(url, http_client=client), mode=client_mode(era), cache=None) as mcp:
        yield mcp.session


#: Opens the MCP session of one episode: ``connect(tool, session_key)``.
Connect = Callable[[str, str], contextlib.AbstractAsyncContextManager[ClientSession]]
#: Opens an MCP session scoped to several tools (a task's): ``connect_tools(tools, session_key)``.
ConnectTools = Callable[[Iterable[str], str], contextlib.AbstractAsyncContextManager[ClientSession]]


def scoped_sessions(url: str, pool: httpx2.AsyncBaseTransport, signer: TokenSigner, run: str, era: str) -> ConnectTools:
    """MCP sessions each under a session token of its own (its label is the episode's session key).

    The token scopes the session to its tools and names its budget, so no request depends on a connection:
    any era, any server process sharing the run store, and a new connection per request all count alike.
    """

    @contextlib.asynccontextmanager
    async def connect(tools: Iterable[str], key: str) -> AsyncIterator[ClientSession]:
        token = signer.issue(key, run=run, methods=tools, expires_in=_EPISODE_TOKEN_S)
        async with http_client(token, pool) as client, mcp_session(client, url, era) as session:
            yield session

    return connect


async def _served_tools(client: httpx2.AsyncClient, url: str, era: str) -> set[str]:
    """Every tool a running server lists (requests that spend nothing)."""
    async with mcp_session(client, url, era) as session:
        names: set[str] = set()
        cursor = None
        while True:
            listed = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
            names.update(t.name for t in listed.tools)
            cursor = listed.next_cursor
            if cursor is None:
                return names


def leaf_error(exc: BaseException) -> BaseException:
    """The first real error inside task-group wrappers (the MCP client runs in task groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def accepts_connections(url: str) -> bool:
    """Whether something accepts TCP connections at ``url``'s host and port (a refused connection: nothing)."""
    parts = urlsplit(url)
    try:
        with anyio.fail_after(5):
            stream = await anyio.connect_tcp(parts.hostname or "127.0.0.1", parts.port or 80)
    except OSError:
        return False
    except TimeoutError:
        return True  # busy, not gone
    await stream.aclose()
    return True


async def _unreachable(client: httpx2.AsyncClient, url: str, exc: BaseException) -> str:
    """Why the MCP client could not talk to ``url``, in one line: the HTTP status of a plain request says more
    than the client's error (401: the token; 404: the path)."""
    try:
        answer = await client.post(
            url,
            json={"jsonrpc": "2.0", "id": 0, "method": "ping"},
            headers={"Accept": "application/json, text/event-stream"},
        )
        status: int | None = answer.status_code
    except httpx2.HTTPError:
        status = None
    if status in (401, 403):
        sent = "a token the server refused" if "authorization" in client.headers else "no token"
        return (
            f"the server at {url} answered {status} to {sent}: give this command the server's token with --token "
            "or PAU_MCP_TOKEN"
        )
    if status in (404, 405):
        parts = urlsplit(url)
        hint = f"; `pau-mcp serve --transport http` serves MCP at {parts.scheme}://{parts.netloc}/mcp"
        return f"nothing answers MCP at {url} ({status}: wrong path){hint if parts.path.rstrip('/') != '/mcp' else ''}"
    return (
        f"cannot list the tools of {url}: {type(exc).__name__}: {exc}; check the URL and --token (a server that "
        "does not speak MCP 2026-07-28 needs --mcp-era legacy or auto / PAU_MCP_ERA)"
    )


async def check_served(client: httpx2.AsyncClient, url: str, suite: str, tools: set[str], era: str) -> None:
    """Refuse a ``--server`` that does not offer the run's tools (another suite, or another tool key)."""
    try:
        served = await _served_tools(client, url, era)
    except Exception as caught:  # noqa: BLE001 - sorted just below
        exc = leaf_error(caught)
        if not isinstance(exc, (MCPError, httpx2.HTTPError)):
            raise
        raise EvalError(await _unreachable(client, url, exc)) from None
    missing = sorted(tools - served)
    if missing:
        raise EvalError(
            f"the server at {url} does not offer {len(missing)} of the {len(tools)} tools expected for "
            f"suite {suite!r} (e.g. {missing[0]}): is it serving that suite, with the same tool "
            "key? Give this command the server's key with --tool-key or PAU_MCP_TOOL_KEY, or the "
            "server's data directory with --data-dir"
        )
