"""What a fixture tool call, resource read, prompt or completion does on the server (``fixtures`` gives the data).

The MCP handlers of ``app`` hand a fixture request here once they have resolved its credential, as they hand a
hidden method's call to ``MethodService``: a call's arguments are checked against the tool's schema (a mismatch is
a tool error the caller can correct, as SEP-1303 asks), the client capabilities it needs are checked (-32021 when one
is missing), its steps run with the request's effects (``effects``: its stream, its era's way of asking), and it is
recorded in the run store under the credential's session (``counted`` false: a fixture is not a hidden function and
spends no budget). A tool that may run as a task becomes one at its ``task`` step when the client negotiated the
Tasks extension (``tasks``).
"""

from __future__ import annotations

import functools
import json
import logging
from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..contract import CallStatus, RecordStatus, ToolStatus
from ..runstore import CallRecord, RunStore, StoreError
from .capabilities import TASKS_EXTENSION, declares, declares_tasks, missing_capability
from .effects import InputNeeded, LogLevels, RequestEffects, carried_answers, input_required
from .fixtures import FixturePrompt, FixtureSuite, FixtureTool, Scope, Step, perform, render
from .listen import Bus
from .loopstore import LoopStore
from .tasks import TaskBoard, TaskEffects

__all__ = ["FixtureService"]

log = logging.getLogger("pau_mcp.server")

#: How much of a fixture call's arguments the run store keeps.
_KEPT_CHARS = 1024
#: The most values ``completion/complete`` returns at once (the spec's limit).
_COMPLETIONS = 100


