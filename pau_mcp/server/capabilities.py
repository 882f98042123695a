"""What a client declared it can do, and the error for a request that needs more (MissingRequiredClientCapability).

In the 2026-07-28 era each request carries its client's capabilities in ``_meta``; in the handshake era they are the
``initialize`` request's. Either way the SDK hands them to a handler as ``ctx.session.client_capabilities``, and the
server never relies on one the client did not declare: it asks only what the client can answer, and refuses a
request it cannot serve without one with -32021 (HTTP 400), naming the capability.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError

__all__ = ["ASKS", "TASKS_EXTENSION", "declares", "declares_tasks", "missing_capability"]

#: The Tasks extension's identifier (SEP-2663), under which a client declares it and the server advertises it.
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

#: The requests a server may put to its client, and the client capability each needs.
ASKS: dict[str, str] = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}


def declares(ctx: ServerRequestContext[Any], capability: str) -> bool:
    """Whether the request's client declared ``capability`` (``elicitation``, ``sampling``, ``roots``, ...)."""
    declared = ctx.session.client_capabilities
    return declared is not None and getattr(declared, capability, None) is not None


def declares_tasks(ctx: ServerRequestContext[Any]) -> bool:
    """Whether the request's client declared the Tasks extension (for this request, in the 2026-07-28 era)."""
    declared = ctx.session.client_capabilities
    extensions = declared.extensions if declared is not None else None
    return bool(extensions) and TASKS_EXTENSION in (extensions or {})


def missing_capability(capabilities: dict[str, Any], message: str) -> MCPError:
    """The error for a request that needs a client capability the client did not declare (-32021, HTTP 400).

    Args:
        capabilities: The capabilities needed, in the shape of ``ClientCapabilities`` (e.g. ``{"sampling": {}}``).
        message: What is missing and what to do.
    """
    return MCPError(types.MISSING_REQUIRED_CLIENT_CAPABILITY, message, data={"requiredCapabilities": capabilities})
