"""Arguments on their way into the guest: checked literals, marshalled and base64-encoded, and source text.

Shared by every engine: only literal values cross into the sandbox, as a
marshalled tuple the guest decodes in C, never as Python text it would parse.
"""

from __future__ import annotations

import base64
import functools
import json
import marshal
from collections.abc import Iterable
from typing import Any

from .limits import Limits
from .literals import MAX_INT_DIGITS, InvalidInput, int_too_long, parse_arguments
from .outcome import Outcome, Status
from .tracing import TRACE_KEY

__all__ = ["encode_arguments", "encode_inputs", "encoded_literal", "guest_settings", "source_problem"]

_LITERAL_TYPES = (type(None), bool, int, float, complex, str, bytes, tuple, list, dict, set, frozenset)


@functools.lru_cache(maxsize=16384)
def encoded_literal(text: str) -> str:
    """Parse and encode an argument literal; cached, since a suite's test inputs are scored again and again.

    Only the encoded string (immutable) is kept, never the parsed values. An invalid literal raises
    ``InvalidInput`` each time (lru_cache does not cache exceptions).
    """
    return encode_arguments(parse_arguments(text))


def encode_arguments(args: tuple[Any, ...]) -> str:
    """Arguments for the guest: a marshalled tuple in base64 (decoded in C there, no Python parsing).

    Only literal types may cross; marshal's format for them is the same in
    the host's and the guest's Python versions.
    """
    stack: list[Any] = [args]
    budget = 1_000_000  # also ends a self-referencing structure, which no literal can make
    while stack:
        budget -= 1
        if budget < 0:
            raise InvalidInput("the arguments are too large or refer to themselves")
        value = stack.pop()
        kind = type(value)
        if kind not in _LITERAL_TYPES:
            raise InvalidInput(f"a {kind.__name__} cannot be passed to the sandbox; only literal values can")
        if kind is int and int_too_long(value):
            raise InvalidInput(
                f"an integer argument has more than {MAX_INT_DIGITS} digits; the sandbox accepts at most {MAX_INT_DIGITS}."
            )
        if isinstance(value, (tuple, list, set, frozenset)):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
    return base64.b64encode(marshal.dumps(args, 4)).decode("ascii")


def source_problem(source: str, entry: str) -> str | None:
    """Why ``source`` (or ``entry``) cannot be handed to the guest, or None when it can.

    Text crosses into WebAssembly as UTF-8, which a lone surrogate (``"\\ud800"``, possible in
    a Python string that came from JSON) has no encoding for.
    """
    for what, text in (("source", source), ("entry name", entry)):
        if text.isascii():
            continue
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            return (
                f"the {what} contains a lone surrogate ({text[exc.start]!a} at character {exc.start}), which has no "
                "UTF-8 encoding and cannot be passed to the sandbox; replace it, e.g. with the escape "
                f"{text[exc.start]!a} written out in the text"
            )
    return None


def encode_inputs(inputs: Iterable[str | tuple[Any, ...]]) -> tuple[list[Outcome | None], list[tuple[int, str]]]:
    """Each input encoded for the guest, or refused before it gets there.

    Returns:
        One slot per input, in order: its ``invalid_input`` outcome, or None for one to run; and the
        ``(index, encoding)`` of each input to run.
    """
    outcomes: list[Outcome | None] = []
    pending: list[tuple[int, str]] = []
    for index, item in enumerate(inputs):
        try:
            encoded = encoded_literal(item) if isinstance(item, str) else encode_arguments(tuple(item))
        except InvalidInput as exc:
            outcomes.append(Outcome.failure(Status.INVALID_INPUT, "InvalidInput", str(exc)))
            continue
        except (ValueError, TypeError) as exc:
            outcomes.append(
                Outcome.failure(Status.INVALID_INPUT, "InvalidInput", f"cannot pass these arguments: {exc}")
            )
            continue
        outcomes.append(None)
        pending.append((index, encoded))
    return outcomes, pending


def guest_settings(entry: str, limits: Limits, trace: bool = False) -> str:
    """The settings the guest reads for every input of a call, as JSON."""
    settings: dict[str, Any] = {
        "entry": entry,
        "recursion_limit": limits.recursion_limit,
        "max_output_bytes": limits.max_output_bytes,
        "stdout_chars": limits.stdout_chars,
        "flood_chars": limits.flood_chars,
    }
    if trace:
        settings[TRACE_KEY] = True
    return json.dumps(settings)
