"""Fixtures for the server tests: `pau-mcp serve` spoken to by the official MCP client.

A test about MCP semantics builds the stdio server in its own process from the command's arguments and talks to
it over the SDK's in-memory streams (``memory_session``), on the sandbox the whole test session shares. A test
about the transport or the process itself (framing, HTTP, sockets, signals, restarts, exit codes) starts real
processes (``stdio_session``, ``http_server``). A test about HTTP semantics (labels, tokens, budgets, refusals)
runs the command's HTTP app in its own process on a loopback socket (``memory_http_server``).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from mcp.client.session import ClientSession, MessageHandlerFnT
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent, TextResourceContents
from serve_args import serve_parts
from served_here import serve_here, shared_sandboxes, streams_here

from pau_mcp.contract import RAN
from pau_mcp.manifests import Case, Method, Provenance, Suite, SuiteInfo, Tags, tool_name
from pau_mcp.manifests.checks import freeze_method
from pau_mcp.server.launch import http_server as launch_http_server
from pau_mcp.server_assembly import Served, assemble_server
from pau_mcp.tls import shared_context
from wasm_runtime import Sandbox, SandboxInterface

if TYPE_CHECKING:
    from mcp.client.client import Client

ROOT = Path(__file__).resolve().parents[3]

#: The deployment key every server of these tests shares (PAU_MCP_TOOL_KEY), so tests can name tools.
TEST_KEY = "test-deployment-key-0123456789abcdef"


def tool_of(method_id: str) -> str:
    """The tool name of a method on the servers of these tests."""
    return tool_name(TEST_KEY, method_id)


@pytest.fixture(autouse=True)
def _deployment_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every server started by a test (and every command) uses the shared test key unless the test says otherwise."""
    monkeypatch.setenv("PAU_MCP_TOOL_KEY", TEST_KEY)


#: Strings that exist only in the hidden parts of the secret suite: none may ever reach an agent.
SECRETS = {
    "source": "zq_xylophone_constant",
    "source_text": "ZQ-XYLOPHONE-17",
    "description": "GOLD-DESCRIPTION-MARKER-4471",
    "test_input": "tq-hidden-input-9",
    "test_output": "TQ-HIDDEN-INPUT-9!",
}


def _secret_methods() -> list[Method]:
    source = [
        "zq_xylophone_constant = 'ZQ-XYLOPHONE-17'",
        "def test_func(arg0):",
        "    if arg0 == 'boom':",
        "        raise ValueError('cannot take that word')",
        "    if isinstance(arg0, str):",
        "        return arg0.upper() + '!'",
        "    return len(zq_xylophone_constant) * arg0",
    ]
    loop = ["def test_func(arg0):", "    while arg0:", "        pass", "    return 0"]
    common: dict[str, Any] = {"provenance": Provenance(dataset="test"), "tags": Tags(arity=1)}
    return [
        Method(
            id="secret/m1", header="def test_func(arg0):", params=["arg0"], source="\n".join(source) + "\n",
            description=f"{SECRETS['description']}: shouts strings, scales numbers by 15, refuses 'boom'.",
            examples=[Case(input="('ab',)"), Case(input="(2,)")],
            tests=[Case(input=f"('{SECRETS['test_input']}',)"), Case(input="(3,)")], **common,
        ),
        Method(
            id="secret/m2", header="def test_func(arg0):", params=["arg0"], source="\n".join(loop) + "\n",
            description="Loops forever on a truthy argument, else returns 0.",
            examples=[Case(input="(0,)"), Case(input="(False,)")], tests=[Case(input="('',)")], **common,
        ),
    ]  # fmt: skip


@pytest.fixture(scope="session")
def secret_manifests(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A manifests directory with suite `secret`, frozen in the real sandbox."""
    root = tmp_path_factory.mktemp("manifests")
    suite = Suite.create(root, SuiteInfo(name="secret"))
    for method in _secret_methods():
        suite.save(freeze_method(method, sandbox))
    return root


def serve_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pau_mcp", "serve", *args]


@contextlib.asynccontextmanager
async def stdio_session(*args: str, message_handler: MessageHandlerFnT | None = None) -> AsyncIterator[ClientSession]:
    """A `pau-mcp serve` subprocess over stdio with an initialized official client session."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "pau_mcp", "serve", *args], cwd=str(ROOT), env=dict(os.environ)
    )
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, message_handler=message_handler) as session,
    ):
        with anyio.fail_after(60):
            await session.initialize()
        yield session


#: The running test's fixture request: ``memory_session`` is called inside a test's own event loop, where it
#: cannot ask for fixtures, and takes the session's shared sandboxes through it (only when a test needs them).
_request: pytest.FixtureRequest | None = None


@pytest.fixture(autouse=True)
def _current_request(request: pytest.FixtureRequest) -> Iterator[None]:
    global _request
    _request = request
    yield
    _request = None


