"""A page of ``tools/list`` is shaped for the wire once and answered again as it was: the same bytes, to the
credentials that see that page and no other.

The middleware is driven directly (``ToolPages`` with a stand-in for the SDK's chain) to count what is shaped, and
through the real HTTP app (``memory_http_server``) with raw requests of both eras to compare what a client reads.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import mcp_types as types
import pytest
from conftest import ModernSession, memory_http_server, tool_of
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION

from pau_mcp.server.splice import SCOPE_KEY, Splice
from pau_mcp.server.tool_pages import ToolPages

B001, B002 = "builtin/b001", "builtin/b002"


class _Chain:
    """The SDK's side of the middleware: pages of named tools, shaped (counted) as the SDK would shape them."""

    def __init__(self, names: list[str], size: int = 2) -> None:
        self.names, self.size, self.shaped = names, size, 0

    async def page_of(self, ctx: Any, cursor: str | None) -> tuple[list[types.Tool], str | None]:
        start = int(cursor or 0)
        if start > len(self.names):
            raise MCPError(types.INVALID_PARAMS, f"invalid cursor {cursor!r}")
        end = start + self.size
        tools = [types.Tool(name=n, input_schema={"type": "object"}) for n in self.names[start:end]]
        return tools, (str(end) if end < len(self.names) else None)

    async def call_next(self, ctx: Any) -> dict[str, Any]:
        self.shaped += 1
        if not isinstance((ctx.params or {}).get("cursor", ""), str):
            raise MCPError(types.INVALID_PARAMS, "Invalid request parameters")
        tools, cursor = await self.page_of(ctx, (ctx.params or {}).get("cursor"))
        dumped: dict[str, Any] = {"tools": [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in tools]}
        return {**dumped, **({"nextCursor": cursor} if cursor else {}), "resultType": "complete"}


#: What a 2026-07-28 request carries in every request's ``_meta`` (without it the SDK refuses the request).
_MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": LATEST_MODERN_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
}


def _ctx(method: str = "tools/list", params: dict[str, Any] | None = None, era: str = LATEST_MODERN_VERSION) -> Any:
    params = {**(params or {}), **({"_meta": _MODERN_META} if era == LATEST_MODERN_VERSION else {})}
    return ServerRequestContext(
        session=None, lifespan_context=None, method=method, params=params, request_id=1,  # type: ignore[arg-type]
        protocol_version=era,
    )  # fmt: skip


async def _listed(pages: ToolPages, ctx: Any, chain: _Chain) -> dict[str, Any]:
    result = await pages(ctx, chain.call_next)
    assert isinstance(result, dict), result
    return result


def test_a_page_listed_again_is_not_shaped_again_and_reads_the_same() -> None:
    chain = _Chain(["a", "b", "c"])
    pages = ToolPages(chain.page_of)

    async def main() -> None:
        first = await _listed(pages, _ctx(), chain)
        again = await _listed(pages, _ctx(), chain)
        second = await _listed(pages, _ctx(params={"cursor": "2"}), chain)
        assert again == first and [t["name"] for t in first["tools"]] == ["a", "b"] and first["nextCursor"] == "2"
        assert [t["name"] for t in second["tools"]] == ["c"] and "nextCursor" not in second
        assert chain.shaped == 2  # each page once

    anyio.run(main)


def test_each_protocol_era_and_each_set_of_tools_gets_its_own_shaped_page() -> None:
    chain = _Chain(["a", "b", "c"])
    pages = ToolPages(chain.page_of)

    async def main() -> None:
        await pages(_ctx(), chain.call_next)
        await pages(_ctx(era=LATEST_HANDSHAKE_VERSION), chain.call_next)
        assert chain.shaped == 2
        chain.names = ["a", "c"]  # a caller who sees less: another page under the same cursor
        narrowed = await _listed(pages, _ctx(), chain)
        assert [t["name"] for t in narrowed["tools"]] == ["a", "c"] and chain.shaped == 3

    anyio.run(main)


def test_other_requests_and_malformed_lists_go_to_the_sdk_untouched() -> None:
    chain = _Chain(["a"])
    pages = ToolPages(chain.page_of)

    async def main() -> None:
        for _ in range(2):
            await pages(_ctx("tools/call", {"name": "a"}), chain.call_next)
            with pytest.raises(MCPError, match="Invalid request parameters"):
                await pages(_ctx(params={"cursor": 5}), chain.call_next)
        assert chain.shaped == 4  # never kept: the SDK answers each (and refuses the malformed one itself)
        with pytest.raises(MCPError, match="invalid cursor"):
            await pages(_ctx(params={"cursor": "99"}), chain.call_next)

    anyio.run(main)


def test_the_pages_kept_are_bounded_and_the_least_recently_used_goes_first() -> None:
    chain = _Chain([f"t{i}" for i in range(10)], size=1)
    pages = ToolPages(chain.page_of, pages=3)

    async def main() -> None:
        for cursor in ("0", "1", "2", "0", "3", "0", "1"):
            await pages(_ctx(params={"cursor": cursor}), chain.call_next)
        # 0, 1, 2 shaped; 0 kept (used again); 3 shaped and 1 out; 0 kept; 1 shaped again.
        assert chain.shaped == 5

    anyio.run(main)


