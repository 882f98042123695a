"""The MCP server: tools, resources and prompts from the catalog, over stdio or Streamable HTTP.

Built on the SDK's low-level ``Server``: tool schemas come from data, so they
are published verbatim and arguments are validated here (``MethodService``).
"""

from __future__ import annotations

import hmac
import logging
import uuid
from typing import Any

import mcp_types as types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.shared.exceptions import MCPError

from .. import __version__
from .catalog import OPEN_TOOL, OUTPUT_SCHEMA, SUBMIT_TOOL, Exposed
from .service import MethodService, Reply, Sessions, SessionState

__all__ = ["PAGE_SIZE", "build_server", "verify_bearer"]

log = logging.getLogger("pau_mcp.server")

PAGE_SIZE = 100
_RESOURCE_PREFIX = "pau://method/"
_ANNOTATIONS = types.ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)

_SUBMIT = types.Tool(
    name=SUBMIT_TOOL,
    title="Submit a description",
    description=(
        "Submit your final description of a hidden function: `method` is its tool name (fn_...), `description` says "
        "what it does precisely enough to re-implement it, covering every case you found; `code` optionally gives "
        "your own Python implementation (def test_func(...)). Submissions are recorded for scoring."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "method": {"type": "string", "description": "the tool name of the function, e.g. fn_3ebe01a8c1"},
            "description": {"type": "string", "description": "what the function does"},
            "code": {"type": "string", "description": "optional: your implementation, def test_func(...)"},
        },
        "required": ["method", "description"],
        "additionalProperties": False,
    },
    annotations=types.ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
    ),
)

_OPEN = types.Tool(
    name=OPEN_TOOL,
    title="Focus on some functions",
    description=(
        "Narrow this session to the given function tools (a list of tool names); the tool list then shows only "
        "those (a tools/list_changed notification follows). Useful when a server offers many functions."
    ),
    input_schema={
        "type": "object",
        "properties": {"methods": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
        "required": ["methods"],
        "additionalProperties": False,
    },
    annotations=types.ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    ),
)


def _result(reply: Reply) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=reply.text)],
        structured_content=reply.structured,
        is_error=reply.is_error,
    )


def _page(items: list[Any], cursor: str | None, size: int) -> tuple[list[Any], str | None]:
    try:
        start = int(cursor) if cursor else 0
    except ValueError:
        raise MCPError(types.INVALID_PARAMS, f"invalid cursor {cursor!r}") from None
    if start < 0 or start > len(items):
        raise MCPError(types.INVALID_PARAMS, f"invalid cursor {cursor!r}")
    end = start + size
    return items[start:end], (str(end) if end < len(items) else None)


def verify_bearer(expected: str):  # type: ignore[no-untyped-def]
    """A token verifier for the SDK's bearer auth that accepts exactly one token."""
    from mcp.server.auth.provider import AccessToken

    class _Verifier:
        async def verify_token(self, token: str) -> AccessToken | None:
            if hmac.compare_digest(token.encode(), expected.encode()):
                return AccessToken(token=token, client_id="pau-mcp-agent", scopes=["pau"])
            return None

    return _Verifier()


_NOOP = types.Tool(
    name="noop",
    description="Does nothing and returns at once: the protocol's floor, for benchmarks.",
    input_schema={"type": "object", "properties": {}, "additionalProperties": True},
)


