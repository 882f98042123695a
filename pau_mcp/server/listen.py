"""``subscriptions/listen`` (MCP 2026-07-28): the stream on which a client hears of changes without asking.

A client of the 2026-07-28 era has no standing connection; it opens a stream by sending ``subscriptions/listen``
with the notifications it wants (a list of tools, prompts or resources changed, and, with the Tasks extension, the
status of given tasks), and the response is the stream. The first frame acknowledges what the server will send;
every frame carries the request's id under ``_meta["io.modelcontextprotocol/subscriptionId"]``; nothing the client
did not ask for is ever sent on it.

Events are published on an in-process ``Bus`` by whatever changes (a fixture announcing a changed tool list, a task
changing status); each open stream forwards those its filter admits. The bus is one server process's: a replica's
streams hear of that replica's changes only (a task's status is in the run store, so ``tasks/get`` on any replica
sees it; only the push is local).

Every limit is per process: at most ``max_streams`` streams open, ``per_owner`` of them for one credential, and a
stream whose client stops reading is ended once ``backlog`` events wait for it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import anyio.lowlevel
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import (
    SUBSCRIPTION_ID_META_KEY,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
    event_matches,
    event_to_notification,
)

from .capabilities import TASKS_EXTENSION, declares_tasks, missing_capability

__all__ = [
    "Bus",
    "Event",
    "Listener",
    "PromptsListChanged",
    "ResourceUpdated",
    "ResourcesListChanged",
    "TaskNotification",
    "TaskStatusChanged",
    "ToolsListChanged",
]

log = logging.getLogger("pau_mcp.server")

#: The filter key a client names the tasks it wants status notifications for (SEP-2663).
_TASK_IDS = "taskIds"


@dataclass(frozen=True)
class TaskStatusChanged:
    """A task's status changed: ``task`` is its ``DetailedTask`` as ``tasks/get`` would answer it now.

    Attributes:
        task_id: The task.
        owner: The run-store session of the credential that owns it (no one else hears of it).
        task: The wire form of the task (``taskId``, ``status``, timestamps, and its result, error or input requests).
    """

    task_id: str
    owner: int
    task: dict[str, Any] = field(compare=False)


#: What a stream may carry: the SDK's list-changed and resource events, and task status.
Event = ServerEvent | TaskStatusChanged


class Bus:
    """In-process fan-out of events to the open streams (synchronous delivery; a listener must not raise)."""

    def __init__(self) -> None:
        self._listeners: dict[object, Callable[[Event], None]] = {}

    async def publish(self, event: Event) -> None:
        """Deliver ``event`` to every stream listening now."""
        for listener in list(self._listeners.values()):
            try:
                listener(event)
            except Exception:  # one broken stream must not keep the event from the others
                log.exception("a listen stream failed to take an event")
        await anyio.lowlevel.checkpoint()

    def subscribe(self, listener: Callable[[Event], None]) -> Callable[[], None]:
        """Register ``listener``; returns the call that removes it."""
        token = object()
        self._listeners[token] = listener

        def unsubscribe() -> None:
            self._listeners.pop(token, None)

        return unsubscribe


#: Resolves the credential a request speaks for (its run-store session) and keeps, of the task ids a listen request
#: names, those that credential owns.
OwnedTasks = Callable[[ServerRequestContext[Any], Sequence[str]], Awaitable[tuple[int, list[str]]]]


class Listener:
    """Serves ``subscriptions/listen``: one request is one stream, until the client closes it.

    Args:
        bus: Where the events come from.
        owned_tasks: The requesting credential and which of the named tasks it owns (others are not acknowledged).
        max_streams: Streams open at once in this process.
        per_owner: Streams one credential may hold open at once.
        backlog: Events waiting for a slow reader before its stream is ended.
    """

    def __init__(
        self, bus: Bus, owned_tasks: OwnedTasks, *, max_streams: int = 1024, per_owner: int = 16, backlog: int = 256
    ) -> None:
        self._bus = bus
        self._owned_tasks = owned_tasks
        self._max_streams = max_streams
        self._per_owner = per_owner
        self._backlog = backlog
        self._open: dict[Hashable, int] = {}

    def open_streams(self) -> int:
        """Streams open now (for tests and diagnostics)."""
        return sum(self._open.values())

    async def __call__(
        self, ctx: ServerRequestContext[Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        subscription = ctx.request_id
        if subscription is None:
            raise MCPError(types.INVALID_REQUEST, "subscriptions/listen is a request: give it an id")
        wanted = params.notifications
        extra = wanted.model_extra or {}
        task_ids = extra.get(_TASK_IDS)
        if task_ids is not None and (
            not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids) or len(task_ids) > 1000
        ):
            raise MCPError(types.INVALID_PARAMS, "notifications.taskIds must be a list of at most 1000 task ids")
        if task_ids and not declares_tasks(ctx):
            raise missing_capability(
                {"extensions": {TASKS_EXTENSION: {}}},
                "task status notifications need the Tasks extension: declare io.modelcontextprotocol/tasks in the "
                "request's client capabilities (extensions)",
            )
        owner, tasks = await self._owned_tasks(ctx, task_ids or [])
        if self.open_streams() >= self._max_streams:
            raise MCPError(types.INTERNAL_ERROR, "too many listen streams are open on this server; retry later")
        if self._open.get(owner, 0) >= self._per_owner:
            raise MCPError(
                types.INVALID_REQUEST,
                f"this credential holds {self._per_owner} listen streams, the most it may: close one first",
            )
        honored = types.SubscriptionFilter(
            tools_list_changed=True if wanted.tools_list_changed else None,
            prompts_list_changed=True if wanted.prompts_list_changed else None,
            resources_list_changed=True if wanted.resources_list_changed else None,
            resource_subscriptions=list(wanted.resource_subscriptions) if wanted.resource_subscriptions else None,
            **({_TASK_IDS: tasks} if task_ids is not None else {}),
        )
        uris = frozenset(honored.resource_subscriptions or ())
        watched = frozenset(tasks)
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: subscription}
        send, receive = anyio.create_memory_object_stream[Event](self._backlog)

        def deliver(event: Event) -> None:
            if isinstance(event, TaskStatusChanged):
                admitted = event.task_id in watched and event.owner == owner
            else:
                admitted = event_matches(honored, uris, event)
            if not admitted:
                return
            try:
                send.send_nowait(event)
            except anyio.WouldBlock:
                log.warning("listen stream %r fell %d events behind; ending it", subscription, self._backlog)
                send.close()
            except anyio.ClosedResourceError:
                pass

        # Registered before the acknowledgement is sent, so nothing published meanwhile is lost; the
        # acknowledgement still goes first, as this task alone writes the stream.
        unsubscribe = self._bus.subscribe(deliver)
        self._open[owner] = self._open.get(owner, 0) + 1
        try:
            await ctx.session.send_notification(
                types.SubscriptionsAcknowledgedNotification(
                    params=types.SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)
                ),
                related_request_id=subscription,
            )
            async for event in receive:
                await ctx.session.send_notification(_notification(event, meta), related_request_id=subscription)
        finally:
            unsubscribe()
            send.close()
            receive.close()
            left = self._open.get(owner, 1) - 1
            if left:
                self._open[owner] = left
            else:
                self._open.pop(owner, None)
        return types.SubscriptionsListenResult(_meta=meta)


class TaskNotification(types.Notification[dict[str, Any], Literal["notifications/tasks"]]):
    """``notifications/tasks`` (SEP-2663): a task's whole ``DetailedTask``, as ``tasks/get`` would answer now."""

    method: Literal["notifications/tasks"] = "notifications/tasks"


def _notification(event: Event, meta: dict[str, Any]) -> Any:
    if isinstance(event, TaskStatusChanged):
        # The SDK's notification union does not know the extension's method; the session sends any model of this shape.
        return TaskNotification(params={**event.task, "_meta": meta})
    return event_to_notification(event, meta)