def test_pages_written_over_http_are_their_own_arrays_and_the_joined_ones_kept_stay_within_their_bytes() -> None:
    chain = _Chain([f"t{i}" for i in range(12)], size=2)
    room = 150  # about two pages' arrays of two small tools
    pages = ToolPages(chain.page_of, joined_bytes=room)

    async def main() -> None:
        for cursor in ["0", "2", "4", "6", "8", "10"] * 2:
            await pages(_ctx(params={"cursor": cursor}), chain.call_next)  # shaped, or answered as dicts (no HTTP)
            splice = Splice()
            ctx = dataclasses.replace(
                _ctx(params={"cursor": cursor}), request=SimpleNamespace(scope={SCOPE_KEY: splice})
            )
            result = await _listed(pages, ctx, chain)
            assert [t["name"] for t in result["tools"]] == [splice.marker.decode()]
            assert [t["name"] for t in json.loads(splice.array)] == [f"t{int(cursor)}", f"t{int(cursor) + 1}"]
            kept = sum(map(len, pages._joined.values()))  # noqa: SLF001 - the bound is what is tested
            assert 0 < kept <= room
        assert chain.shaped == 6

    anyio.run(main)


def _pages(session: ModernSession) -> list[dict[str, Any]]:
    pages, cursor = [], None
    while True:
        result = session.request("tools/list", {"cursor": cursor} if cursor else {})
        pages.append(result)
        cursor = result.get("nextCursor")
        if cursor is None:
            return pages


@pytest.mark.parametrize("page_size", ["3"])
def test_a_served_page_answered_again_is_the_same_json_and_never_another_credentials(
    tmp_path: Path, page_size: str
) -> None:
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--page-size", page_size) as url:
        everything = ModernSession(url)
        narrowed = ModernSession(f"{url}?methods={tool_of(B002)}")
        try:
            first = _pages(everything)
            assert len(first) > 3 and _pages(everything) == first
            assert [[t["name"] for t in page["tools"]] for page in _pages(narrowed)] == [["submit", tool_of(B002)]]
            assert _pages(everything) == first  # the narrowed page did not take the place of any other
            status, reply = everything.send("tools/list", {"cursor": "not a cursor"})
            assert status == 400 and reply["error"]["code"] == types.INVALID_PARAMS, reply
        finally:
            everything.close()
            narrowed.close()


def _raw_pages(url: str, era: str, stateless: bool) -> list[bytes]:
    """The raw bodies of one request for the first page and three for the second, in one session of ``era``."""
    import httpx2

    from pau_mcp.tls import shared_context

    headers = {"accept": "application/json, text/event-stream"}
    bodies: list[bytes] = []
    with httpx2.Client(verify=shared_context(), timeout=60) as client:

        def post(message: dict[str, Any], **extra: str) -> bytes:
            reply = client.post(url, headers={**headers, **extra}, json={"jsonrpc": "2.0", **message})
            assert reply.status_code in (200, 202), (reply.status_code, reply.text)
            assert int(reply.headers.get("content-length", len(reply.content))) == len(reply.content)
            return reply.content

        routing: dict[str, str] = {"mcp-protocol-version": era}
        meta = {"_meta": _MODERN_META} if era == LATEST_MODERN_VERSION else {}
        if era == LATEST_MODERN_VERSION:
            routing["mcp-method"] = "tools/list"
        else:
            opening = client.post(url, headers=headers, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": era, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})  # fmt: skip
            assert opening.status_code == 200, opening.text
            if not stateless:
                routing["mcp-session-id"] = opening.headers["mcp-session-id"]
            post({"method": "notifications/initialized"}, **routing)
        for number, cursor in enumerate([None, "3", "3", "3"], 1):
            params = {**meta, **({"cursor": cursor} if cursor else {})}
            bodies.append(post({"id": number, "method": "tools/list", "params": params}, **routing))
    return bodies


def _result(body: bytes) -> Any:
    import json

    text = body.decode()
    if text.startswith("event:") or "\ndata:" in text:  # an SSE stream: its one message
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    return json.loads(text)["result"]


@pytest.mark.parametrize(
    ("era", "flags"),
    [
        (LATEST_MODERN_VERSION, ()),
        (LATEST_HANDSHAKE_VERSION, ()),
        (LATEST_HANDSHAKE_VERSION, ("--stateless",)),
        (LATEST_HANDSHAKE_VERSION, ("--suite", "conformance")),  # a fixture suite: handshake answers on streams
    ],
    ids=["2026-07-28", "handshake", "handshake-stateless", "handshake-streams"],
)
def test_a_page_written_from_bytes_encoded_once_reads_as_the_sdk_wrote_it_and_never_shows_its_placeholder(
    tmp_path: Path, era: str, flags: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[bytes] = []
    placeholder = Splice.placeholder

    def counted(self: Splice, array: bytes) -> list[dict[str, Any]]:
        made.append(array)
        return placeholder(self, array)

    monkeypatch.setattr(Splice, "placeholder", counted)
    suites = () if "--suite" in flags else ("--suite", "builtin")
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--page-size", "3", *suites, *flags) as url:
        first, *again = _raw_pages(url, era, "--stateless" in flags)
    assert len(made) == 2  # the page answered again was written from its encoded bytes, both times
    assert not any(b"pau-mcp-splice" in body for body in [first, *again])
    written = [_result(body) for body in again]  # the first answer of the second page is the SDK's own
    assert written[0] == written[1] == written[2] and len(written[0]["tools"]) == 3
    assert _result(first)["nextCursor"] == "3"
    assert all(isinstance(tool["inputSchema"], dict) for tool in written[0]["tools"])
