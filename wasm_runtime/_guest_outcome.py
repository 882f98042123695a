"""What the host keeps of an outcome the guest hands back, and what it reports for a trap.

Shared by every engine: the guest runs untrusted code that can replace the
guest's own helpers, so whatever text it returns is parsed and capped here,
field by field, and a trap (fuel, deadline, memory, stack, exit) becomes the
same outcome whichever engine ran the code.
"""

from __future__ import annotations

import json
import re
import time
from itertools import accumulate

import wasmtime
from wasmtime import WasmtimeError

from . import values
from .limits import Limits
from .outcome import Outcome, Status
from .tracing import TRACE_KEY, kept_trace

__all__ = [
    "MESSAGE_CHARS",
    "NAME_CHARS",
    "classify_trap",
    "encoded_chars",
    "parse_outcome",
    "printable",
    "trap_outcome",
]

#: Statuses the guest's own code reports; the others (timeout, crash, invalid_input) only the host decides.
_GUEST_STATUSES = {s.value: s for s in (Status.OK, Status.ERROR, Status.MEMORY, Status.OUTPUT_LIMIT)}
#: Longest exception or type name kept from an outcome; longer ones are cut (no real class name comes close).
NAME_CHARS = 200
#: Longest error message kept from an outcome.
MESSAGE_CHARS = 500
_TEXT_FIELDS = ("value", "value_type", "error_type", "error_message", "stdout")
#: Deepest nesting a real outcome has: its object around the deepest encoding ``values`` writes (a trace is shallower).
_OUTCOME_NESTING = values.MAX_ENCODED_NESTING + 1
# A string (to its closing quote, or to the end if it has none) or a bracket. Left to right, each character is read
# once: a pattern that could start again inside an unclosed string would take quadratic time on `"\"\"\"...`.
_JSON_TOKEN = re.compile(r'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)|[\[\]{}]', re.DOTALL)
_BRACKET_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def encoded_chars(limits: Limits) -> int:
    """Largest encoding (its JSON text) the host keeps: what the guest's encoder budget allows, as 12-byte escapes."""
    return 12 * limits.max_output_bytes + 1024


def _malformed(why: str, fuel: int, elapsed_ms: float) -> Outcome:
    return Outcome.failure(
        Status.CRASH, "SandboxViolation", f"malformed outcome from the guest ({why})", fuel=fuel, duration_ms=elapsed_ms
    )


def _over_limit(message: str, fuel: int, elapsed_ms: float) -> Outcome:
    return Outcome.failure(Status.OUTPUT_LIMIT, "OutputLimit", message, fuel=fuel, duration_ms=elapsed_ms)


