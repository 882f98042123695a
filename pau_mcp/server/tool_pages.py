"""Pages of ``tools/list`` as the wire carries them, shaped once per server and protocol era.

A page's tools are built once per server (``Handlers.method_tool``), but the SDK then shapes every page for the wire
on every request: it dumps the result, validates it against the era's schema and dumps it again. For a page of 100
method tools that was most of the request (about 24 of its 32 ms of server CPU at load 1, benchmarks/tool_list.py),
and any client can ask for it again and again. ``ToolPages`` is the server middleware that keeps each shaped page and answers the
same page again without shaping it. What a page holds is decided the same way on every request (the caller's
credential, what it sees and the cursor: ``PageOf``); the key is the era, the tools on the page and the next
cursor, so two credentials that see the same page share it and one that sees less gets its own.

Memory: the tools' wire forms are shared between pages (one per tool and era), so what the cache holds is bounded
by the catalog times the eras clients speak, about the size of the built tools themselves; the pages are lists of
references, at most ``pages`` of them (least recently used first out).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp_types.methods import validate_client_request

from .catalog import Exposed

__all__ = ["PageOf", "ToolPages"]

#: The tools of the page a ``tools/list`` request asks for (catalog methods or ready tools) and the next cursor.
PageOf = Callable[[ServerRequestContext[Any], "str | None"], Awaitable[tuple[list[Any], "str | None"]]]

#: Parts of a tool's wire form that many tools share word for word: kept once.
_SHARED_PARTS = ("outputSchema", "annotations")


def _identity(item: types.Tool | Exposed) -> Hashable:
    if isinstance(item, Exposed):
        return item.tool  # a method's tool never changes while the server runs
    # Fixture tools are made again for each listing: what they say is their identity.
    return item.model_dump_json(by_alias=True, exclude_none=True)


class ToolPages:
    """The ``tools/list`` middleware that answers a page shaped before with the same shaped page.

    Args:
        page_of: The tools on the page a request asks for, and the next cursor, as the handler decides them.
        pages: How many shaped pages to keep (least recently used first out).
    """

    def __init__(self, page_of: PageOf, *, pages: int = 4096) -> None:
        self._page_of = page_of
        self._pages = pages
        self._shaped: OrderedDict[Hashable, dict[str, Any]] = OrderedDict()
        self._tools: dict[tuple[str, str], dict[str, Any]] = {}
        self._parts: dict[str, Any] = {}

    async def __call__(self, ctx: ServerRequestContext[Any], call_next: CallNext) -> HandlerResult:
        listing, cursor = _listing(ctx)
        if not listing:  # not a well-formed tools/list: the SDK answers it as it answers any request
            return await call_next(ctx)
        page, next_cursor = await self._page_of(ctx, cursor)
        names = tuple(map(_identity, page))
        key = (ctx.protocol_version, next_cursor, names)
        shaped = self._shaped.get(key)
        if shaped is not None:
            self._shaped.move_to_end(key)
            return shaped  # the pipeline copies the top level and writes nothing below it
        result = await call_next(ctx)
        if isinstance(result, dict) and _listed(result) == [item.tool if isinstance(item, Exposed) else item.name
                                                             for item in page]:  # fmt: skip
            self._remember(key, ctx.protocol_version, result)
        return result

    def _remember(self, key: Hashable, era: str, result: dict[str, Any]) -> None:
        tools: list[dict[str, Any]] = []
        for tool in result["tools"]:
            kept = self._tools.get((era, tool["name"]))
            if kept is None or kept != tool:
                kept = {name: self._part(value) if name in _SHARED_PARTS else value for name, value in tool.items()}
                self._tools[(era, tool["name"])] = kept
            tools.append(kept)
        self._shaped[key] = {**result, "tools": tools}
        while len(self._shaped) > self._pages:
            self._shaped.popitem(last=False)

    def _part(self, value: Any) -> Any:
        return self._parts.setdefault(json.dumps(value, sort_keys=True), value)


def _listing(ctx: ServerRequestContext[Any]) -> tuple[bool, str | None]:
    """Whether a request is a well-formed ``tools/list``, and its cursor (None for the first page)."""
    if ctx.method != "tools/list":
        return False, None
    params: Mapping[str, Any] | None = ctx.params
    try:
        validate_client_request(ctx.method, ctx.protocol_version, params)
    except Exception:  # answered by the SDK itself, with the error it gives any malformed request
        return False, None
    cursor = params.get("cursor") if params else None
    return True, cursor if isinstance(cursor, str) else None


def _listed(result: dict[str, Any]) -> list[Any] | None:
    tools = result.get("tools")
    if not isinstance(tools, list) or result.get("resultType", "complete") != "complete":
        return None
    return [tool.get("name") if isinstance(tool, dict) else None for tool in tools]
