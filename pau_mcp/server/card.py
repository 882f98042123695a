"""The Server Card (experimental): what an MCP server is, readable before connecting, at ``GET /server-card``.

The MCP Server Card working group's document describes a server for discovery (hosts, catalogs, gateways) without
the protocol's handshake; it stays a subset of the registry's ``server.json`` (schema 2025-12-11: name, title,
description, version, and ``remotes`` naming this endpoint) with what the protocol would say first: the revisions
the server speaks, its capabilities (those of the 2026-07-28 revision, as ``server/discover`` gives them) and how a
client authenticates. Nothing in it depends on a credential, and nothing names a tool: the tools a client sees depend
on its credential and are listed by ``tools/list``.
"""

from __future__ import annotations

from typing import Any

from mcp.server import Server
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_MODERN_VERSION, MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.responses import JSONResponse

__all__ = ["REGISTRY_NAME", "SERVER_JSON_SCHEMA", "server_card"]

#: The server's name in the MCP registry (``server.json``; the README's ``mcp-name:`` line).
REGISTRY_NAME = "io.github.pau-mcp/pau-mcp"
#: The registry schema the card is a subset of.
SERVER_JSON_SCHEMA = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"


def server_card(server: Server[Any], url: str, token_required: bool) -> dict[str, Any]:
    """The card of ``server`` served at ``url`` (its MCP endpoint).

    Args:
        server: The MCP server.
        url: The MCP endpoint clients connect to.
        token_required: Whether requests need a bearer token.
    """
    capabilities = server.get_capabilities(protocol_version=LATEST_MODERN_VERSION)
    return {
        "$schema": SERVER_JSON_SCHEMA,
        "name": REGISTRY_NAME,
        "title": server.title or server.name,
        "description": "Hidden Python functions as MCP tools in a WebAssembly sandbox: the PAU benchmark, with budgets",
        "version": server.version,
        "remotes": [{"type": "streamable-http", "url": url}],
        "protocolVersions": [*MODERN_PROTOCOL_VERSIONS, *reversed(HANDSHAKE_PROTOCOL_VERSIONS)],
        "capabilities": capabilities.model_dump(by_alias=True, mode="json", exclude_none=True),
        "authentication": {"required": token_required, "schemes": ["bearer"] if token_required else []},
        "instructions": server.instructions,
    }


def card_endpoint(server: Server[Any], token_required: bool) -> Any:
    """The ASGI endpoint of ``GET /server-card``: the card, with this request's own MCP URL."""

    async def endpoint(request: Request) -> JSONResponse:
        url = str(request.url.replace(path="/mcp", query="", fragment=""))
        return JSONResponse(server_card(server, url, token_required), headers={"cache-control": "max-age=300"})

    return endpoint
