"""An agent's own check: does code written from its description do what the hidden function did?

The hidden side is only what an agent sees (a tool result's structured fields, or an initial example's shown
outcome); the code's side is a sandbox outcome on the agent's machine. Two outcomes agree by the project's one
equality rule (``wasm_runtime.values_equal``): values read back from their ``repr`` when they are literals, the
same exception type, or the same limit. Nothing here reads a hidden method's source or tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from wasm_runtime import InvalidInput, Outcome, Status, decode, parse_arguments, values_equal

from ..contract import ToolResult, ToolStatus

__all__ = ["Seen", "agrees", "code_shown", "seen_from_example", "seen_from_result"]

_MAX_SHOWN_CHARS = 300


@dataclass(frozen=True)
class Seen:
    """What the hidden function did with one input, as the agent saw it.

    Attributes:
        literal: The argument tuple literal that was run.
        status: ``ok``, ``error`` or a limit's status.
        shown: The outcome as the agent read it (``5``, ``raises ValueError: ...``).
        value: The value's ``repr`` (``ok`` only).
        error_type: The exception's name (``error`` only).
    """

    literal: str
    status: str
    shown: str
    value: str | None = None
    error_type: str | None = None


def seen_from_result(literal: str, result: ToolResult) -> Seen:
    """A tool result as a ``Seen``."""
    status = result.status
    if status == ToolStatus.OK:
        value = str(result.value)
        return Seen(literal, status, value, value=value)
    error_type = result.error_type or ""
    message = result.error_message or ""
    shown = f"raises {error_type}: {message}" if status == ToolStatus.ERROR else f"{status}: {message}"
    return Seen(literal, status, shown, error_type=error_type)


def seen_from_example(literal: str, shown: str) -> Seen:
    """An initial example's shown outcome (``24``, ``raises ValueError: ...``, ``timeout: ...``) as a ``Seen``."""
    if shown.startswith("raises "):
        error_type = shown[len("raises ") :].partition(":")[0].strip()
        return Seen(literal, "error", shown, error_type=error_type)
    head, colon, _ = shown.partition(":")
    if colon and head in {s.value for s in Status} - {"ok", "error"}:
        return Seen(literal, head, shown)
    return Seen(literal, "ok", shown, value=shown)


def _literal_value(text: str) -> tuple[bool, Any]:
    """``(True, value)`` when ``text`` is a literal the sandbox reads (the argument rules: capped and linear)."""
    try:
        return True, parse_arguments(f"({text},)")[0]
    except (InvalidInput, ValueError, TypeError, MemoryError, RecursionError):
        return False, None


def agrees(hidden: Seen, outcome: Outcome) -> bool:
    """True when the code's ``outcome`` is what the hidden function did: equal values, the same exception type, or
    the same limit. A value that is not a literal (an object's repr) agrees only with the same repr and type name."""
    if hidden.status != outcome.status.value:
        return False
    if hidden.status == "error":
        return hidden.error_type == outcome.error_type
    if hidden.status != "ok":
        return True
    readable, value = _literal_value(hidden.value or "")
    if not readable:
        return hidden.value == outcome.value
    try:
        return values_equal(value, decode(outcome.encoded))
    except Exception:  # an encoding the code forged: no agreement
        return False


def code_shown(outcome: Outcome) -> str:
    """What the code did, as the agent reads it, clipped (the code chose its size)."""
    if outcome.status is Status.OK:
        text = outcome.value or ""
    elif outcome.status is Status.ERROR:
        text = f"raises {outcome.error_type}: {outcome.error_message or ''}"
    else:
        text = f"{outcome.status.value}: {outcome.error_message or ''}"
    return text if len(text) <= _MAX_SHOWN_CHARS else text[: _MAX_SHOWN_CHARS - 3] + "..."
