"""The Tasks extension (SEP-2663, ``io.modelcontextprotocol/tasks``): a long ``tools/call`` answered with a task.

A client that declares the extension in a request's capabilities (2026-07-28 era) may get, instead of the call's
result, a ``CreateTaskResult`` (``resultType: "task"``): a handle it polls with ``tasks/get`` until the task is
``completed`` (its result inlined), ``failed`` (a JSON-RPC error inlined) or ``cancelled``; a task that needs the
client's answers is ``input_required`` with its questions inlined, answered with ``tasks/update``; ``tasks/cancel``
asks it to stop. The server decides, per call:

* a call of pau-mcp's own tools (a hidden method's, or ``submit`` when it scores with the judge and code match)
  that is still running after ``after_s`` (one second) becomes a task; one that ends sooner is answered as always;
* a fixture tool becomes a task at its ``task`` step.

A client that does not declare the extension gets today's behaviour (a tool that can only run as a task is refused
with -32021 naming the extension), and so does every handshake-era client: a task is a 2026-07-28 result.

A task's state lives in the run store (``RunStore.create_task`` and the rest), owned by the credential that made it,
so ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` work on any server process sharing the store; the work runs in
the process that received the call, which reads answers and cancellation from the store (at once when they reach it,
within half a second when another replica took them). A task of another credential, or none, is an unknown task
(-32602). Each change of status is published as ``notifications/tasks`` to the ``subscriptions/listen`` streams that
asked for it (``listen``). A task whose process went away without finishing it is ``failed`` once its time to live
(an hour) is over; after that it may be discarded.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import anyio.abc
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from pydantic import BaseModel, ConfigDict, Field

from ..contract import TerminalTaskStatus
from ..runstore import TERMINAL_STATUSES, RunStore, TaskRow
from .capabilities import ASKS, TASKS_EXTENSION, declares_tasks, missing_capability
from .effects import announce
from .listen import Bus, TaskStatusChanged
from .loopstore import LoopStore

__all__ = ["TASK_METHODS", "TaskBoard", "TaskEffects", "Work"]

log = logging.getLogger("pau_mcp.server")

#: How long a task is kept, from its creation (and how long a task whose process went away stays ``working``).
TTL_MS = 3_600_000
#: How often a client should poll a task.
POLL_MS = 500
#: A call of pau-mcp's own tools still running after this many seconds becomes a task.
AFTER_S = 1.0
#: How often a running task reads its answers and cancellation from the store (those other processes took).
_WATCH_S = 0.5
#: The methods of the extension (``tasks/result`` and ``tasks/list`` are gone from it: -32601).
TASK_METHODS = ("tasks/get", "tasks/update", "tasks/cancel")

#: The call a task runs: the result of ``tools/call`` as its wire dict, or an ``MCPError`` (a protocol error).
Work = Callable[[], Awaitable[dict[str, Any]]]
_T = TypeVar("_T")


class _TaskParams(types.RequestParams):
    model_config = ConfigDict(extra="allow")

    task_id: str = Field(alias="taskId", min_length=1, max_length=200)


class _UpdateParams(_TaskParams):
    input_responses: dict[str, Any] = Field(alias="inputResponses")


class _Nothing(BaseModel):
    """An empty result (the acknowledgement of ``tasks/update`` and ``tasks/cancel``)."""


@dataclass
class _Local:
    """A task running in this process: its cancel scope, and the event that wakes it when answers arrive."""

    scope: anyio.CancelScope
    answered: anyio.Event


class TaskEffects:
    """The ``fixtures.Effects`` of a fixture running as a task: questions park it ``input_required`` until
    ``tasks/update`` answers them; a task has no stream, so it sends no log messages and no progress (SEP-2663)."""

    def __init__(self, board: TaskBoard, task_id: str, owner: int, capabilities: Callable[[str], bool]) -> None:
        self._board = board
        self._task_id = task_id
        self._owner = owner
        self._capable = capabilities

    async def log(self, level: types.LoggingLevel, data: Any) -> None:
        return None

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        return None

    def can_answer(self, method: str) -> bool:
        return self._capable(ASKS[method])

    async def ask(self, questions: dict[str, dict[str, Any]]) -> dict[str, Any]:
        return await self._board.ask(self._task_id, self._owner, questions)

    async def notify(self, change: str) -> None:
        await announce(self._board.bus, change)


class TaskBoard:
    """The tasks of one server process, with their state in the run store.

    Args:
        store: Where tasks are kept.
        bus: Where their status changes are announced.
        after_s: How long a call of pau-mcp's own tools may run before it becomes a task.
    """

    def __init__(self, store: RunStore, bus: Bus, after_s: float = AFTER_S) -> None:
        self.store = store
        self.bus = bus
        self.after_s = after_s
        self._stored = LoopStore(store)
        self._groups: list[anyio.abc.TaskGroup] = []
        self._local: dict[str, _Local] = {}

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run tasks for as long as the body runs (the server's lifespan); those still running are cancelled at the
        end, and stay ``working`` in the store until their time to live is over."""
        async with anyio.create_task_group() as group:
            self._groups.append(group)
            try:
                yield
            finally:
                self._groups.remove(group)
                group.cancel_scope.cancel()

    def _group(self) -> anyio.abc.TaskGroup:
        if not self._groups:
            raise MCPError(types.INTERNAL_ERROR, "this server runs no tasks (it was not started with its lifespan)")
        return self._groups[-1]

    async def _store(self, function: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        # Never on the loop when it could wait: a task's watcher reads the store every half second, and a read on the
        # loop waited for the store's in-process lock while another agent's reservation held it waiting for
        # another writer's lock (issue 32), stalling every request of every agent for as long.
        return await self._stored.run(function, *args, **kwargs)

    # -- making tasks ---------------------------------------------------------------------------------------------

    async def _create(self, owner: int, tool: str, message: str) -> TaskRow:
        task_id = secrets.token_hex(16)
        row = await self._store(self.store.create_task, task_id, owner, tool, TTL_MS, POLL_MS, message)
        await self._announce(row)
        return row

    async def start(
        self, owner: int, tool: str, body: Callable[[TaskEffects], Awaitable[dict[str, Any]]],
        capabilities: Callable[[str], bool],
    ) -> dict[str, Any]:  # fmt: skip
        """Make a task of ``body`` now; returns its ``CreateTaskResult`` once the task is in the store.

        Args:
            owner: The run-store session of the credential that owns it.
            tool: The tool called.
            body: Runs the rest of the call with the task's effects; returns the call's result (wire dict).
            capabilities: Whether the client declared a capability (``elicitation``, ...), for its questions.
        """
        row = await self._create(owner, tool, "The call is running as a task.")
        scope = anyio.CancelScope()
        self._local[row.id] = _Local(scope, anyio.Event())
        effects = TaskEffects(self, row.id, owner, capabilities)
        self._group().start_soon(self._run, row.id, scope, functools.partial(body, effects))
        return _created(row)

    async def race(self, owner: int, tool: str, work: Work) -> dict[str, Any]:
        """Run ``work``; its result if it ends within ``after_s``, else the ``CreateTaskResult`` of a task that gets
        its result when it ends. The work is never cancelled for being slow (a counted call runs to its end).

        Raises:
            MCPError: the work failed with one within ``after_s``.
        """
        done = anyio.Event()
        outcome: list[dict[str, Any] | BaseException] = []
        adopted: list[str] = []

        async def run() -> None:
            try:
                outcome.append(await work())
            except Exception as exc:  # delivered to the request, or recorded in the task
                outcome.append(exc)
            done.set()
            if adopted:
                await self._settle(adopted[0], outcome[0])

        self._group().start_soon(run)
        with anyio.move_on_after(self.after_s):
            await done.wait()
        if not done.is_set():
            row = await self._create(owner, tool, "The call is still running; poll tasks/get for its result.")
            adopted.append(row.id)
            if done.is_set():  # it ended while the task was being written: settle it here (a second settle is a no-op)
                await self._settle(row.id, outcome[0])
            return _created(row)
        first = outcome[0]
        if isinstance(first, BaseException):
            raise first
        return first

    async def _settle(self, task_id: str, outcome: dict[str, Any] | BaseException) -> None:
        row = await self._store(self.store.task, task_id)
        if row is not None and row.cancel_requested:
            await self._finish(
                task_id, "cancelled", "Cancelled at the client's request; the call itself ran to its end (and a "
                "call of a hidden function counted), but its result is not kept.",
            )  # fmt: skip
        elif isinstance(outcome, MCPError):
            await self._finish(task_id, "failed", outcome.error.message, error=_error(outcome))
        elif isinstance(outcome, BaseException):
            log.error("a task's call failed: %r", outcome)
            await self._finish(task_id, "failed", "Internal error", error=_internal())
        else:
            await self._finish(task_id, "completed", _summary(outcome), result=outcome)

    async def _run(self, task_id: str, scope: anyio.CancelScope, body: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        try:
            with scope:
                async with anyio.create_task_group() as watching:
                    watching.start_soon(self._watch, task_id, scope)
                    try:
                        result = await body()
                    finally:
                        watching.cancel_scope.cancel()
                await self._finish(task_id, "completed", _summary(result), result=result)
            if scope.cancelled_caught:
                await self._finish(task_id, "cancelled", "Cancelled at the client's request.")
        except MCPError as exc:
            await self._finish(task_id, "failed", exc.error.message, error=_error(exc))
        except Exception:
            log.exception("task %s failed", task_id)
            await self._finish(task_id, "failed", "Internal error", error=_internal())
        finally:
            self._local.pop(task_id, None)

    async def _watch(self, task_id: str, scope: anyio.CancelScope) -> None:
        """Cancel a running task once its cancellation reaches the store (from any process)."""
        while True:
            await anyio.sleep(_WATCH_S)
            row = await self._store(self.store.task, task_id)
            if row is None or row.cancel_requested:
                scope.cancel()
                return

    async def _finish(
        self, task_id: str, status: TerminalTaskStatus, message: str | None, result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> None:  # fmt: skip
        with anyio.CancelScope(shield=True):  # a cancelled task still records that it ended
            row = await self._store(self.store.finish_task, task_id, status, message, result, error)
            if row is not None:
                await self._announce(row)

    async def ask(self, task_id: str, owner: int, questions: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """Park a task ``input_required`` with ``questions`` until ``tasks/update`` has answered all of them."""
        keys = list(questions)
        row = await self._store(self.store.ask_task, task_id, questions, "Waiting for the client's answers.")
        if row is not None:
            await self._announce(row)
        local = self._local.get(task_id)
        while True:
            answers = await self._store(self.store.take_task_answers, task_id, keys)
            if answers is not None:
                return answers
            if local is not None:
                with anyio.move_on_after(_WATCH_S):
                    await local.answered.wait()
                local.answered = anyio.Event()
            else:
                await anyio.sleep(_WATCH_S)

    # -- the extension's methods ------------------------------------------------------------------------------------

    def _owned(self, row: TaskRow | None, owner: int, task_id: str) -> TaskRow:
        if row is None or row.session_id != owner:
            # Another credential's task is answered exactly as none at all.
            raise MCPError(types.INVALID_PARAMS, f"unknown task {task_id[:80]!r}", data={"taskId": task_id[:200]})
        return row

    async def get(self, owner: int, task_id: str) -> dict[str, Any]:
        """The task as ``tasks/get`` answers it (``DetailedTask``).

        Raises:
            MCPError: no such task of this credential (-32602).
        """
        row = self._owned(await self._store(self.store.task, task_id), owner, task_id)
        if row.status not in TERMINAL_STATUSES and time.time() > row.expires and task_id not in self._local:
            await self._finish(
                task_id, "failed", "The task outlived its time to live without finishing (the server running it "
                "stopped); call the tool again.", error=_internal("the server running this task stopped"),
            )  # fmt: skip
            row = self._owned(await self._store(self.store.task, task_id), owner, task_id)
        return detailed(row)

    async def update(self, owner: int, task_id: str, responses: dict[str, Any]) -> None:
        """Deliver answers to a task's outstanding questions (others are ignored).

        Raises:
            MCPError: no such task of this credential (-32602).
        """
        self._owned(await self._store(self.store.task, task_id), owner, task_id)
        row = await self._store(self.store.answer_task, task_id, responses)
        if row is not None:
            await self._announce(row)
        local = self._local.get(task_id)
        if local is not None:
            local.answered.set()

    async def cancel(self, owner: int, task_id: str) -> None:
        """Ask a task to stop (a terminal one is left as it is; the acknowledgement is the same).

        Raises:
            MCPError: no such task of this credential (-32602).
        """
        self._owned(await self._store(self.store.task, task_id), owner, task_id)
        await self._store(self.store.cancel_task, task_id)
        local = self._local.get(task_id)
        if local is not None:
            local.scope.cancel()

    async def owned(self, owner: int, task_ids: Sequence[str]) -> list[str]:
        """Of ``task_ids``, those ``owner`` owns (what a listen stream may be told of)."""
        kept = []
        for task_id in task_ids:
            row = await self._store(self.store.task, task_id)
            if row is not None and row.session_id == owner:
                kept.append(task_id)
        return kept

    async def _announce(self, row: TaskRow) -> None:
        await self.bus.publish(TaskStatusChanged(row.id, row.session_id, detailed(row)))

    def handlers(
        self, owner: Callable[[ServerRequestContext[Any]], Awaitable[int]]
    ) -> list[tuple[str, type[BaseModel], Callable[..., Awaitable[Any]]]]:
        """The request handlers of ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` (for
        ``Server.add_request_handler``).

        Args:
            owner: The run-store session of the credential a request speaks for (the server's own resolution).
        """

        async def gate(ctx: ServerRequestContext[Any], params: _TaskParams) -> int:
            if not declares_tasks(ctx):
                raise missing_capability(
                    {"extensions": {TASKS_EXTENSION: {}}},
                    f"{ctx.method} belongs to the Tasks extension: declare io.modelcontextprotocol/tasks in the "
                    "request's client capabilities (extensions)",
                )
            _check_name_header(ctx, params.task_id)
            return await owner(ctx)

        async def get(ctx: ServerRequestContext[Any], params: _TaskParams) -> dict[str, Any]:
            return await self.get(await gate(ctx, params), params.task_id)

        async def update(ctx: ServerRequestContext[Any], params: _UpdateParams) -> _Nothing:
            await self.update(await gate(ctx, params), params.task_id, params.input_responses)
            return _Nothing()

        async def cancel(ctx: ServerRequestContext[Any], params: _TaskParams) -> _Nothing:
            await self.cancel(await gate(ctx, params), params.task_id)
            return _Nothing()

        return [
            ("tasks/get", _TaskParams, get),
            ("tasks/update", _UpdateParams, update),
            ("tasks/cancel", _TaskParams, cancel),
        ]


def _check_name_header(ctx: ServerRequestContext[Any], task_id: str) -> None:
    """Over HTTP, a ``Mcp-Name`` header must name the task the body names (SEP-2243, SEP-2663)."""
    request = ctx.request
    headers = getattr(request, "headers", None)
    if headers is None:
        return
    named = headers.get(MCP_NAME_HEADER)
    if named is not None and decode_header_value(named) != task_id:
        raise MCPError(types.HEADER_MISMATCH, "the Mcp-Name header does not name the task the request's taskId names")


def detailed(row: TaskRow) -> dict[str, Any]:
    """A task as ``tasks/get`` and ``notifications/tasks`` show it (``DetailedTask``)."""
    task: dict[str, Any] = {
        "taskId": row.id, "status": row.status, "createdAt": row.created_at, "lastUpdatedAt": row.updated_at,
        "ttlMs": row.ttl_ms, "pollIntervalMs": row.poll_ms,
    }  # fmt: skip
    if row.status_message:
        task["statusMessage"] = row.status_message
    if row.status == "completed" and row.result is not None:
        task["result"] = row.result
    elif row.status == "failed" and row.error is not None:
        task["error"] = row.error
    elif row.status == "input_required":
        task["inputRequests"] = row.input_requests
    return task


def _created(row: TaskRow) -> dict[str, Any]:
    """The ``CreateTaskResult`` of a new task: ``resultType: "task"`` and the task's fields at the top level."""
    task = detailed(row)
    return {"resultType": "task", **{key: task[key] for key in task if key not in ("result", "error", "inputRequests")}}


def _error(exc: MCPError) -> dict[str, Any]:
    return exc.error.model_dump(by_alias=True, mode="json", exclude_none=True)


def _internal(message: str = "Internal error") -> dict[str, Any]:
    return {"code": types.INTERNAL_ERROR, "message": message}


def _summary(result: dict[str, Any]) -> str:
    return "The call ended with a tool error." if result.get("isError") else "The call completed."