def build_server(
    service: MethodService,
    sessions: Sessions,
    stdio_key: str | None = None,
    page_size: int = PAGE_SIZE,
    noop_tool: bool = False,
) -> Server[Any]:
    """The low-level MCP server for one catalog.

    Args:
        service: Runs calls and submissions.
        sessions: Session states (budgets, narrowing) by key.
        stdio_key: The session key for a stdio server (one session per process); None over HTTP.
        page_size: Items per page of the tools, resources and prompts lists.
        noop_tool: Also offer a ``noop`` tool (benchmarks measure the SDK's floor with it).
    """
    catalog = service.catalog
    process_key = stdio_key or f"stdio-{uuid.uuid4().hex[:12]}"

    def session_of(ctx: ServerRequestContext[Any]) -> SessionState:
        request = ctx.request
        narrowed: set[str] | None = None
        run: str | None = None
        if request is None:
            key = process_key
        else:
            # A client may label its session (?session=...) and its run (?run=...): the harness does, to find
            # each episode's calls; otherwise the transport's session id is the key.
            header = request.headers.get("mcp-session-id")
            key = request.query_params.get("session") or header or request.headers.get("x-pau-session") or "stateless"
            run = request.query_params.get("run") or None
            wanted = request.query_params.get("methods")
            if wanted:
                narrowed = set()
                for item in wanted.split(","):
                    exposed = catalog.find(item.strip())
                    if exposed is not None:
                        narrowed.add(exposed.tool)
        client = None
        params = ctx.session.client_params if ctx.session is not None else None
        if params is not None and params.client_info is not None:
            client = f"{params.client_info.name} {params.client_info.version}".strip()
        return sessions.get(key, client=client, visible=narrowed, run=run)

    def visible(state: SessionState) -> list[Exposed]:
        return [e for e in catalog if state.sees(e.tool)]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        state = session_of(ctx)
        tools = (
            [_SUBMIT, _OPEN]
            + ([_NOOP] if noop_tool else [])
            + [
                types.Tool(
                    name=e.tool,
                    title=f"Hidden function {e.tool}",
                    description=e.description(service.budget),
                    input_schema=e.input_schema(),
                    output_schema=OUTPUT_SCHEMA,
                    annotations=_ANNOTATIONS,
                )
                for e in visible(state)
            ]
        )
        page, cursor = _page(tools, params.cursor if params else None, page_size)
        return types.ListToolsResult(tools=page, next_cursor=cursor)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        state = session_of(ctx)
        arguments = params.arguments or {}
        if params.name == SUBMIT_TOOL:
            method, description, code = arguments.get("method"), arguments.get("description"), arguments.get("code")
            if (
                not isinstance(method, str)
                or not isinstance(description, str)
                or not isinstance(code, (str, type(None)))
            ):
                return _result(
                    Reply(
                        text="submit needs `method` (a tool name) and `description` (text); `code` is optional text.",
                        is_error=True,
                    )
                )
            return _result(await service.submit(state, method, description, code))
        if params.name == OPEN_TOOL:
            return _result(await _open(ctx, state, arguments))
        if noop_tool and params.name == "noop":
            return types.CallToolResult(content=[types.TextContent(type="text", text="ok")])
        exposed = catalog.find(params.name)
        if exposed is None or exposed.tool != params.name or not state.sees(exposed.tool):
            return _result(
                Reply(
                    text=f"Unknown tool {params.name!r}; list the tools to see the functions available.", is_error=True
                )
            )
        return _result(await service.call(state, exposed, arguments))

    async def _open(ctx: ServerRequestContext[Any], state: SessionState, arguments: dict[str, Any]) -> Reply:
        names = arguments.get("methods")
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            return Reply(text="open needs `methods`: a non-empty list of tool names.", is_error=True)
        chosen = {
            catalog.find(n).tool for n in names if catalog.find(n) is not None and state.sees(catalog.find(n).tool)
        }  # type: ignore[union-attr]
        unknown = [n for n in names if catalog.find(n) is None or not state.sees(catalog.find(n).tool)]  # type: ignore[union-attr]
        if unknown:
            return Reply(text=f"Unknown tools: {', '.join(unknown)}.", is_error=True)
        with state.lock:
            state.visible = chosen
        try:
            await ctx.session.send_tool_list_changed()
        except Exception as exc:  # a client that cannot take notifications still gets the narrowed list
            log.debug("tools/list_changed not delivered: %s", exc)
        return Reply(
            text=f"This session now shows {len(chosen)} function(s): {', '.join(sorted(chosen))}.",
            structured={"methods": sorted(chosen)},
        )

    async def list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        state = session_of(ctx)
        resources = [
            types.Resource(
                name=e.tool, title=f"What is known about {e.tool}", uri=f"{_RESOURCE_PREFIX}{e.tool}", mime_type="text/plain",
                description=f"Header and initial examples of the hidden function {e.tool}.",
            )
            for e in visible(state)
        ]  # fmt: skip
        page, cursor = _page(resources, params.cursor if params else None, page_size)
        return types.ListResourcesResult(resources=page, next_cursor=cursor)

    async def read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        state = session_of(ctx)
        uri = str(params.uri)
        tool = uri[len(_RESOURCE_PREFIX) :] if uri.startswith(_RESOURCE_PREFIX) else ""
        exposed = catalog.find(tool)
        if exposed is None or exposed.tool != tool or not state.sees(tool):
            raise MCPError(types.INVALID_PARAMS, f"unknown resource {uri}")
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(uri=uri, mime_type="text/plain", text=exposed.resource_text(service.budget))
            ]
        )

    async def list_prompts(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        state = session_of(ctx)
        prompts = [
            types.Prompt(
                name=e.tool,
                title=f"Explore {e.tool}",
                description=f"The starting prompt for exploring {e.tool} interactively.",
            )
            for e in visible(state)
        ]
        page, cursor = _page(prompts, params.cursor if params else None, page_size)
        return types.ListPromptsResult(prompts=page, next_cursor=cursor)

    async def get_prompt(ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams) -> types.GetPromptResult:
        state = session_of(ctx)
        exposed = catalog.find(params.name)
        if exposed is None or exposed.tool != params.name or not state.sees(exposed.tool):
            raise MCPError(types.INVALID_PARAMS, f"unknown prompt {params.name!r}")
        return types.GetPromptResult(
            description=f"Explore {exposed.tool}",
            messages=[
                types.PromptMessage(
                    role="user", content=types.TextContent(type="text", text=exposed.prompt_text(service.budget))
                )
            ],
        )

    return Server(
        "pau-mcp",
        version=__version__,
        title="pau-mcp hidden functions",
        instructions=(
            "Each fn_... tool is a hidden Python function you cannot read. Call it with inputs you choose to work out "
            "what it does, then call `submit` with its tool name and your description."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


def initialization_options(server: Server[Any]) -> Any:
    """Initialization options announcing tools/list_changed."""
    return server.create_initialization_options(NotificationOptions(tools_changed=True))
