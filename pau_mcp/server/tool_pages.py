"""Pages of ``tools/list`` as the wire carries them, shaped once per server and protocol era.

A page's tools are built once per server (``Handlers.method_tool``), but the SDK then shapes every page for the wire
on every request: it dumps the result, validates it against the era's schema and dumps it again. For a page of 100
method tools that was most of the request (about 24 of its 32 ms of server CPU at load 1, benchmarks/tool_list.py),
and any client can ask for it again and again. ``ToolPages`` is the server middleware that keeps each shaped page
and answers the same page again without shaping it. What a page holds is decided the same way on every request (the
caller's credential, what it sees and the cursor: ``PageOf``); the key is the era, the tools on the page and the
next cursor, so two credentials that see the same page share it and one that sees less gets its own.

Writing the answer was still most of the rest (a pydantic dump of the whole reply and ``json.dumps``, 7.8 of a
page's 8.2 ms): over HTTP each tool's JSON is encoded once as well, and the transport writes the page from those
bytes (``splice``).

Memory: the tools' wire forms are shared between pages (one per tool and era, with its JSON), so what the cache
holds is bounded by the catalog times the eras clients speak, about twice the size of the built tools themselves;
the pages are lists of references, at most ``pages`` of them (least recently used first out), and the arrays of the
pages answered most recently are kept joined, up to ``joined_bytes`` (64 MiB: about 170 pages of 100 tools).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp_types.methods import validate_client_request

from .catalog import Exposed
from .splice import offered

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


@dataclass(frozen=True)
class _Page:
    """A shaped page: the result as the SDK shaped it, and its tools' JSON array in pieces (each tool's JSON
    encoded once, shared with every page that lists it, and the brackets and commas between them)."""

    result: dict[str, Any]
    array: tuple[bytes, ...]


class ToolPages:
    """The ``tools/list`` middleware that answers a page shaped before with the same shaped page.

    Over HTTP the page's tools are written from JSON encoded once per tool (``splice``): the SDK's writing of a
    100-tool page, most of its cost, is not done again.

    Args:
        page_of: The tools on the page a request asks for, and the next cursor, as the handler decides them.
        pages: How many shaped pages to keep (least recently used first out).
        joined_bytes: How many bytes of pages' arrays to keep joined whole, ready to write (least recently used
            first out); a page not kept is joined from its pieces for each answer.
    """

    def __init__(self, page_of: PageOf, *, pages: int = 4096, joined_bytes: int = 64 << 20) -> None:
        self._page_of = page_of
        self._pages = pages
        self._shaped: OrderedDict[Hashable, _Page] = OrderedDict()
        self._joined: OrderedDict[Hashable, bytes] = OrderedDict()
        self._joined_room = joined_bytes
        self._tools: dict[tuple[str, str], tuple[dict[str, Any], bytes]] = {}
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
            splice = offered(getattr(ctx.request, "scope", None))
            if splice is None:
                return shaped.result  # the pipeline copies the top level and writes nothing below it
            return {**shaped.result, "tools": splice.placeholder(self._joined_array(key, shaped))}
        result = await call_next(ctx)
        if isinstance(result, dict) and _listed(result) == [item.tool if isinstance(item, Exposed) else item.name
                                                             for item in page]:  # fmt: skip
            self._remember(key, ctx.protocol_version, result)
        return result

    def _remember(self, key: Hashable, era: str, result: dict[str, Any]) -> None:
        tools: list[dict[str, Any]] = []
        encoded: list[bytes] = []
        for tool in result["tools"]:
            kept = self._tools.get((era, tool["name"]))
            if kept is None or kept[0] != tool:
                wire = {name: self._part(value) if name in _SHARED_PARTS else value for name, value in tool.items()}
                kept = self._tools[(era, tool["name"])] = (wire, _encode(wire))
            tools.append(kept[0])
            encoded.append(kept[1])
        array = [b"["]
        for number, tool_json in enumerate(encoded):
            array += (b"," if number else b"", tool_json)
        self._shaped[key] = _Page({**result, "tools": tools}, (*array, b"]"))
        while len(self._shaped) > self._pages:
            gone, _ = self._shaped.popitem(last=False)
            joined = self._joined.pop(gone, None)
            self._joined_room += len(joined) if joined is not None else 0

    def _joined_array(self, key: Hashable, page: _Page) -> bytes:
        # Joining a page afresh for every answer cost more than the copy: a new 370 KB buffer is fresh memory
        # from the kernel, faulted in page by page.
        joined = self._joined.get(key)
        if joined is not None:
            self._joined.move_to_end(key)
            return joined
        joined = self._joined[key] = b"".join(page.array)
        self._joined_room -= len(joined)
        while self._joined_room < 0:
            self._joined_room += len(self._joined.popitem(last=False)[1])
        return joined

    def _part(self, value: Any) -> Any:
        return self._parts.setdefault(json.dumps(value, sort_keys=True), value)


def _encode(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


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
