"""The requests of one MCP server: who each speaks for (its credential, resolved once, here at the edge), and the
tools, resources and prompts it is answered with (``Handlers``; ``app.build_server`` registers them)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..contract import (
    OPEN_INPUT_SCHEMA,
    OPEN_OUTPUT_SCHEMA,
    OPEN_TOOL,
    OUTPUT_SCHEMA,
    SUBMIT_INPUT_SCHEMA,
    SUBMIT_OUTPUT_SCHEMA,
    SUBMIT_TOOL,
    OpenResult,
    OpenStatus,
    SubmitStatus,
    label_problem,
)
from ..oauth import signed_in
from ..runstore import StoreBusy, StoreError
from .catalog import Exposed
from .features import Features
from .service import MethodService, Reply, refused
from .sessions import DEFAULT_LABEL, Credential, SessionRefused, Sessions, SessionState
from .signin import subject_credential
from .slots import CallSlots, TooManyCalls
from .tokens import SessionToken, TokenSigner, looks_like_session_token

__all__ = ["RUN_META", "SESSION_META", "Handlers"]

log = logging.getLogger("pau_mcp.server")

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
        "your own Python implementation of it: a function with the name and parameters its header gives (e.g. "
        "def test_func(arg0):). Submissions are recorded for scoring."
    ),
    input_schema=SUBMIT_INPUT_SCHEMA,
    output_schema=SUBMIT_OUTPUT_SCHEMA,
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
    input_schema=OPEN_INPUT_SCHEMA,
    output_schema=OPEN_OUTPUT_SCHEMA,
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


#: ``_meta`` keys a request may name its label and run with (the 2026-07-28 era carries client facts per request).
SESSION_META = "dev.pau-mcp/session"
RUN_META = "dev.pau-mcp/run"


def _names(listed: str) -> list[str]:
    return [name.strip() for name in listed.split(",")[:10_000]]


def _named(request: Any, meta: Any) -> tuple[str | None, str | None]:
    """The session label and run a request names (URL, headers, ``_meta``); refused if two ways disagree.

    Raises:
        MCPError: two different labels (or runs), a ``_meta`` value that is not text, or a malformed label.
    """
    meta = meta if isinstance(meta, dict) else {}
    chosen: list[str | None] = []
    for sources, what in (
        ((("?session=", request.query_params.get("session")), ("X-PAU-Session", request.headers.get("x-pau-session")),
          (f"_meta {SESSION_META!r}", meta.get(SESSION_META))), "session label"),
        ((("?run=", request.query_params.get("run")), ("X-PAU-Run", request.headers.get("x-pau-run")),
          (f"_meta {RUN_META!r}", meta.get(RUN_META))), "run label"),
    ):  # fmt: skip
        given = [(where, value) for where, value in sources if value is not None and value != ""]
        for where, value in given:
            if not isinstance(value, str):
                raise MCPError(types.INVALID_REQUEST, f"{where} must be text naming a {what}")
        if len({value for _, value in given}) > 1:
            raise MCPError(
                types.INVALID_REQUEST,
                f"{' and '.join(where for where, _ in given)} name different {what}s: send one of them",
            )
        value = given[0][1] if given else None
        problem = label_problem(value, what) if value is not None else None
        if problem:
            raise MCPError(types.INVALID_REQUEST, problem)
        chosen.append(value)
    return chosen[0], chosen[1]


class Handlers:
    """The request handlers of one server (``build_server``), over its catalog, sessions and limits."""

    def __init__(
        self, service: MethodService, sessions: Sessions, slots: CallSlots, features: Features, *,
        tokens: TokenSigner | None, stateless: bool, process_key: str, page_size: int,
    ) -> None:  # fmt: skip
        self.service = service
        self.catalog = service.catalog
        self.sessions = sessions
        self.slots = slots
        self.features = features
        self.extra = features.fixtures
        self.tokens = tokens
        self.stateless = stateless
        self.process_key = process_key
        self.page_size = page_size
        self.schemas = {SUBMIT_TOOL: _SUBMIT.input_schema, OPEN_TOOL: _OPEN.input_schema}
        self.everything = list(service.catalog)
        self.built: dict[str, types.Tool] = {}  # a method's tool never changes while the server runs: built once

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """The input schema of tool ``name`` (pau-mcp's own, a method's or a fixture's), for the SDK's validation."""
        return (
            self.schemas.get(name)
            or (e.input_schema() if (e := self.catalog.by_tool(name)) else None)
            or self.extra.input_schema(name)
        )

    def session_token(self, request: Any) -> SessionToken | None:
        """The request's session token, if it carries one (verified by the SDK's auth, or here without it)."""
        access = getattr(request.scope.get("user"), "access_token", None)
        if access is not None:
            # Verified (signature and expiry) by the SDK's auth for this very request: read, not checked again.
            return SessionToken.from_claims(access.claims) if access.claims and signed_in(access) is None else None
        header = request.headers.get("authorization", "")
        credential = header[7:].strip() if header[:7].lower() == "bearer " else ""
        if not looks_like_session_token(credential):
            return None
        token = self.tokens.verify(credential) if self.tokens is not None else None
        if token is None:
            raise MCPError(
                types.INVALID_REQUEST,
                "the session token is not valid here (altered, from another deployment, or expired); "
                "ask the operator for a new one (pau-mcp token issue)",
            )
        return token

    async def caller(self, ctx: ServerRequestContext[Any]) -> tuple[SessionState, str | None]:
        """Who spends this request's budget and what it sees; and the connection ``open`` narrows, if it has one.

        A connection holds a narrowing only in the handshake era (a stdio process, an MCP session): in the
        2026-07-28 era a tool list depends on the credential and the request alone.
        """
        request = ctx.request
        params = ctx.session.client_params if ctx.session is not None else None
        info = params.client_info if params is not None else None
        # Recorded with a new session: who first spoke for the credential, and in which protocol revision.
        client = (
            f"{info.name} {info.version}".strip() + "; " if info is not None else ""
        ) + f"MCP {ctx.protocol_version}"
        handshake = ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
        if request is None:  # stdio: the server process is the credential, whatever a request names
            connection = self.process_key if handshake else None
            state = await self._session(Credential("process", self.process_key), client)
            return state.narrowed(self.sessions.narrowing(connection) if connection else None), connection
        state = await self._http_session(request, ctx.meta, client)
        wanted = request.query_params.get("methods")
        if wanted:
            state = state.narrowed(e.tool for e in map(self.catalog.by_tool, _names(wanted)) if e is not None)
        connection = request.headers.get("mcp-session-id") if handshake and not self.stateless else None
        return state.narrowed(self.sessions.narrowing(connection) if connection else None), connection

    async def _http_session(self, request: Any, meta: Any, client: str) -> SessionState:
        """The session of an HTTP request's credential: a signed-in subject, a session token, or a label."""
        label, run = _named(request, meta)
        token = self.session_token(request)
        access = getattr(request.scope.get("user"), "access_token", None)
        subject = subject_credential(access, label, run)
        if subject is not None:  # recorded with the subject's session: the OAuth client that first spoke for it
            return await self._session(subject, f"{client}; OAuth client {str(getattr(access, 'client_id', ''))[:200]}")
        if token is not None:
            for given, own, what in ((label, token.label, "session label"), (run, token.run, "run")):
                if given is not None and given != own:
                    raise MCPError(
                        types.INVALID_REQUEST,
                        f"this session token is for label {token.label!r}"
                        + (f" in run {token.run!r}" if token.run else " in the server run")
                        + f"; a request cannot name another {what} (?session=, ?run=, X-PAU-Session, X-PAU-Run or "
                        "_meta): leave it out",
                    )
            return (await self._session(Credential("token", token.label, token.run), client)).narrowed(token.methods)
        return await self._session(Credential("label", label or DEFAULT_LABEL, run), client)

    async def _session(self, credential: Credential, client: str | None) -> SessionState:
        try:
            return await self.sessions.claim(credential, client=client)
        except SessionRefused as exc:
            raise MCPError(types.INVALID_REQUEST, str(exc)) from None
        except StoreError as exc:  # the reason only: an agent reads this, and the store's path or URL is not its
            log.error("a session of %s could not be claimed in the run store: %s", credential.kind, exc)
            busy = " another process holds its write lock; try again in a few seconds" * isinstance(exc, StoreBusy)
            raise MCPError(
                types.INTERNAL_ERROR, f"the server's run store cannot be used ({exc.reason}){busy}"
            ) from None

    def visible(self, state: SessionState) -> list[Exposed]:
        return self.everything if state.visible is None else [e for e in self.everything if state.sees(e.tool)]

    def seen(self, state: SessionState) -> list[str]:
        """The catalog tool names ``state`` sees."""
        return [e.tool for e in self.visible(state)]

    def method_tool(self, e: Exposed) -> types.Tool:
        tool = self.built.get(e.tool)
        if tool is None:
            budget = self.service.budget
            tool = self.built[e.tool] = types.Tool(
                name=e.tool,
                title=f"Hidden function {e.tool}",
                description=e.description(budget),
                input_schema=e.input_schema(),
                output_schema=OUTPUT_SCHEMA,
                annotations=_ANNOTATIONS,
                _meta=e.meta(budget),
            )
        return tool

    async def page(
        self, ctx: ServerRequestContext[Any], cursor: str | None
    ) -> tuple[list[types.Tool | Exposed], str | None]:
        """The tools on the page of the tool list a request asks for (the caller's), and the next cursor.

        Raises:
            MCPError: the cursor is not one this server gave out.
        """
        state, connection = await self.caller(ctx)
        # Only the requested page is built (each tool once per server): a list of 5,000 methods used to be built
        # whole for every page, 0.3 s of server CPU that any client could ask for again and again.
        listed: list[types.Tool | Exposed] = [_SUBMIT, *([_OPEN] if connection else []), *self.extra.tools()]
        listed += self.visible(state)
        return _page(listed, cursor, self.page_size)

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        page, cursor = await self.page(ctx, params.cursor if params else None)
        tools = [item if isinstance(item, types.Tool) else self.method_tool(item) for item in page]
        return types.ListToolsResult(tools=tools, next_cursor=cursor)

    async def call_tool(self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
        state, connection = await self.caller(ctx)
        extra = self.extra
        if fixture := extra.tool(params.name):
            return await self._slotted(
                state, functools.partial(extra.call, ctx, state.store_id, connection, fixture, params)
            )
        work = functools.partial(
            self._slotted, state, functools.partial(self._call_tool, ctx, params, state, connection)
        )
        if params.name == SUBMIT_TOOL and self.service.feedback is not None or self.catalog.by_tool(params.name):
            return await self.features.call(ctx, state.store_id, params.name, work)  # may take long: maybe a task
        return await work()

    async def _slotted(self, state: SessionState, call: Callable[[], Any]) -> Any:
        try:
            async with self.slots.slot(state.store_id):
                return await call()
        except TooManyCalls as exc:
            raise MCPError(types.INVALID_REQUEST, str(exc)) from None

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams, state: SessionState,
        connection: str | None,
    ) -> types.CallToolResult:  # fmt: skip
        arguments = params.arguments or {}
        if params.name == SUBMIT_TOOL:
            return _result(await self._submit(state, arguments))
        if params.name == OPEN_TOOL:
            if connection is None:
                return _result(
                    refused(
                        OpenStatus.UNKNOWN_TOOL,
                        "There is no `open` tool in this protocol era (the tool list depends on your credential "
                        "only); add ?methods=fn_...,fn_... to the server's URL to list fewer functions.",
                    )
                )
            return _result(await self._open(ctx, state, connection, arguments))
        exposed = self.catalog.by_tool(params.name)
        if exposed is None or not state.sees(exposed.tool):
            # A protocol error, as the specification has it (and as a method id is answered: like any unknown name).
            raise MCPError(
                types.INVALID_PARAMS,
                f"Unknown tool {params.name[:80]!r}; list the tools to see the functions available.",
            )
        return _result(await self.service.call(state, exposed, arguments))

    async def _submit(self, state: SessionState, arguments: dict[str, Any]) -> Reply:
        method, description, code = arguments.get("method"), arguments.get("description"), arguments.get("code")
        if not isinstance(method, str) or not isinstance(description, str) or not isinstance(code, (str, type(None))):
            return refused(
                SubmitStatus.INVALID_INPUT,
                "submit needs `method` (a tool name) and `description` (text); `code` is optional text.",
            )
        return await self.service.submit(state, method, description, code)

    async def _open(
        self, ctx: ServerRequestContext[Any], state: SessionState, connection: str, arguments: dict[str, Any]
    ) -> Reply:
        names = arguments.get("methods")
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            return refused(OpenStatus.INVALID_INPUT, "open needs `methods`: a non-empty list of tool names.")
        found = {n: self.catalog.by_tool(n) for n in names}
        chosen = {e.tool for e in found.values() if e is not None and state.sees(e.tool)}
        unknown = [n for n, e in found.items() if e is None or not state.sees(e.tool)]
        if unknown:
            return refused(OpenStatus.UNKNOWN_TOOL, f"Unknown tools: {', '.join(unknown)}.")
        self.sessions.narrow(connection, chosen)
        try:
            await ctx.session.send_tool_list_changed()
        except Exception as exc:  # a client that cannot take notifications still gets the narrowed list
            log.debug("tools/list_changed not delivered: %s", exc)
        return Reply(
            text=f"This session now shows {len(chosen)} function(s): {', '.join(sorted(chosen))}.",
            structured=OpenResult(status=OpenStatus.OK, methods=sorted(chosen)).sent(),
        )

    async def list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        state, _ = await self.caller(ctx)
        listed: list[types.Resource | Exposed] = [*self.extra.resources()]
        listed += self.visible(state)
        page, cursor = _page(listed, params.cursor if params else None, self.page_size)
        resources = [
            e if isinstance(e, types.Resource) else types.Resource(
                name=e.tool, title=f"What is known about {e.tool}", uri=f"{_RESOURCE_PREFIX}{e.tool}", mime_type="text/plain",
                description=f"Header and initial examples of the hidden function {e.tool}.",
            )
            for e in page
        ]  # fmt: skip
        return types.ListResourcesResult(resources=resources, next_cursor=cursor)

    async def read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        state, _ = await self.caller(ctx)
        uri = str(params.uri)
        if found := self.extra.read(uri):
            return found
        tool = uri[len(_RESOURCE_PREFIX) :] if uri.startswith(_RESOURCE_PREFIX) else ""
        exposed = self.catalog.by_tool(tool)
        if exposed is None or not state.sees(tool):
            raise MCPError(
                types.INVALID_PARAMS, f"unknown resource {uri[:200]}; list the resources", data={"uri": uri[:2000]}
            )
        text = exposed.resource_text(self.service.budget)
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="text/plain", text=text)]
        )

    async def list_prompts(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        state, _ = await self.caller(ctx)
        listed: list[types.Prompt | Exposed] = [*self.extra.prompts()]
        listed += self.visible(state)
        page, cursor = _page(listed, params.cursor if params else None, self.page_size)
        prompts = [
            e if isinstance(e, types.Prompt) else types.Prompt(
                name=e.tool,
                title=f"Explore {e.tool}",
                description=f"The starting prompt for exploring {e.tool} interactively.",
            )
            for e in page
        ]  # fmt: skip
        return types.ListPromptsResult(prompts=prompts, next_cursor=cursor)

    async def get_prompt(self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams) -> Any:
        state, connection = await self.caller(ctx)
        if fixture := self.extra.prompt(params.name):
            return await self.extra.get_prompt(ctx, state.store_id, connection, fixture, params)
        exposed = self.catalog.by_tool(params.name)
        if exposed is None or not state.sees(exposed.tool):
            raise MCPError(types.INVALID_PARAMS, f"unknown prompt {params.name!r}")
        text = exposed.prompt_text(self.service.budget)
        return types.GetPromptResult(
            description=f"Explore {exposed.tool}",
            messages=[types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))],
        )
