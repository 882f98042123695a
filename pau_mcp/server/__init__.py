"""The MCP server: every hidden method as a black-box tool, with budgets, a run store and ``submit``."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from ..config import Settings
from ..manifests import ManifestStore
from ..runstore import RunStore
from ..sandboxing import SandboxMaker, make_sandbox
from .app import PAGE_SIZE, build_server
from .catalog import FACTS_KEY, OUTPUT_SCHEMA, Catalog, Exposed, KnownExample, MethodFacts, ToolDocs
from .launch import LaunchError, http_server
from .service import Feedback, MethodService, Reply
from .sessions import Budget, Identity, SessionRefused, Sessions, SessionState, label_problem
from .tokens import SessionToken, TokenSigner
from .transport import (
    HTTPLimits,
    HTTPService,
    TransportError,
    bind_http,
    check_exposure,
    run_http,
    run_stdio,
    serve_http,
    serve_streams,
)
from .wire import message_limit

__all__ = [
    "FACTS_KEY",
    "OUTPUT_SCHEMA",
    "PAGE_SIZE",
    "Budget",
    "Catalog",
    "Exposed",
    "Feedback",
    "HTTPLimits",
    "HTTPService",
    "Identity",
    "KnownExample",
    "LaunchError",
    "MethodFacts",
    "MethodService",
    "Reply",
    "SessionRefused",
    "SessionState",
    "SessionToken",
    "Sessions",
    "TokenSigner",
    "ToolDocs",
    "TransportError",
    "bind_http",
    "check_exposure",
    "build_server",
    "create_service",
    "http_server",
    "label_problem",
    "message_limit",
    "run_http",
    "run_stdio",
    "serve_http",
    "serve_streams",
]


def create_service(
    settings: Settings, suites: Iterable[str], methods: Iterable[str], run: str | None, transport: str,
    feedback: Feedback | None = None, progress: Any = None, processes: bool = False,
    sandboxes: SandboxMaker = make_sandbox, docs: ToolDocs | None = None,
) -> tuple[MethodService, Sessions]:  # fmt: skip
    """A method service and its session registry from settings (shared by ``serve`` and ``call``).

    ``processes`` runs calls in sandbox worker processes (a server under load); ``call`` runs one in-process.
    ``sandboxes`` builds the sandbox from the settings (``make_sandbox``, unless a caller has an equivalent one).
    ``docs`` is documentation to serve in place of the initial examples (``serve --docs``), built by the caller.

    Raises:
        ManifestError: an unknown suite or method.
        SettingsError: the deployment key cannot be read or created.
    """
    catalog = Catalog(ManifestStore(settings.manifests), suites, methods, key=settings.deployment_key(), docs=docs)
    store = RunStore(settings.db_path)
    run_name = run or f"{transport}-{time.strftime('%Y%m%d-%H%M%S')}"
    config: dict[str, Any] = {"suites": list(suites), "budget": settings.budget}
    if docs is not None:
        config["docs"] = docs.source
    run_id = store.ensure_run(run_name, kind="serve", config=config)
    service = MethodService(
        catalog, sandboxes(settings, progress=progress, processes=processes), store, settings.budget, feedback,
        feedback_limit=settings.feedback_limit,
        max_argument_bytes=settings.max_argument_kb * 1024,
    )  # fmt: skip
    return service, Sessions(store, run_id, transport, tools={e.method.id: e.tool for e in catalog})
