"""What every transport does with a message before the SDK sees it: a size limit, and one-line refusals.

The SDK drops a line it cannot parse without a word, so a client waiting for that request's reply waits
forever. Here every refused request gets a JSON-RPC error that says why in one line, with the request's id
whenever it can be read (from the message, or from the first bytes of a message too large to read whole).
"""

from __future__ import annotations

import json
import re
import sys

import mcp_types as types

from ..limits import message_limit

__all__ = ["message_limit", "oversized", "refusal"]

#: Where the id of a message too large (or too broken) to parse is looked for.
_HEAD_BYTES = 4096
_ID = re.compile(r'"id"\s*:\s*(-?\d{1,18}(?![\d.eE])|"(?:[^"\\]|\\.){0,256}")')
_SHAPE = (
    'a JSON-RPC 2.0 request is one object with "jsonrpc": "2.0", an "id" (a string or an integer), a "method" (a '
    'string) and optional "params" (an object)'
)


def _size(size: int) -> str:
    if size >= 1 << 20:
        amount = f"{size / (1 << 20):.1f}".removesuffix(".0")
        return f"{size:,} bytes ({amount} MiB)"
    return f"{size:,} bytes"


def _id_in(head: str) -> str | int | None:
    match = _ID.search(head[:_HEAD_BYTES])
    if match is None:
        return None
    try:
        value = json.loads(match.group(1))
    except ValueError:
        return None
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


def _error(request_id: str | int | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))


def oversized(head: str, size: int, limit: int) -> types.JSONRPCError:
    """The reply to a message larger than ``limit`` bytes, of which only ``head`` was kept."""
    return _error(
        _id_in(head),
        types.INVALID_REQUEST,
        f"Invalid request: the message is {_size(size)}; this server takes at most {_size(limit)} per message (set "
        "by --max-argument-kb / PAU_MCP_MAX_ARGUMENT_KB); send smaller arguments.",
    )


def refusal(text: str, request: bool = False) -> types.JSONRPCError | None:
    """The reply to a message the SDK could not parse; None for a notification, which gets no reply.

    Args:
        text: The message.
        request: The SDK read it as a notification: refuse it only if it carries an ``id`` (of a wrong type).
    """
    try:
        data = json.loads(text)
    except RecursionError:
        return _error(_id_in(text), types.PARSE_ERROR, "Parse error: the message is nested too deeply.")
    except ValueError as exc:
        if "integer string conversion" in str(exc):
            digits = sys.get_int_max_str_digits() or 4300
            return _error(
                _id_in(text),
                types.PARSE_ERROR,
                f"Parse error: a number in the message has more than {digits:,} digits; send a smaller one (or, "
                "for a tool, the number as a Python literal in `args`).",
            )
        detail = f"{exc.msg} at character {exc.pos}" if isinstance(exc, json.JSONDecodeError) else str(exc)
        return _error(_id_in(text), types.PARSE_ERROR, f"Parse error: the message is not JSON ({detail}).")
    if isinstance(data, list):
        return _error(
            None, types.INVALID_REQUEST, "Invalid request: batches are not supported; send one message per line."
        )
    if not isinstance(data, dict):
        return _error(None, types.INVALID_REQUEST, f"Invalid request: {_SHAPE}.")
    if "id" not in data and "method" in data:
        return None
    if request and "id" not in data:
        return None
    request_id = data.get("id")
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        request_id = None
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return _error(
            request_id,
            types.PARSE_ERROR,
            "Parse error: a string in the message holds a lone surrogate escape (\\ud800 to \\udfff without its "
            "pair), which is not Unicode text; for a tool, give such a string as a Python literal in `args`.",
        )
    return _error(request_id, types.INVALID_REQUEST, f"Invalid request: {_SHAPE}.")
