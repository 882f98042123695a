"""The composition root of the served MCP server: built from ``Settings`` and a ``ServeRequest`` in one place.

``pau-mcp serve`` parses its options into both and calls ``assemble_server``; the tests and the benchmarks build
their servers with the same call, so the server they speak to is the command's. ``create_service`` builds the method
service alone (``pau-mcp call`` runs one call through it). The limits the server enforces are
made from the settings here (``pau_mcp.limits``), each group once; a transport then runs ``Served.server``
(``pau_mcp.server.run_stdio``) or ``Served.http_service()``.

The run side's root (a run's scorer, a rollout's parts) is ``pau_mcp.assembly``: a sibling on the same floor, kept
apart because the two roots share no part and change for different reasons.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from .config import Settings, SettingsError
from .limits import PAGE_SIZE, HTTPLimits, ProtocolLimits, ServiceLimits
from .manifests import ManifestError, ManifestStore
from .protocol import DEFAULT_PROTOCOL, RULES
from .runstore import RunStore, StoreError
from .sandboxing import SandboxMaker, background, make_sandbox, shared_sandbox
from .server import (
    Catalog,
    Feedback,
    MethodService,
    Sessions,
    TokenSigner,
    ToolDocs,
    build_server,
    exploration_settings,
    serve_examples,
)  # fmt: skip
from .server.fixtures import fixture_suites

if TYPE_CHECKING:
    from mcp.server import Server

    from .server import HTTPService

__all__ = [
    "DEFAULT_SUITES", "AssemblyError", "ServeRequest", "Served", "assemble_server", "create_service", "exposure_warning",
    "prepare_processes",
]  # fmt: skip

log = logging.getLogger("pau_mcp.server")

#: What a server serves when its request names no suite.
DEFAULT_SUITES = ("builtin",)


class AssemblyError(Exception):
    """The server cannot be built as asked; the message says what to change.

    Attributes:
        usage: The request asks for what this installation cannot do (``--feedback score`` without the scorer):
            the command reports it as a usage error.
    """

    def __init__(self, message: str, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


@dataclass(frozen=True)
class ServeRequest:
    """What to serve and how, beside the settings: what ``pau-mcp serve``'s own options ask for.

    Attributes:
        transport: ``stdio`` (one session per process) or ``http`` (Streamable HTTP).
        host: The HTTP address to listen on (``--host``).
        port: The HTTP port (``--port``; 0: a free one).
        stateless: HTTP without MCP sessions for handshake-era clients too (``--stateless``).
        run: The run the sessions are recorded under (``--run``); None: a new name per start.
        feedback: What ``submit`` returns: ``none`` (a receipt) or ``score`` (``--feedback``).
        page_size: Items per page of the tools, resources and prompts lists (``--page-size``).
        suites: The suites served (``--suite``), a fixture suite among them or not.
        methods: Only these method ids or tool names (``--methods``); empty: every method of the suites.
        docs: What each tool is documented with (``--docs``: ``examples``, ``none``, ``gold``, a run or a file).
    """

    transport: Literal["stdio", "http"] = "stdio"
    host: str = "127.0.0.1"
    port: int = 8000
    stateless: bool = False
    run: str | None = None
    feedback: Literal["none", "score"] = "none"
    page_size: int = PAGE_SIZE
    suites: tuple[str, ...] = DEFAULT_SUITES
    methods: tuple[str, ...] = ()
    docs: str = "examples"


@dataclass(frozen=True)
class Served:
    """A server built from settings and a request, not yet running.

    Attributes:
        request: What was asked for.
        settings: The settings it was built from.
        server: The MCP server.
        service: Runs the calls and submissions (its ``store`` is the run store).
        sessions: The session states.
        tokens: The deployment's session-token signer.
        protocol: The limits of every request (its ``message_bytes`` is what the stdio transport reads at most).
        fixtures: A fixture suite is served (its tools talk to the client mid-call: answers go on streams).
    """

    request: ServeRequest
    settings: Settings
    server: Server[Any]
    service: MethodService
    sessions: Sessions
    tokens: TokenSigner
    protocol: ProtocolLimits
    fixtures: bool = False

    @property
    def transport(self) -> str:
        """``stdio`` or ``http``: the request's transport."""
        return self.request.transport

    def http_service(self, sock: socket.socket | None = None) -> HTTPService:
        """The Streamable HTTP service of this server: listening on the request's host and port (or on ``sock``, bound
        for them already: ``pau_mcp.server.listen_http``), with the settings' token, sign-in and HTTP limits, and not
        yet serving.

        ``pau_mcp.server.serve_http`` serves it; a caller with its own thread and event loop (the server tests)
        runs ``service.uvicorn_server().serve([service.sock])`` instead.

        Raises:
            pau_mcp.server.TransportError: a non-loopback address without a token, or the port is taken.
        """
        from .server import bind_http, sign_in, verify_bearer

        request, settings = self.request, self.settings
        return bind_http(
            self.server, request.host, request.port, settings.token, request.stateless,
            limits=HTTPLimits.from_settings(settings), tokens=self.tokens, on_session_end=self.sessions.end_mcp_session,
            handshake_streams=self.fixtures, signin=sign_in(settings, verify_bearer(settings.token, self.tokens)),
            sock=sock,
        )  # fmt: skip


