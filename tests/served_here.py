"""`pau-mcp serve` served from the test's own process: over HTTP on a real loopback socket, or as stdio serves it
over the SDK's in-memory streams.

The server is the one the command builds (``assemble_server``). Over HTTP it is ``Served.http_service`` (the same
host gate, token and session-token checks, body, session and connection limits) run by the same uvicorn set-up in
a thread of its own with its own event loop (``serve_here``); over stdio it is served by ``serve_streams`` as
``run_stdio`` serves it (``streams_here``). Starting ``python -m pau_mcp serve`` costs about a second of CPU (most of
it importing the MCP SDK) and its sandbox's worker processes as much again; here both are already in the test
process, and ``shared_sandboxes`` hands out the test session's sandboxes where the settings describe them.

Users: the server tests' ``memory_http_server`` and ``memory_streams``, the harness's ``Environment`` fixture, the
interop tests' server (the client libraries under test are the processes there), and ``launched_here``, which stands
in for ``pau_mcp.server.launch.launched`` where a run (``pau-mcp eval``, ``sweep``, ``rl``) starts its own server:
the tests of what a run does get a server built from the very settings the run hands its child. What only a process
has (the ready line, ``--exit-with-stdin``, the settings file, an exit code, being killed) is left to the tests
marked ``server_process``, which keep the real launch, and to each file's own process tests.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import anyio
import pytest
from mcp.shared.memory import create_client_server_memory_streams
from serve_args import serve_parts

from pau_mcp import eventloop
from pau_mcp.config import Settings
from pau_mcp.sandboxing import make_sandbox, sandbox_limits
from pau_mcp.server import serve_streams
from pau_mcp.server_assembly import ServeRequest, assemble_server
from wasm_runtime import SandboxInterface

__all__ = ["LaunchedHere", "launched_here", "serve_here", "shared_sandboxes", "streams_here"]

#: ``make_sandbox``'s shape: the sandbox a server's settings describe (``processes``: behind worker processes).
Sandboxes = Callable[..., SandboxInterface]


@contextlib.contextmanager
def serve_here(settings: Settings, request: ServeRequest, sandboxes: Sandboxes | None = None) -> Iterator[str]:
    """Serve the HTTP server ``settings`` and ``request`` describe from this process until the block ends; its URL.

    Args:
        settings: The server's whole settings.
        request: What ``serve``'s own options ask for (``transport`` must be ``http``).
        sandboxes: Makes the server's sandboxes, and closes those it made (default: ``make_sandbox``, each closed
            with the server).

    Raises:
        RuntimeError: the server did not start, or did not stop within 30 s of being asked to.
    """
    with contextlib.ExitStack() as cleanup:
        if sandboxes is None:

            def sandboxes(settings: Settings, progress: Any = None, processes: bool = False) -> SandboxInterface:
                box = make_sandbox(settings, progress=progress, processes=processes)
                cleanup.callback(box.close)
                return box

        built = assemble_server(settings, request, sandboxes=sandboxes)
        cleanup.callback(built.service.store.close)
        service = built.http_service()
        cleanup.callback(service.sock.close)
        runner = service.uvicorn_server()
        failure: list[BaseException] = []

        def serve() -> None:
            try:
                eventloop.run(runner.serve, [service.sock])
            except BaseException as exc:  # reported by the test's thread
                failure.append(exc)

        thread = threading.Thread(target=serve, name="memory-http-server", daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + 30
            while not runner.started:
                if not thread.is_alive() or time.monotonic() > deadline:
                    raise RuntimeError(f"the in-process HTTP server did not start: {failure!r}")
                time.sleep(0.005)
            yield service.url
        finally:
            runner.should_exit = True
            thread.join(timeout=30)
            if thread.is_alive():
                raise RuntimeError("the in-process HTTP server did not stop within 30 s")
            if failure:
                raise RuntimeError("the in-process HTTP server failed") from failure[0]


@contextlib.asynccontextmanager
async def streams_here(
    settings: Settings, request: ServeRequest, sandboxes: Sandboxes
) -> AsyncIterator[tuple[Any, Any]]:
    """The client's read and write streams of the stdio server ``settings`` and ``request`` describe, built in this
    process and served as ``run_stdio`` serves it (``serve_streams``) over the SDK's in-memory streams instead of
    stdin and stdout. What stdio itself does (framing, message limits, encoding) is left to tests with a process.

    ``sandboxes`` makes the server's sandboxes and closes those it made (``shared_sandboxes``).
    """
    built = assemble_server(settings, request, sandboxes=sandboxes)
    if built.transport != "stdio":
        raise ValueError("streams_here serves stdio servers; serve_here serves --transport http")
    try:
        async with create_client_server_memory_streams() as (client, server):
            async with anyio.create_task_group() as group:
                done = anyio.Event()

                async def serve() -> None:
                    try:
                        await serve_streams(built.server, *server)
                    finally:
                        done.set()

                group.start_soon(serve)
                try:
                    yield client
                finally:
                    # The end of the client's input, as a closed stdin: the server ends its session on its own.
                    await client[1].aclose()
                    with anyio.move_on_after(10):
                        await done.wait()
                    group.cancel_scope.cancel()
    finally:
        built.service.store.close()


def shared_sandboxes(request: pytest.FixtureRequest, owned: list[SandboxInterface]) -> Sandboxes:
    """A stand-in for ``make_sandbox`` that hands out the test session's sandbox where it is the one the settings
    describe: ``worker_sandbox`` for a server's calls (``processes=True``), ``sandbox`` for its scorer's.

    Any other settings (limits, cache directory, a worker count) get a sandbox of their own from ``make_sandbox``
    itself, added to ``owned`` for the caller to close.
    """

    def make(settings: Settings, progress: Any = None, processes: bool = False) -> SandboxInterface:
        shared: SandboxInterface = request.getfixturevalue("worker_sandbox" if processes else "sandbox")
        if (
            sandbox_limits(settings) == shared.limits
            and settings.cache_dir is None
            and (settings.workers in (None, getattr(shared, "workers", None)) or not processes)
        ):
            return shared
        box = make_sandbox(settings, progress=progress, processes=processes)
        owned.append(box)
        return box

    return make


class LaunchedHere:
    """What a run reads of the server it launched (``pau_mcp.server.launch.Launched``), for one served here: its
    URL, and that it has not stopped (it runs until the run is done with it)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def stopped(self, wait_s: float = 0.0) -> str | None:
        return None


@contextlib.contextmanager
def launched_here(
    args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    timeout_s: float = 180,
    settings: Settings | None = None,
    *,
    test: pytest.FixtureRequest,
) -> Iterator[LaunchedHere]:
    """``pau_mcp.server.launch.launched`` served from this process, on the test session's sandboxes where they are
    the ones its settings describe: the server ``serve --transport http --port 0 ARGS`` starts with ``settings`` (a
    run always hands its child its whole settings).

    Raises:
        ValueError: no settings, or variables for a child (a process of its own is then what the test needs).
    """
    if settings is None or env:
        raise ValueError("launched_here serves a run's own server (whole settings, no variables); launch a process")
    _, request = serve_parts(["--transport", "http", "--port", "0", *args])
    owned: list[SandboxInterface] = []
    try:
        with serve_here(settings, request, shared_sandboxes(test, owned)) as url:
            yield LaunchedHere(url)
    finally:
        for box in owned:
            box.close()
