"""The MCP server: every hidden method as a black-box tool, with budgets, a run store and ``submit``."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from ..config import Settings
from ..manifests import ManifestStore
from ..protocol import DEFAULT_PROTOCOL, RULES
from ..runstore import RunStore
from ..sandboxing import SandboxMaker, make_sandbox
from .app import PAGE_SIZE, build_server
from .catalog import FACTS_KEY, OUTPUT_SCHEMA, Catalog, Exposed, KnownExample, MethodFacts
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
    "TransportError",
    "bind_http",
    "check_exposure",
    "build_server",
    "create_service",
    "exploration_settings",
    "http_server",
    "label_problem",
    "message_limit",
    "run_http",
    "run_stdio",
    "serve_http",
    "serve_streams",
]


def exploration_settings(settings: Settings) -> Settings:
    """The settings agents' calls run under: a protocol's own limits where the operator set none (``--protocol
    reference``: the reference's 30 s per call and, for its unbounded results, 1 MiB; docs/protocol.md)."""
    rules = RULES[settings.protocol]
    given = settings.model_fields_set
    update: dict[str, Any] = {}
    if rules.exploration_timeout_s is not None and "timeout_s" not in given:
        update["timeout_s"] = rules.exploration_timeout_s
    if rules.exploration_output_kb is not None and "max_output_kb" not in given:
        update["max_output_kb"] = rules.exploration_output_kb
    return settings.model_copy(update=update) if update else settings


def create_service(
    settings: Settings, suites: Iterable[str], methods: Iterable[str], run: str | None, transport: str,
    feedback: Feedback | None = None, progress: Any = None, processes: bool = False,
    sandboxes: SandboxMaker = make_sandbox,
) -> tuple[MethodService, Sessions]:  # fmt: skip
    """A method service and its session registry from settings (shared by ``serve`` and ``call``).

    ``processes`` runs calls in sandbox worker processes (a server under load); ``call`` runs one in-process.
    ``sandboxes`` builds the sandbox from the settings (``make_sandbox``, unless a caller has an equivalent one).

    Raises:
        ManifestError: an unknown suite or method.
        SettingsError: the deployment key cannot be read or created.
    """
    catalog = Catalog(ManifestStore(settings.manifests), suites, methods, key=settings.deployment_key())
    store = RunStore(settings.db_path)
    run_name = run or f"{transport}-{time.strftime('%Y%m%d-%H%M%S')}"
    config: dict[str, Any] = {"suites": list(suites), "budget": settings.budget}
    if settings.protocol != DEFAULT_PROTOCOL:
        config["protocol"] = settings.protocol
    run_id = store.ensure_run(run_name, kind="serve", config=config)
    rules = RULES[settings.protocol]
    service = MethodService(
        catalog, sandboxes(exploration_settings(settings), progress=progress, processes=processes), store,
        settings.budget, feedback, feedback_limit=settings.feedback_limit,
        max_argument_bytes=settings.max_argument_kb * 1024, run_wrong_arity=rules.runs_wrong_arity,
    )  # fmt: skip
    return service, Sessions(store, run_id, transport, tools={e.method.id: e.tool for e in catalog})
