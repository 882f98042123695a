"""The MCP server: every hidden method as a black-box tool, with budgets, a run store and ``submit``."""

from __future__ import annotations

from typing import Any

from wasm_runtime import SandboxInterface

from ..config import Settings
from ..protocol import RULES
from ..sandboxing import make_sandbox
from .app import PAGE_SIZE, build_server, verify_bearer
from .catalog import Catalog, Exposed, ToolDocs
from .examples import EXAMPLE_SOURCES, ServedExamples, cache_path, deployment_examples
from .launch import LaunchError, http_server
from .service import Feedback, MethodService, Reply
from .sessions import DEFAULT_LABEL, Credential, SessionRefused, Sessions, SessionState
from .signin import sign_in
from .slots import CallSlots, TooManyCalls
from .supervisor import REFUSED, ProcessesError, serve_processes
from .tokens import SessionToken, TokenSigner
from .transport import (
    HTTPLimits,
    HTTPService,
    TransportError,
    bind_http,
    check_exposure,
    listen_http,
    run_http,
    run_stdio,
    serve_http,
    serve_streams,
)
from .wire import message_limit

__all__ = [
    "DEFAULT_LABEL",
    "REFUSED",
    "PAGE_SIZE",
    "CallSlots",
    "Catalog",
    "Credential",
    "EXAMPLE_SOURCES",
    "Exposed",
    "Feedback",
    "HTTPLimits",
    "HTTPService",
    "LaunchError",
    "ProcessesError",
    "MethodService",
    "Reply",
    "ServedExamples",
    "SessionRefused",
    "SessionState",
    "SessionToken",
    "Sessions",
    "TokenSigner",
    "ToolDocs",
    "TooManyCalls",
    "TransportError",
    "bind_http",
    "check_exposure",
    "build_server",
    "exploration_settings",
    "http_server",
    "listen_http",
    "message_limit",
    "run_http",
    "run_stdio",
    "serve_http",
    "serve_examples",
    "serve_processes",
    "serve_streams",
    "sign_in",
    "verify_bearer",
]


def serve_examples(
    catalog: Catalog, settings: Settings, sandbox: SandboxInterface | None = None, progress: Any = None
) -> Catalog:
    """``catalog`` serving the initial examples ``settings.examples`` names: itself for ``published``; for
    ``deployment``, examples drawn in ``sandbox`` with the deployment key (or read from their cache in the data
    directory).

    Args:
        catalog: The methods served.
        settings: ``examples``, the key and the data directory.
        sandbox: Runs the drawn inputs (None: one is made for it and closed).
        progress: Receives progress lines while examples are drawn.

    Raises:
        SettingsError: the deployment key cannot be read or created.
    """
    if settings.examples == "published":
        return catalog
    key = settings.deployment_key()
    box = make_sandbox(settings, progress=progress) if sandbox is None else sandbox
    try:
        served = deployment_examples(
            [e.method for e in catalog.in_suite_order()], box, key, cache=cache_path(settings.data_dir, key),
            progress=progress,
        )  # fmt: skip
    finally:
        if sandbox is None:
            box.close()
    return catalog.with_examples(served)


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
