"""How a request reaches its client while it is being answered: log messages, progress, questions, announcements.

Each protocol era carries these its own way, and a handler should not care which:

* **Log messages** (``notifications/message``) ride the request's own stream. In the handshake era the connection's
  ``logging/setLevel`` chooses the lowest level sent (kept per connection here, bounded, as a narrowing is); in the
  2026-07-28 era the request's ``_meta["io.modelcontextprotocol/logLevel"]`` does, and without it nothing is sent.
* **Progress** goes to the request's progress token, when it has one.
* **Questions** to the client (``elicitation/create``, ``sampling/createMessage``, ``roots/list``) are requests on
  the handshake era's stream, answered while the tool waits; the 2026-07-28 era has no server-to-client requests,
  so the questions end the round as an ``InputRequiredResult`` (SEP-2322): the client answers them by calling again
  with ``inputResponses`` and the ``requestState`` it was given, which carries the answers so far (sealed by the
  SDK's ``RequestStateBoundary`` with a key derived from the deployment key, so every replica can read it and no
  client can alter it) and the credential it belongs to.
* **Announcements** (a list changed) go on the ``Bus`` to the open ``subscriptions/listen`` streams.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, get_args

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.connection import allowed_log_levels
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .capabilities import ASKS, declares
from .listen import Bus, Event, PromptsListChanged, ResourcesListChanged, ToolsListChanged

__all__ = [
    "InputNeeded",
    "LogLevels",
    "RequestEffects",
    "announce",
    "carried_answers",
    "input_required",
    "state_boundary",
]

_LEVELS: tuple[types.LoggingLevel, ...] = get_args(types.LoggingLevel)
#: Connections whose log level is remembered at once (more than the open MCP sessions of any server).
_REMEMBERED = 10_000
#: The answers a requestState may carry, in bytes of JSON: what the client sent is bounded by the message limit,
#: and a state that grew past this over many rounds is refused rather than carried on.
_STATE_BYTES = 256 * 1024

_RESULTS: dict[str, type[types.Result]] = {
    "elicitation/create": types.ElicitResult,
    "sampling/createMessage": types.CreateMessageResult,
    "roots/list": types.ListRootsResult,
}
_CHANGES: dict[str, Event] = {
    "tools_list_changed": ToolsListChanged(),
    "prompts_list_changed": PromptsListChanged(),
    "resources_list_changed": ResourcesListChanged(),
}


class InputNeeded(Exception):  # noqa: N818 - not an error: the round ends to ask the client
    """A round of a 2026-07-28 request ends here to put ``questions`` to the client (SEP-2322).

    Attributes:
        questions: Key: ``{"method", "params"}``, what ``InputRequiredResult.inputRequests`` carries.
    """

    def __init__(self, questions: dict[str, dict[str, Any]]) -> None:
        super().__init__(f"{len(questions)} question(s) for the client")
        self.questions = questions


class LogLevels:
    """The lowest level each handshake-era connection asked to be sent (``logging/setLevel``), bounded."""

    def __init__(self) -> None:
        self._levels: OrderedDict[str, types.LoggingLevel] = OrderedDict()
        self._lock = threading.Lock()

    def set(self, connection: str, level: types.LoggingLevel) -> None:
        """Remember ``level`` for ``connection`` (the oldest connection is forgotten past the bound)."""
        with self._lock:
            self._levels[connection] = level
            self._levels.move_to_end(connection)
            while len(self._levels) > _REMEMBERED:
                self._levels.popitem(last=False)

    def sends(self, connection: str | None, level: types.LoggingLevel) -> bool:
        """Whether a message at ``level`` goes to ``connection`` (every level until it chose one)."""
        with self._lock:
            chosen = self._levels.get(connection) if connection is not None else None
        return chosen is None or _LEVELS.index(level) >= _LEVELS.index(chosen)


class RequestEffects:
    """The ``fixtures.Effects`` of a request being answered (not a task): its stream, its era's way of asking.

    Args:
        ctx: The request.
        bus: Where announcements go.
        levels: The handshake era's levels per connection.
        connection: The request's connection (a handshake-era MCP session or stdio process), if it has one.
    """

    def __init__(self, ctx: ServerRequestContext[Any], bus: Bus, levels: LogLevels, connection: str | None) -> None:
        self._ctx = ctx
        self._bus = bus
        self._levels = levels
        self._connection = connection
        self.modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS

    def _related(self) -> Any:
        return self._ctx.request_id

    async def log(self, level: types.LoggingLevel, data: Any) -> None:
        ctx = self._ctx
        if self.modern:
            if level not in allowed_log_levels(ctx.protocol_version, ctx.meta):
                return
        elif not self._levels.sends(self._connection, level):
            return
        await ctx.session.send_notification(
            types.LoggingMessageNotification(
                params=types.LoggingMessageNotificationParams(level=level, data=data, logger="pau-mcp")
            ),
            related_request_id=self._related(),
        )

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        token = (self._ctx.meta or {}).get("progress_token")
        if token is None:
            return
        await self._ctx.session.send_progress_notification(
            token, progress, total, message, related_request_id=self._related()
        )

    def can_answer(self, method: str) -> bool:
        return declares(self._ctx, ASKS[method])

    async def ask(self, questions: dict[str, dict[str, Any]]) -> dict[str, Any]:
        if self.modern:
            raise InputNeeded(questions)
        session = self._ctx.session
        if not session.can_send_request:
            raise MCPError(
                types.INTERNAL_ERROR,
                "this tool asks the client questions, and this connection cannot carry a request to the client "
                "(HTTP without streaming responses, or --stateless); use stdio, or the 2026-07-28 protocol",
            )
        answers: dict[str, Any] = {}
        for key, question in questions.items():
            request = types.server_request_adapter.validate_python(question, by_name=False)
            answer = await session.send_request(
                request,
                _RESULTS[question["method"]],
                metadata=ServerMessageMetadata(related_request_id=self._related()),
            )
            answers[key] = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
        return answers

    async def notify(self, change: str) -> None:
        await announce(self._bus, change)


async def announce(bus: Bus, change: str) -> None:
    """Announce ``tools_list_changed``, ``prompts_list_changed`` or ``resources_list_changed`` on ``bus``."""
    await bus.publish(_CHANGES[change])


def state_boundary(deployment_key: str) -> RequestStateBoundary:
    """The SDK middleware that seals every ``requestState`` this server hands out and refuses any other.

    Its key is derived from the deployment key, so every replica of a deployment reads the others' states; its
    audience is this server's name, so no other service's state is taken for one. The credential a state belongs
    to is in the state itself (``input_required``), checked by ``carried_answers``.
    """
    secret = hmac.new(deployment_key.encode(), b"pau-mcp request state", hashlib.sha256).hexdigest()
    return RequestStateBoundary(RequestStateSecurity(keys=[secret], bind_principal=None), default_audience="pau-mcp")


def input_required(questions: dict[str, dict[str, Any]], answers: Mapping[str, Any], owner: int) -> dict[str, Any]:
    """The ``InputRequiredResult`` that ends a round: the questions, and a state carrying the answers so far.

    Raises:
        MCPError: the answers so far are too large to carry (the client sent far more than any question asked for).
    """
    state = json.dumps({"owner": owner, "answers": answers}, separators=(",", ":"), default=str)
    if len(state) > _STATE_BYTES:
        raise MCPError(
            types.INVALID_PARAMS,
            f"the answers so far are {len(state):,} bytes, more than a requestState carries ({_STATE_BYTES:,}); "
            "answer with less, or start the request again",
        )
    return {"resultType": "input_required", "inputRequests": questions, "requestState": state}


def carried_answers(params: Any, owner: int, asked: set[str]) -> dict[str, Any]:
    """The answers a retried request brings: those carried in its ``requestState`` (already verified by the
    boundary) and its ``inputResponses`` to keys this request asks; other keys are ignored.

    Raises:
        MCPError: the state belongs to another credential, or is not one this server minted.
    """
    answers: dict[str, Any] = {}
    state = getattr(params, "request_state", None)
    if state:
        try:
            carried = json.loads(state)
            owned = carried["owner"] == owner
            answers.update(carried["answers"])
        except (ValueError, KeyError, TypeError):
            raise MCPError(types.INVALID_PARAMS, "Invalid or expired requestState") from None
        if not owned:
            raise MCPError(
                types.INVALID_PARAMS, "this requestState belongs to another credential; start the request again"
            )
    for key, response in (getattr(params, "input_responses", None) or {}).items():
        if key in asked:
            answers[key] = (
                response.model_dump(by_alias=True, mode="json", exclude_none=True)
                if hasattr(response, "model_dump")
                else response
            )
    return answers
