"""The server's protocol features beside its catalog's tools, resources and prompts.

``app.build_server`` serves the catalog; this adds, on the same server and behind the same credential resolution:

* a fixture suite's tools, resources, templates and prompts, when one is served (``fixture_service``);
* ``resources/templates/list`` (the method resources' template, ``pau://method/{tool}``, and the fixtures') and
  ``completion/complete`` (the tool names a credential sees, for that template; the fixtures' own values);
* the handshake era's ``logging/setLevel`` (kept per connection: ``effects.LogLevels``) and, with fixtures,
  ``resources/subscribe``;
* ``subscriptions/listen`` streams (``listen``) and the Tasks extension (``tasks``), with its methods, its
  capability advertised, and a long call answered with a task for a client that declared it;
* the ``requestState`` boundary of the 2026-07-28 era (``effects.state_boundary``).
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..runstore import RunStore
from .capabilities import TASKS_EXTENSION, declares_tasks
from .effects import LogLevels, state_boundary
from .fixture_service import FixtureService
from .fixtures import FixtureSuite
from .listen import Bus, Listener
from .sessions import SessionState
from .tasks import TaskBoard

__all__ = ["METHOD_TEMPLATE", "Caller", "Features"]

#: The template of the method resources, so a client can read (and complete) one it was not listed.
METHOD_TEMPLATE = types.ResourceTemplate(
    uri_template="pau://method/{tool}", name="method", title="What is known about a hidden function",
    description="The header, initial examples and budget of the hidden function whose tool name is {tool}.",
    mime_type="text/plain",
)  # fmt: skip
#: The most values ``completion/complete`` answers with (the spec's limit).
_COMPLETIONS = 100

#: The server's resolution of a request: the credential's session state, and the connection it came by (if any).
Caller = Callable[[ServerRequestContext[Any]], Awaitable[tuple[SessionState, str | None]]]
#: The tool names of the catalog a credential's request sees, in the order lists show them.
Seen = Callable[[SessionState], list[str]]

_NO_FIXTURES = FixtureSuite(name="none", title="No fixtures", description="No fixture suite is served.")


class Features:
    """The features of one server beside its catalog (see the module's description).

    Args:
        store: The run store (tasks and fixture calls are kept there).
        fixtures: The fixture suite served beside the catalog; None: none.
        state_key: The secret ``requestState`` is sealed with (the deployment key, shared by replicas); None: a key
            of this process alone.
    """

    def __init__(self, store: RunStore, fixtures: FixtureSuite | None = None, state_key: str | None = None) -> None:
        self.bus = Bus()
        self.levels = LogLevels()
        self.tasks = TaskBoard(store, self.bus)
        self.serves_fixtures = fixtures is not None
        self.fixtures = FixtureService(fixtures or _NO_FIXTURES, store, self.bus, self.levels, self.tasks)
        self._state_key = state_key or secrets.token_hex(32)

    async def call(
        self, ctx: ServerRequestContext[Any], owner: int, tool: str, work: Callable[[], Awaitable[Any]]
    ) -> Any:
        """A call of pau-mcp's own tools that may take long: run as it always is, unless the client declared the
        Tasks extension (2026-07-28 era), when a call still running after a second becomes a task."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and declares_tasks(ctx):
            return await self.tasks.race(owner, tool, lambda: _wire(work()))
        return await work()

    def install(self, server: Server[Any], caller: Caller, seen: Seen, process_key: str, page_size: int) -> None:
        """Add the handlers, the lifespan (the tasks' runner) and the middleware to ``server``.

        Args:
            server: The server ``build_server`` made.
            caller: Resolves a request's credential and connection.
            seen: The catalog tool names a credential sees (completed for ``pau://method/{tool}``).
            process_key: The connection of a stdio server (its log level).
            page_size: Items per page of ``resources/templates/list``.
        """
        fixtures, tasks = self.fixtures, self.tasks

        async def list_templates(
            ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
        ) -> types.ListResourceTemplatesResult:
            await caller(ctx)
            templates = [METHOD_TEMPLATE, *fixtures.templates()]
            start = _start(params.cursor if params else None, len(templates))
            end = start + page_size
            return types.ListResourceTemplatesResult(
                resource_templates=templates[start:end], next_cursor=str(end) if end < len(templates) else None
            )

        async def complete(ctx: ServerRequestContext[Any], params: types.CompleteRequestParams) -> types.CompleteResult:
            state, _ = await caller(ctx)
            ref, argument = params.ref, params.argument
            offered = fixtures.complete(ref, argument.name, argument.value)
            if offered is None:
                offered = _complete_catalog(ref, argument, seen(state))
            return types.CompleteResult(completion=offered)

        async def set_level(ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams) -> types.EmptyResult:
            _, connection = await caller(ctx)
            self.levels.set(connection or process_key, params.level)
            return types.EmptyResult()

        async def subscribe(ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams) -> types.EmptyResult:
            # The fixtures' resources never change by themselves; a subscription is accepted for one that exists.
            await caller(ctx)
            uri = str(params.uri)
            if fixtures.read(uri) is None:
                raise MCPError(types.INVALID_PARAMS, f"unknown resource {uri[:200]}", data={"uri": uri[:2000]})
            return types.EmptyResult()

        async def owner(ctx: ServerRequestContext[Any]) -> int:
            return (await caller(ctx))[0].store_id

        async def owned_tasks(ctx: ServerRequestContext[Any], task_ids: Any) -> tuple[int, list[str]]:
            mine = await owner(ctx)
            return mine, await tasks.owned(mine, task_ids)

        @contextlib.asynccontextmanager
        async def lifespan(_: Server[Any]) -> AsyncIterator[dict[str, Any]]:
            async with tasks.running():
                yield {}

        server.lifespan = lifespan
        handlers: list[tuple[str, Any, Any]] = [
            ("resources/templates/list", types.PaginatedRequestParams, list_templates),
            ("completion/complete", types.CompleteRequestParams, complete),
            ("subscriptions/listen", types.SubscriptionsListenRequestParams, Listener(self.bus, owned_tasks)),
            # The handshake era's (the 2026-07-28 era has none: a request asks for logs in its _meta).
            ("logging/setLevel", types.SetLevelRequestParams, set_level),
            *tasks.handlers(owner),
        ]
        if self.serves_fixtures:
            handlers += [
                ("resources/subscribe", types.SubscribeRequestParams, subscribe),
                ("resources/unsubscribe", types.UnsubscribeRequestParams, subscribe),
            ]
        for method, params_type, handler in handlers:
            server.add_request_handler(method, params_type, handler)
        server.extensions[TASKS_EXTENSION] = {}
        server.middleware.append(state_boundary(self._state_key))


def _complete_catalog(
    ref: types.PromptReference | types.ResourceTemplateReference, argument: types.CompletionArgument, seen: list[str]
) -> types.Completion:
    """Completions for the catalog's own: tool names for ``pau://method/{tool}``; nothing for a method's prompt.

    Raises:
        MCPError: the reference names nothing this credential sees (-32602).
    """
    if isinstance(ref, types.ResourceTemplateReference) and ref.uri == METHOD_TEMPLATE.uri_template:
        if argument.name != "tool":
            raise MCPError(types.INVALID_PARAMS, f"the template {ref.uri} has one argument, `tool`")
        found = [tool for tool in seen if tool.startswith(argument.value)]
        return types.Completion(values=found[:_COMPLETIONS], total=len(found), has_more=len(found) > _COMPLETIONS)
    if isinstance(ref, types.PromptReference) and ref.name in seen:
        return types.Completion(values=[], total=0, has_more=False)  # a method's prompt takes no arguments
    name = ref.name if isinstance(ref, types.PromptReference) else ref.uri
    raise MCPError(types.INVALID_PARAMS, f"nothing to complete for {name[:200]!r}: list the prompts and templates")


def _start(cursor: str | None, size: int) -> int:
    try:
        start = int(cursor) if cursor else 0
    except ValueError:
        start = -1
    if not 0 <= start <= size:
        raise MCPError(types.INVALID_PARAMS, f"invalid cursor {str(cursor)[:40]!r}")
    return start


async def _wire(result: Awaitable[Any]) -> dict[str, Any]:
    """A tool call's result as its wire dict (what a task keeps)."""
    done = await result
    dumped: dict[str, Any] = (
        done.model_dump(by_alias=True, mode="json", exclude_none=True) if hasattr(done, "model_dump") else dict(done)
    )
    return dumped