def _shared_sandboxes(owned: list[SandboxInterface]) -> Callable[..., SandboxInterface]:
    """``served_here.shared_sandboxes`` for the running test (``memory_session`` has no request of its own)."""
    assert _request is not None, "memory_session runs inside a test of this directory"
    return shared_sandboxes(_request, owned)


def _assembled(args: Sequence[str], owned: list[SandboxInterface]) -> Served:
    """The server ``pau-mcp serve ARGS`` runs, built as the command builds it, on the test session's shared
    sandboxes (any other sandbox it needs is added to ``owned`` for the caller to close)."""
    settings, request = serve_parts(args)
    return assemble_server(settings, request, sandboxes=_shared_sandboxes(owned))


@contextlib.asynccontextmanager
async def memory_streams(*args: str) -> AsyncIterator[tuple[Any, Any]]:
    """The client's read and write streams of `pau-mcp serve ARGS`, built in this process, over stdio.

    The server is the one the command builds from the same arguments (``pau_mcp.server_assembly.assemble_server`` of
    the settings and request they stand for, ``serve_args.serve_parts``), served as ``run_stdio`` serves it
    (``serve_streams``), over the SDK's in-memory streams instead of stdin and stdout. What stdio itself does (framing, message limits, encoding) is left to the tests
    that start a process.
    """
    owned: list[SandboxInterface] = []
    settings, request = serve_parts(args)
    try:
        async with streams_here(settings, request, _shared_sandboxes(owned)) as streams:
            yield streams
    finally:
        for box in owned:
            box.close()


@contextlib.asynccontextmanager
async def memory_session(*args: str, message_handler: MessageHandlerFnT | None = None) -> AsyncIterator[ClientSession]:
    """`pau-mcp serve ARGS` over stdio, built in this process (``memory_streams``), with an initialized official
    client session: ``stdio_session`` without the process."""
    async with (
        memory_streams(*args) as (read, write),
        ClientSession(read, write, message_handler=message_handler) as session,
    ):
        with anyio.fail_after(60):
            await session.initialize()
        yield session