def assemble_server(
    settings: Settings,
    request: ServeRequest,
    *,
    sandboxes: SandboxMaker | None = None,
    progress: Callable[[str], None] | None = None,
) -> Served:
    """The server ``request`` asks for under ``settings``, built in this process and not started.

    Nothing process-wide is done (no logging set-up, no transport): the caller runs ``server``
    (``pau_mcp.server.serve_streams`` serves it as stdio does, over any pair of message streams) or its
    ``http_service()``, and when done closes ``service.store`` and whatever sandboxes were built for it.

    Args:
        settings: The deployment's settings (store, suites' directories, key, sandbox and every limit).
        request: What to serve and how.
        sandboxes: Builds the sandboxes the settings describe (default: ``make_sandbox``, in the background for a
            stdio server, which answers its host at once); a caller that holds an equivalent sandbox can hand it
            out instead of starting another.
        progress: Receives progress lines while the sandbox starts and examples are drawn.

    Raises:
        AssemblyError: an unknown suite, method or documentation source, a store that cannot be opened, a key that
            cannot be read, or ``--feedback score`` without the scorer (``usage``).
    """
    if sandboxes is None:
        # A stdio server answers its host at once, even on the first start: the sandbox is built meanwhile.
        sandboxes = background(make_sandbox) if request.transport == "stdio" else make_sandbox
    feedback = _feedback(settings, sandboxes) if request.feedback == "score" else None
    catalog_suites, fixtures = fixture_suites(list(request.suites))
    try:
        docs = _tool_docs(settings, request.docs, catalog_suites)
        tokens = TokenSigner(settings.deployment_key(), source=settings.deployment_key_source())
        service, sessions = create_service(
            settings, catalog_suites, list(request.methods), request.run, request.transport, feedback,
            progress=progress, processes=True, sandboxes=sandboxes, docs=docs, allow_empty=fixtures is not None,
        )  # fmt: skip
    except (ManifestError, SettingsError, StoreError) as exc:
        raise AssemblyError(str(exc)) from None
    protocol = ProtocolLimits.from_settings(settings, page_size=request.page_size)
    server = build_server(
        service, sessions, protocol, tokens=tokens, stateless=request.stateless, fixtures=fixtures,
        state_key=settings.deployment_key(),
    )  # fmt: skip
    return Served(request, settings, server, service, sessions, tokens, protocol, fixtures is not None)


def _default_run(transport: str) -> str:
    """The run a server's sessions are recorded under when its request names none: a new one per start."""
    return f"{transport}-{time.strftime('%Y%m%d-%H%M%S')}"


def prepare_processes(settings: Settings, request: ServeRequest) -> ServeRequest:
    """``request`` as each of ``settings.processes`` server processes serves it (``pau_mcp.server.supervisor``).

    What the processes must share is settled here, once, before they exist: the run (a name of its own per process
    would split one server's sessions over several runs) and the deployment key (created on first use: the
    processes would race to create it). One process serves ``request`` as it is.

    Raises:
        AssemblyError: more than one process for stdio, off Linux, or without ``stateless`` (``usage``); the key
            cannot be read or created.
    """
    count = settings.processes
    if count == 1:
        return request
    flag = f"--processes {count}"
    if request.transport != "http":
        raise AssemblyError(f"{flag} serves HTTP: add --transport http (a stdio server is one process by design)",
                            usage=True)  # fmt: skip
    if not sys.platform.startswith("linux"):
        raise AssemblyError(
            f"{flag} needs Linux (the kernel spreading connections over the processes' sockets, and the processes "
            "ending with their supervisor); run replicas behind a proxy instead (docs/server.md, Replicas)",
            usage=True,
        )
    if not request.stateless:
        raise AssemblyError(
            f"{flag} needs --stateless: each process answers whatever connection the kernel hands it, and a "
            "handshake-era MCP session would live in one process only (2026-07-28 clients are stateless anyway; "
            "see docs/server.md, Processes)",
            usage=True,
        )
    try:
        settings.deployment_key()
    except SettingsError as exc:
        raise AssemblyError(str(exc)) from None
    return dataclasses.replace(request, run=request.run or _default_run(request.transport))