def printable(text: str) -> str:
    """``text`` with lone surrogates written as escapes, so every consumer can encode it as UTF-8."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _nests_deeper_than(text: str, limit: int) -> bool:
    """Whether JSON text nests deeper than ``limit`` levels, found by scanning it rather than parsing it.

    Parsing would recurse in the host as deep as the guest chose, up to the interpreter's recursion limit; a
    finalizer or collector callback that runs meanwhile (any thread's garbage) would then fail for want of stack.
    """
    if text.count("[") + text.count("{") <= limit:
        return False
    steps = (_BRACKET_STEP.get(token, 0) for token in _JSON_TOKEN.findall(text))
    return max(accumulate(steps), default=0) > limit


def parse_outcome(text: str | None, fuel: int, elapsed_ms: float, size: int, limits: Limits) -> Outcome:
    """Turn the guest's outcome text into an Outcome, capping every field before it is kept.

    The guest runs untrusted code that can replace the guest's own helpers, so
    nothing it returns is trusted: a text that is not an outcome is a crash,
    and each field is cut or refused at its limit here. The typed value is
    checked for size and nesting only; decoding it is left to whoever compares
    it, where an undecodable value fails to match (``compare_outcomes``).
    """
    if text is None:
        return _over_limit(
            f"the outcome was {size} bytes long, more than the sandbox accepts ({limits.outcome_bytes})",
            fuel,
            elapsed_ms,
        )
    if _nests_deeper_than(text, _OUTCOME_NESTING):
        return _malformed("nested too deep", fuel, elapsed_ms)
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return _malformed("not JSON, or nested too deep", fuel, elapsed_ms)
    if type(data) is not dict:
        return _malformed("not an object", fuel, elapsed_ms)
    given = data.get("status")
    status = _GUEST_STATUSES.get(given) if isinstance(given, str) else None
    if status is None:
        return _malformed("unknown status", fuel, elapsed_ms)
    fields = {key: data.get(key) for key in _TEXT_FIELDS}
    if not all(value is None or type(value) is str for value in fields.values()):
        return _malformed("a field is not text", fuel, elapsed_ms)
    if status is not Status.OK and fields["error_type"] is None:
        return _malformed("a failure without its error type", fuel, elapsed_ms)
    encoded = None
    if status is Status.OK:
        if fields["value"] is None or "encoded" not in data:
            return _malformed("a value without its encoding", fuel, elapsed_ms)
        if len(fields["value"]) > limits.max_output_bytes:
            return _over_limit("the value is larger than the output limit", fuel, elapsed_ms)
        encoded = data["encoded"]
        cap = encoded_chars(limits)
        if len(text) > cap and len(json.dumps(encoded, separators=(",", ":"))) > cap:
            return _over_limit("the value's encoding is larger than the output limit", fuel, elapsed_ms)
        if len(text) > 2 * values.MAX_ENCODED_NESTING and values.nested_deeper_than(
            encoded, values.MAX_ENCODED_NESTING
        ):
            return _malformed("the encoding is nested too deep", fuel, elapsed_ms)
    else:
        fields["value"] = fields["value_type"] = None
    for key, cut in (("value_type", NAME_CHARS), ("error_type", NAME_CHARS), ("error_message", MESSAGE_CHARS),
                     ("stdout", limits.stdout_chars), ("value", limits.max_output_bytes)):  # fmt: skip
        field_text = fields[key]
        if field_text is not None:
            fields[key] = printable(field_text[:cut])
    stdout = fields.pop("stdout") or ""
    extra = kept_trace(data[TRACE_KEY]) if TRACE_KEY in data else {}
    return Outcome(
        status=status, value=fields["value"], value_type=fields["value_type"], encoded=encoded,
        error_type=fields["error_type"], error_message=fields["error_message"], stdout=stdout,
        duration_ms=elapsed_ms, fuel=fuel, extra=extra,
    )  # fmt: skip


def classify_trap(error: WasmtimeError | wasmtime.Trap) -> tuple[Status, str, str]:
    """Turn a trap into (status, error_type, message) without leaking host or guest internals."""
    if isinstance(error, wasmtime.ExitTrap):
        return Status.CRASH, "SystemExit", _ended(error.code == 0)
    text = str(error)
    if "pau-sandbox:" in text:
        reason = text.split("pau-sandbox:", 1)[1].split("\n", 1)[0].strip()
        return Status.CRASH, "SandboxViolation", reason
    lowered = text.lower()
    if "exit with invalid exit status" in lowered:  # the numpy engine's WASI, for a status of 126 or more
        return Status.CRASH, "SystemExit", _ended(False)
    if "all fuel consumed" in lowered:
        return Status.TIMEOUT, "Timeout", "the function used up its CPU budget"
    if "interrupt" in lowered:
        return Status.TIMEOUT, "Timeout", "the function passed its wall-clock deadline"
    if "stack" in lowered and ("exhausted" in lowered or "overflow" in lowered):
        return Status.ERROR, "RecursionError", "maximum recursion depth exceeded (the sandbox's stack is exhausted)"
    if "memory" in lowered and ("grow" in lowered or "limit" in lowered or "allocat" in lowered):
        return Status.MEMORY, "MemoryError", "the function ran out of memory"
    for kind in ("unreachable", "out of bounds memory access", "integer divide by zero", "indirect call"):
        if kind in lowered:
            return Status.CRASH, "Trap", f"the interpreter stopped abnormally ({kind})"
    return Status.CRASH, "Trap", "the interpreter stopped abnormally"


def _ended(success: bool) -> str:
    # Only whether the status was 0 is said: the first engine's WASI (preview 2) carries nothing more, so both
    # engines give the same outcome for the same call.
    status = "a success status (0)" if success else "a failure status (not 0)"
    return f"the function ended the process (os._exit) with {status}"


def trap_outcome(error: WasmtimeError | wasmtime.Trap, limits: Limits, started: float) -> Outcome:
    status, error_type, message = classify_trap(error)
    fuel = limits.fuel_budget if status is Status.TIMEOUT else 0
    elapsed = round((time.perf_counter() - started) * 1000, 3)
    return Outcome.failure(status, error_type, message, duration_ms=elapsed, fuel=fuel)