class FixtureService:
    """Serves one fixture suite's tools, resources, templates, prompts and completions.

    Args:
        suite: The fixtures.
        store: Where calls are recorded (and tasks kept).
        bus: Where announcements go (``subscriptions/listen``).
        levels: The handshake era's log level per connection.
        tasks: Runs tools as tasks; None: never.
    """

    def __init__(
        self, suite: FixtureSuite, store: RunStore, bus: Bus, levels: LogLevels, tasks: TaskBoard | None = None
    ) -> None:
        self.suite = suite
        self.store = store
        self._stored = LoopStore(store)
        self.bus = bus
        self.levels = levels
        self.tasks = tasks
        self._validators = {tool.name: _validator(tool.input_schema) for tool in suite.tools}

    # -- listings ---------------------------------------------------------------------------------------------------

    def tools(self) -> list[types.Tool]:
        """The fixture tools, as ``tools/list`` shows them."""
        return [tool.listing() for tool in self.suite.tools]

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """A fixture tool's input schema (for the 2026-07-28 era's ``Mcp-Param-*`` header checks)."""
        tool = self.suite.tool(name)
        return tool.input_schema if tool else None

    def resources(self) -> list[types.Resource]:
        """The static fixture resources."""
        return [
            types.Resource(uri=r.uri, name=r.name, title=r.title, description=r.description, mime_type=r.mime_type)
            for r in self.suite.resources
        ]

    def templates(self) -> list[types.ResourceTemplate]:
        """The fixture resource templates."""
        return [
            types.ResourceTemplate(
                uri_template=t.uri_template, name=t.name, title=t.title, description=t.description,
                mime_type=t.mime_type,
            )
            for t in self.suite.templates
        ]  # fmt: skip

    def prompts(self) -> list[types.Prompt]:
        """The fixture prompts."""
        return [prompt.listing() for prompt in self.suite.prompts]

    def read(self, uri: str) -> types.ReadResourceResult | None:
        """A fixture resource's contents (static or from a template), or None when ``uri`` is none of them."""
        return self.suite.read(uri)

    def complete(
        self, ref: types.PromptReference | types.ResourceTemplateReference, argument: str, value: str
    ) -> types.Completion | None:
        """The values offered for a fixture prompt's or template's argument that start with ``value``; None when
        ``ref`` names no fixture."""
        known = (
            self.suite.prompt(ref.name) is not None
            if isinstance(ref, types.PromptReference)
            else any(t.uri_template == ref.uri for t in self.suite.templates)
        )
        if not known:
            return None
        found = [option for option in self.suite.completions(ref, argument) if option.startswith(value)]
        return types.Completion(values=found[:_COMPLETIONS], total=len(found), has_more=len(found) > _COMPLETIONS)

    # -- calls --------------------------------------------------------------------------------------------------------

    def tool(self, name: str) -> FixtureTool | None:
        """The fixture tool called ``name``, if any."""
        return self.suite.tool(name)

    def prompt(self, name: str) -> FixturePrompt | None:
        """The fixture prompt called ``name``, if any."""
        return self.suite.prompt(name)

    async def call(
        self, ctx: ServerRequestContext[Any], owner: int, connection: str | None, tool: FixtureTool,
        params: types.CallToolRequestParams,
    ) -> dict[str, Any]:  # fmt: skip
        """One call of a fixture tool: its result, an ``InputRequiredResult`` (2026-07-28 era, a question for the
        client) or a ``CreateTaskResult`` (a task), as a wire dict.

        Args:
            ctx: The request.
            owner: The run-store session of the credential it speaks for.
            connection: Its handshake-era connection, if it has one (for the log level).
            tool: The tool called.
            params: The request's parameters.

        Raises:
            MCPError: a client capability is missing (-32021), or the tool raised a protocol error.
        """
        arguments = params.arguments or {}
        problem = next(iter(self._validators[tool.name].iter_errors(arguments)), None)
        if problem is not None:
            text = f"Invalid arguments for {tool.name}: {_short(problem.message)}; see its inputSchema."
            await self._record(owner, tool.name, arguments, ToolStatus.INVALID_INPUT, text)
            refusal = types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
            return refusal.model_dump(by_alias=True, mode="json", exclude_none=True)
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if tool.requires:
            lacking = {name: value for name, value in tool.requires.items() if not declares(ctx, name)}
            if lacking:
                raise missing_capability(
                    lacking, f"{tool.name} needs the client capabilities {', '.join(lacking)}: declare them"
                )
        as_task = tool.task != "forbidden" and modern and declares_tasks(ctx) and self.tasks is not None
        if tool.task == "required" and not as_task:
            raise missing_capability(
                {"extensions": {TASKS_EXTENSION: {}}},
                f"{tool.name} only runs as a task: declare the io.modelcontextprotocol/tasks extension in the "
                "request's client capabilities (2026-07-28 protocol)",
            )
        scope = Scope(args=arguments, blobs=self.suite.blobs, progress_token=(ctx.meta or {}).get("progress_token"))
        if modern:
            scope.answers.update(carried_answers(params, owner, _asked(tool.steps)))
        effects = RequestEffects(ctx, self.bus, self.levels, connection)
        try:
            await perform(tool.before_task(), scope, effects)
            if as_task:
                assert self.tasks is not None
                declared = {name: declares(ctx, name) for name in ("elicitation", "sampling", "roots")}
                created = await self.tasks.start(
                    owner, tool.name, functools.partial(self._finish_as_task, tool, scope), declared.__getitem__
                )
                await self._record(owner, tool.name, arguments, RecordStatus.TASK, f"task {created['taskId']}")
                return created
            await perform(tool.after_task(), scope, effects)
        except InputNeeded as needed:
            await self._record(owner, tool.name, arguments, RecordStatus.INPUT_REQUIRED, ", ".join(needed.questions))
            return input_required(needed.questions, scope.answers, owner)
        except MCPError as exc:
            await self._record(owner, tool.name, arguments, ToolStatus.ERROR, exc.error.message)
            raise
        result = self._result(tool, scope)
        await self._record(
            owner, tool.name, arguments, ToolStatus.ERROR if result.get("isError") else ToolStatus.OK, _text(result)
        )
        return result

    async def _finish_as_task(self, tool: FixtureTool, scope: Scope, effects: TaskEffects) -> dict[str, Any]:
        await perform(tool.after_task(), scope, effects)
        return self._result(tool, scope)

    @staticmethod
    def _result(tool: FixtureTool, scope: Scope) -> dict[str, Any]:
        rendered: dict[str, Any] = render(tool.result or {}, scope)
        return types.CallToolResult.model_validate(rendered).model_dump(by_alias=True, mode="json", exclude_none=True)

    async def get_prompt(
        self, ctx: ServerRequestContext[Any], owner: int, connection: str | None, prompt: FixturePrompt,
        params: types.GetPromptRequestParams,
    ) -> dict[str, Any]:  # fmt: skip
        """A fixture prompt: its messages, or (2026-07-28 era) an ``InputRequiredResult`` with its questions.

        Raises:
            MCPError: a required argument is missing (-32602), or a question the client cannot answer (-32021).
        """
        arguments = params.arguments or {}
        missing = [a.name for a in prompt.arguments if a.required and a.name not in arguments]
        if missing:
            raise MCPError(types.INVALID_PARAMS, f"prompt {prompt.name} needs the arguments: {', '.join(missing)}")
        scope = Scope(args=arguments, blobs=self.suite.blobs)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            scope.answers.update(carried_answers(params, owner, _asked(prompt.steps)))
        try:
            await perform(prompt.steps, scope, RequestEffects(ctx, self.bus, self.levels, connection))
        except InputNeeded as needed:
            return input_required(needed.questions, scope.answers, owner)
        messages = [types.PromptMessage.model_validate(render(m, scope)) for m in prompt.messages]
        return types.GetPromptResult(description=prompt.description, messages=messages).model_dump(
            by_alias=True, mode="json", exclude_none=True
        )

    async def _record(self, owner: int, tool: str, arguments: dict[str, Any], status: CallStatus, outcome: str) -> None:
        """Record a fixture call (not counted: no budget is spent); a store that refuses is logged, not fatal.

        Off the event loop when the store is busy (``LoopStore``): written on the loop, a record waited there for
        another writer's lock, and every agent's requests with it."""
        try:
            shown = json.dumps(arguments, sort_keys=True, default=str)
        except ValueError:
            shown = "<arguments holding an integer too long to print>"
        record = CallRecord(
            method_id=f"{self.suite.name}/{tool}", tool=tool, arguments=_short(shown, _KEPT_CHARS), counted=False,
            status=status, value=_short(outcome, _KEPT_CHARS),
        )  # fmt: skip
        try:
            await self._stored.run(self.store.record_call, owner, record)
        except StoreError as exc:
            log.error("a call of the fixture %s could not be recorded: %s", tool, exc)


def _validator(schema: dict[str, Any]) -> Any:
    import jsonschema  # only a fixture suite's tools need it here: not imported at every start (30 ms)

    return jsonschema.validators.validator_for(schema)(schema)


def _asked(steps: tuple[Step, ...]) -> set[str]:
    return {key for step in steps if step.ask for key in step.ask}


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _text(result: dict[str, Any]) -> str:
    return " ".join(str(c.get("text", f"<{c.get('type')}>")) for c in result.get("content", []))