def exposure_warning(settings: Settings, request: ServeRequest) -> str | None:
    """What an HTTP server of ``request`` would expose that its operator should know (``server.examples``), or
    None: the published examples of the packaged suites served on a non-loopback address."""
    from .server.examples import exposure_warning as warning

    return warning(settings.examples, request.host, _public_suites(settings, request.suites))


def _public_suites(settings: Settings, suites: Sequence[str]) -> list[str]:
    """The suites among ``suites`` that ship with pau-mcp, and so are public with their gold descriptions."""
    from .manifests import packaged_manifests

    try:
        packaged = packaged_manifests().resolve()
        store = ManifestStore(settings.manifests)
        return [name for name in suites if store.suite(name).path.resolve().parent == packaged]
    except ManifestError:
        return []


def _tool_docs(settings: Settings, source: str, suites: list[str]) -> ToolDocs | None:
    """The ``ToolDocs`` ``--docs SOURCE`` serves for ``suites`` (None: the initial examples, as always).

    Raises:
        AssemblyError: the source cannot be read, or would serve gold text under another name.
        ManifestError: a suite does not exist or is broken.
    """
    from .documentation import DocsError, load_documentation

    try:
        found = load_documentation(source, settings.db_path, ManifestStore(settings.manifests), suites)
    except DocsError as exc:
        raise AssemblyError(str(exc)) from None
    if found is None:
        return None
    for method_id in found.quoting:
        log.warning(
            "--docs %s: the documentation of %s holds its gold description or nearly; it is served with its header "
            "only", source, method_id,
        )  # fmt: skip
    if found.skipped and found.source not in ("none", "gold"):
        log.warning(
            "--docs %s documents %d of %d methods; the others are served with their header only (e.g. %s: %s)",
            source, len(found.texts), len(found.texts) + len(found.skipped), *next(iter(found.skipped.items())),
        )  # fmt: skip
    return ToolDocs(found.source, found.texts)


def _feedback(settings: Settings, sandboxes: SandboxMaker) -> Feedback:
    try:
        from .scoring import feedback_for
    except ImportError:
        raise AssemblyError(
            "--feedback score needs the scorer, which this installation does not have", usage=True
        ) from None
    return feedback_for(settings, sandboxes=sandboxes)


def create_service(
    settings: Settings, suites: Iterable[str], methods: Iterable[str], run: str | None, transport: str,
    feedback: Feedback | None = None, progress: Any = None, processes: bool = False,
    sandboxes: SandboxMaker = make_sandbox, docs: ToolDocs | None = None, allow_empty: bool = False,
) -> tuple[MethodService, Sessions]:  # fmt: skip
    """A method service and its session registry from settings (``assemble_server``'s, and ``pau-mcp call``'s).

    ``processes`` runs calls in sandbox worker processes (a server under load); ``call`` runs one in-process.
    ``sandboxes`` builds the sandbox from the settings (``make_sandbox``, unless a caller has an equivalent one).
    The initial examples are those of ``settings.examples`` (``serve_examples``), drawn in that sandbox.
    ``docs`` is documentation to serve in place of the initial examples (``serve --docs``), built by the caller.
    ``allow_empty`` serves no method when ``suites`` is empty (a server of fixture suites only).

    Raises:
        ManifestError: an unknown suite or method.
        SettingsError: the deployment key cannot be read or created.
    """
    catalog = Catalog(
        ManifestStore(settings.manifests), suites, methods, key=settings.deployment_key(), docs=docs,
        allow_empty=allow_empty,
    )  # fmt: skip
    store = RunStore(settings.db_path)
    run_name = run or _default_run(transport)
    config: dict[str, Any] = {"suites": list(suites), "budget": settings.budget, "examples": settings.examples}
    if settings.protocol != DEFAULT_PROTOCOL:
        config["protocol"] = settings.protocol
    if docs is not None:
        config["docs"] = docs.source
    run_id = store.ensure_run(run_name, kind="serve", config=config)
    rules = RULES[settings.protocol]
    # Calls of every credential share the workers fairly (``FairShare``): the sandbox gets the reserved ones too.
    box_settings, shares = shared_sandbox(exploration_settings(settings))
    sandbox = sandboxes(box_settings if processes else exploration_settings(settings), progress=progress,
                        processes=processes)  # fmt: skip
    catalog = serve_examples(catalog, settings, sandbox, progress=progress)
    service = MethodService(
        catalog, sandbox, store, ServiceLimits.from_settings(settings), feedback,
        run_wrong_arity=rules.runs_wrong_arity, shares=shares,
    )  # fmt: skip
    return service, Sessions(store, run_id, transport)