@contextlib.contextmanager
def http_server(*args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """A `pau-mcp serve --transport http` process on an ephemeral port; yields its URL."""
    with launch_http_server(args, env=env, timeout_s=90) as url:
        yield url


@contextlib.contextmanager
def memory_http_server(*args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """`pau-mcp serve --transport http --port 0 ARGS` served from this process; yields its URL: ``http_server``
    without the process.

    The app is the one the command serves (``assemble_server``, then ``Served.http_service``: the same host gate, token
    and session-token checks, body, session and connection limits), on a real loopback socket, run by the same
    uvicorn set-up in a thread of its own with its own event loop, on the test session's shared sandboxes (as
    ``memory_session``). What only a process has (its announcement, signals, ``--exit-with-stdin``, logging
    set-up) is left to ``http_server``.

    With ``env`` (variables the command would see), the real process is started instead: setting them in this
    process would reach the test's own code too, and be undone only if every exit path restored them.

    Raises:
        RuntimeError: the server did not start, or did not stop within 30 s of being asked to.
    """
    if env:
        with http_server(*args, env=env) as url:
            yield url
        return
    owned: list[SandboxInterface] = []
    settings, request = serve_parts(["--transport", "http", "--port", "0", *args])
    try:
        with serve_here(settings, request, _shared_sandboxes(owned)) as url:
            yield url
    finally:
        for box in owned:
            box.close()


class RawSession:
    """A hand-written MCP client over HTTP: the moves the official client never makes (changing its URL, headers
    or credentials between requests of one session), as a hostile agent with its own HTTP client would.

    Args:
        url: The server's MCP endpoint.
        query: URL parameters of the opening request only (``session``, ``run``, ``methods``). The server reads a
            label on every request, so a session meant to stay under one label passes it to each ``call`` too, or
            sends it in ``headers`` (``X-PAU-Session``); otherwise its later requests count under the default label.
        headers: Extra headers of every request (e.g. ``Authorization``).
    """

    def __init__(self, url: str, query: dict[str, str] | None = None, headers: dict[str, str] | None = None) -> None:
        import httpx2

        self.url = url
        self.headers = {"accept": "application/json, text/event-stream", **(headers or {})}
        self.client = httpx2.Client(verify=shared_context(), timeout=60)
        self.ids = iter(range(1, 1_000_000))
        reply = self.client.post(
            url, params=query or {}, headers=self.headers,
            json={"jsonrpc": "2.0", "id": next(self.ids), "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}},
        )  # fmt: skip
        reply.raise_for_status()
        session_id = reply.headers.get("mcp-session-id")
        if session_id:
            self.headers["mcp-session-id"] = session_id
        self.headers["mcp-protocol-version"] = "2025-06-18"
        self.client.post(
            url, params=query or {}, headers=self.headers,
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        )  # fmt: skip

    def request(
        self, method: str, params: dict[str, Any], query: dict[str, str] | None = None, **headers: str
    ) -> dict[str, Any]:
        """One JSON-RPC request; returns the JSON-RPC reply (``result`` or ``error``)."""
        reply = self.client.post(
            self.url, params=query or {}, headers={**self.headers, **headers},
            json={"jsonrpc": "2.0", "id": next(self.ids), "method": method, "params": params},
        )  # fmt: skip
        assert reply.status_code == 200, (reply.status_code, reply.text)
        answer: dict[str, Any] = reply.json()
        return answer

    def call(
        self, tool: str, arguments: dict[str, Any], query: dict[str, str] | None = None, **headers: str
    ) -> dict[str, Any]:
        """A ``tools/call``; returns the JSON-RPC reply."""
        return self.request("tools/call", {"name": tool, "arguments": arguments}, query, **headers)

    def close(self) -> None:
        self.client.close()


TASKS = "io.modelcontextprotocol/tasks"


class ModernSession:
    """Raw 2026-07-28 requests to one HTTP server (no handshake: each carries its version, capabilities and the
    routing headers), as a client of that era sends them; answers read from JSON or from an SSE stream.

    Args:
        url: The server's MCP endpoint.
        tasks: Declare the Tasks extension in every request's capabilities.
        headers: Extra headers of every request (e.g. ``Authorization``).
    """

    def __init__(self, url: str, tasks: bool = False, headers: dict[str, str] | None = None) -> None:
        import httpx2

        self.url = url
        self.tasks = tasks
        self.headers = headers or {}
        self.client = httpx2.Client(verify=shared_context(), timeout=60)
        self.ids = iter(range(1, 1_000_000))

    def send(
        self,
        method: str,
        params: dict[str, Any],
        capabilities: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
        **headers: str,
    ) -> tuple[int, dict[str, Any]]:
        """One request (``meta``: more ``_meta`` keys); the HTTP status and the JSON-RPC reply to it."""
        declared = capabilities if capabilities is not None else {"elicitation": {}, "sampling": {}, "roots": {}}
        if self.tasks:
            declared = {**declared, "extensions": {TASKS: {}}}
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": declared,
            "io.modelcontextprotocol/clientInfo": {"name": "raw-modern", "version": "1"},
            **(meta or {}),
        }
        name = params.get("name") or params.get("uri") or params.get("taskId")
        routing = {"mcp-protocol-version": "2026-07-28", "mcp-method": method, **({"mcp-name": name} if name else {})}
        request_id = next(self.ids)
        reply = self.client.post(
            self.url,
            headers={"accept": "application/json, text/event-stream", **routing, **self.headers, **headers},
            json={"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**params, "_meta": meta}},
        )
        if reply.headers.get("content-type", "").startswith("text/event-stream"):
            import json

            frames = [json.loads(line[5:]) for line in reply.text.splitlines() if line.startswith("data:")]
            return reply.status_code, next(f for f in frames if f.get("id") == request_id)
        return reply.status_code, reply.json()

    def request(
        self, method: str, params: dict[str, Any], meta: dict[str, Any] | None = None, **headers: str
    ) -> dict[str, Any]:
        """One request expected to succeed; its result."""
        # Both named: **headers could otherwise stand for them (mypy checks it against every parameter left).
        status, reply = self.send(method, params, capabilities=None, meta=meta, **headers)
        assert status == 200 and "result" in reply, (status, reply)
        result: dict[str, Any] = reply["result"]
        return result

    def close(self) -> None:
        self.client.close()


def served(reply: dict[str, Any]) -> bool:
    """True when a raw ``tools/call`` reply ran the function (a result whose status is not a refusal)."""
    if "result" not in reply or reply["result"].get("isError"):
        return False
    return (reply["result"].get("structuredContent") or {}).get("status") in RAN


def text_of(block: object) -> str:
    """The text of one block of a reply (a tool result's or a prompt message's content, a resource's contents),
    which these tests expect to be text: anything else fails here, saying what it was."""
    assert isinstance(block, (TextContent, TextResourceContents)), block
    return block.text


#: What one call of a tool gave an official client: its result, or the MCPError it raised.
Outcome = CallToolResult | MCPError


def completed(outcomes: Sequence[Outcome]) -> list[CallToolResult]:
    """The results of calls none of which may have raised."""
    results = [o for o in outcomes if isinstance(o, CallToolResult)]
    assert len(results) == len(outcomes), outcomes
    return results


def ran(result: CallToolResult) -> bool:
    """True when an official client's tool result ran the function (over budget and refusals did not)."""
    return not result.is_error and (result.structured_content or {}).get("status") in RAN


@contextlib.asynccontextmanager
async def memory_client(*args: str, mode: str = "auto") -> AsyncIterator[Client]:
    """`pau-mcp serve ARGS` built in this process (as ``memory_session``), spoken to by the official high-level
    ``mcp.client.client.Client`` in either protocol era (``mode``: ``legacy``, ``2026-07-28`` or ``auto``)."""
    from mcp.client.client import Client

    owned: list[SandboxInterface] = []
    built = _assembled(args, owned)
    try:
        async with Client(built.server, mode=mode) as client:
            yield client
    finally:
        built.service.store.close()
        for box in owned:
            box.close()
