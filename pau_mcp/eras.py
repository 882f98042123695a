"""The MCP protocol eras this project's clients speak (``--mcp-era`` / ``PAU_MCP_ERA``).

``modern``: the 2026-07-28 revision, pinned: no ``initialize`` handshake and no probe, every request stands alone
(the default). ``legacy``: the 2025-11-25 handshake. ``auto``: ask the server with ``server/discover`` and speak the
newest era both sides know (one round trip more per connection).
"""

from __future__ import annotations

from mcp_types.version import LATEST_MODERN_VERSION

__all__ = ["ERAS", "client_mode"]

#: The official client's ``mode`` for each era.
ERAS: dict[str, str] = {"modern": LATEST_MODERN_VERSION, "legacy": "legacy", "auto": "auto"}


def client_mode(era: str) -> str:
    """The ``mcp.client.client.Client`` mode of an era.

    Raises:
        ValueError: not ``modern``, ``legacy`` or ``auto``.
    """
    try:
        return ERAS[era]
    except KeyError:
        raise ValueError(f"unknown MCP era {era!r}; choose from {', '.join(ERAS)}") from None
