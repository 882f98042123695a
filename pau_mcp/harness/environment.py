"""What an agent works with: one hidden method, reached only through an MCP session.

The harness is a client like any other: everything an agent learns comes from
the server's tool list and tool results, so what the benchmark measures is
what Claude Desktop or any framework would get. A method's header, parameters
and initial examples are read from the facts its tool publishes as data
(``_meta``, ``MethodFacts``), never parsed from the description's prose.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import mcp_types as types
from mcp.client.session import ClientSession
from pydantic import ValidationError

from ..contract import FACTS_KEY, RAN, KnownExample, MethodFacts, ToolResult, ToolStatus

__all__ = ["Environment", "Observation", "Step"]


@dataclass(frozen=True)
class Observation:
    """What one tool call showed the agent."""

    arguments: dict[str, Any]
    text: str
    structured: dict[str, Any] | None
    is_error: bool

    @cached_property
    def result(self) -> ToolResult | None:
        """The method tool's result as the contract reads it; None when there is none (or another tool's)."""
        if not self.structured:
            return None
        try:
            return ToolResult.model_validate(self.structured)
        except ValidationError:
            return None

    @property
    def status(self) -> str:
        """The result's status (``ok``, ``error``, ..., ``over_budget``, ``invalid_input``); ``unknown`` without one."""
        return str((self.structured or {}).get("status", "unknown"))

    @property
    def counted(self) -> bool:
        """True when the call reached the function (and so used budget)."""
        return not self.is_error and self.status in RAN


@dataclass
class Step:
    """One entry of an episode's trajectory."""

    kind: str  # model | tool_call | tool_result | submit | note
    data: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.data}


@dataclass
class Environment:
    """One method as an agent sees it, over an initialized MCP session narrowed to that method.

    Attributes:
        session: The MCP client session.
        tool: The method's MCP tool (name, description, schemas) as listed by the server.
        submit_tool: The server's ``submit`` tool.
        trajectory: Every step, appended as it happens.
    """

    session: ClientSession
    tool: types.Tool
    submit_tool: types.Tool
    trajectory: list[Step] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    #: The receipt number of the session's submission (``submit``'s ``submission``: its count of its submissions of
    #: the method); the run store's id comes from ``RunStore.submission_by_receipt``.
    submission_id: int | None = None

    @classmethod
    async def open(cls, session: ClientSession, tool_name: str) -> Environment:
        """List the session's tools and find the method's tool and ``submit``.

        Raises:
            RuntimeError: the server does not offer them (wrong server or suite).
        """
        tools: dict[str, types.Tool] = {}
        cursor = None
        while True:
            listed = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
            tools.update({t.name: t for t in listed.tools})
            cursor = listed.next_cursor
            if cursor is None:
                break
        if tool_name not in tools or "submit" not in tools:
            raise RuntimeError(
                f"the server does not offer {tool_name} and submit: is it serving the same suite, with the same tool "
                "key (--tool-key / PAU_MCP_TOOL_KEY, or the same --data-dir)?"
            )
        return cls(session=session, tool=tools[tool_name], submit_tool=tools["submit"])

    @cached_property
    def facts(self) -> MethodFacts | None:
        """The facts the tool publishes in its ``_meta``; None from a server that publishes none (or other ones)."""
        published = (self.tool.meta or {}).get(FACTS_KEY)
        if published is None:
            return None
        try:
            return MethodFacts.model_validate(published)
        except ValidationError:
            return None

    @property
    def header(self) -> str:
        """The method's header (a placeholder when the server publishes no facts)."""
        return self.facts.header if self.facts else "def test_func(...):"

    @property
    def entry(self) -> str:
        """The function's name in the header and the example lines (``test_func`` when no facts are published)."""
        return self.facts.entry if self.facts else "test_func"

    @property
    def params(self) -> list[str]:
        """Parameter names: the published ones, else the tool's input schema's properties."""
        if self.facts:
            return list(self.facts.params)
        return [name for name in self.tool.input_schema.get("properties", {}) if name != "args"]

    @property
    def initial_examples(self) -> list[KnownExample]:
        """The initial examples: line, argument literal and shown outcome (none when no facts are published)."""
        return list(self.facts.examples) if self.facts else []

    @property
    def examples(self) -> list[str]:
        """The initial examples as the description shows them, e.g. ``test_func(1, 2) -> 3``: the prompts' form."""
        return [example.line for example in self.initial_examples]

    @property
    def queries(self) -> int:
        """Calls that reached the function."""
        return sum(o.counted for o in self.observations)

    def note(self, kind: str, **data: Any) -> None:
        """Append a step to the trajectory."""
        self.trajectory.append(Step(kind, data))

    async def call(self, arguments: dict[str, Any]) -> Observation:
        """Call the method's tool with MCP arguments (``{"args": "(1,)"}`` or ``{"arg0": 1}``)."""
        self.note("tool_call", tool=self.tool.name, arguments=arguments)
        result = await self._call_tool(self.tool.name, arguments)
        text = "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))
        observation = Observation(arguments, text, result.structured_content, bool(result.is_error))
        self.observations.append(observation)
        self.note("tool_result", text=text, structured=result.structured_content, is_error=bool(result.is_error))
        return observation

    async def submit(self, description: str, code: str | None = None) -> Observation:
        """Submit the final description (and optional code) through the server's ``submit`` tool."""
        arguments: dict[str, Any] = {"method": self.tool.name, "description": description}
        if code:
            arguments["code"] = code
        self.note("submit", description=description, code=code)
        result = await self._call_tool("submit", arguments)
        text = "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))
        structured = result.structured_content or {}
        if not result.is_error:
            self.submission_id = structured.get("submission")
        self.note("tool_result", text=text, structured=structured, is_error=bool(result.is_error))
        return Observation(arguments, text, structured, bool(result.is_error))

    async def _call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """A ``tools/call`` request through the session, without the client re-validating the result.

        ``ClientSession.call_tool`` checks every structured result against the tool's output schema
        with jsonschema, a fifth of the harness's own work per call; this server's results are held to
        their schemas by its tests, so the harness reads them as they come.
        """
        params = types.CallToolRequestParams(name=name, arguments=arguments)
        return await self.session.send_request(types.CallToolRequest(params=params), types.CallToolResult)

    def observed_examples(self) -> list[tuple[str, str]]:
        """``(input literal, shown outcome)`` pairs the agent saw: the initial examples, then its own calls."""
        pairs = [(example.input, example.output) for example in self.initial_examples]
        for observation in self.observations:
            result = observation.result
            if observation.counted and result is not None:
                shown = (
                    result.value
                    if result.status == ToolStatus.OK
                    else f"raises {result.error_type}: {result.error_message}"
                )
                pairs.append((_literal(observation.arguments, self.params), str(shown)))
        return pairs


def _literal(arguments: dict[str, Any], params: list[str]) -> str:
    given = arguments.get("args")
    if isinstance(given, str) and given.strip():
        return given
    values = tuple(arguments.get(p) for p in params)
    return repr(values)
