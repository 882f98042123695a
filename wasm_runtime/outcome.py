"""What one call of a hidden function produced, and when two of those match."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

from . import values
from .phases import Phase

__all__ = ["Comparison", "Outcome", "Status", "compare_outcomes", "outcomes_match"]


class Status(StrEnum):
    """How a call ended. Only ``ok`` carries a value."""

    OK = "ok"
    ERROR = "error"  # the function raised; error_type names the exception
    TIMEOUT = "timeout"  # CPU budget (fuel) or wall-clock deadline passed
    MEMORY = "memory"  # the memory limit was reached
    OUTPUT_LIMIT = "output_limit"  # the value or the printed text passed its limit
    INVALID_INPUT = "invalid_input"  # the arguments were not a valid literal; nothing ran
    CRASH = "crash"  # the instance stopped abnormally (a trap, an exit, a forbidden capability)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Outcome:
    """The result of running a function on one input.

    Attributes:
        status: How the call ended.
        value: ``repr`` of the returned value (``ok`` only).
        value_type: Type name of the returned value (``ok`` only).
        encoded: Lossless typed encoding of the value (see ``values``).
        error_type: Exception or limit name for every status but ``ok``.
        error_message: Message without traceback, file names or line numbers, at most 500 characters.
        stdout: The first characters the function printed.
        duration_ms: Wall-clock time of the call inside the sandbox.
        fuel: CPU fuel the call consumed (deterministic for a given build).
        phases: When its phases ran (``phases``): for a host's traces, never recorded or compared.
    """

    status: Status
    value: str | None = None
    value_type: str | None = None
    encoded: Any = None
    error_type: str | None = None
    error_message: str | None = None
    stdout: str = ""
    duration_ms: float = 0.0
    fuel: int = 0
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    phases: tuple[Phase, ...] = field(default=(), compare=False, repr=False)

    @property
    def ok(self) -> bool:
        """True when the function returned a value."""
        return self.status is Status.OK

    def decoded(self) -> Any:
        """The returned value rebuilt as a Python value (``ok`` only).

        Raises:
            ValueError: The outcome is not ``ok``.
            values.EncodingError: ``encoded`` is not a valid encoding (an outcome forged by hostile code).
        """
        if self.status is not Status.OK:
            raise ValueError(f"a {self.status} outcome has no value")
        return values.decode(self.encoded)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with every field but ``extra`` and ``phases`` (the caller's to change)."""
        # Field by field: ``asdict`` copied ``extra`` and ``phases`` deeply only to drop them, 16 us of every call's
        # record against 2.
        data = {name: getattr(self, name) for name in _RECORDED}
        data["status"] = self.status.value
        data["encoded"] = copy.deepcopy(self.encoded)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Outcome:
        """Rebuild an outcome from ``to_dict`` output (unknown keys are ignored)."""
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data and k not in ("extra", "phases")}
        known["status"] = Status(known["status"])
        return cls(**known)

    @classmethod
    def failure(cls, status: Status, error_type: str, message: str, **fields: Any) -> Outcome:
        """An outcome for a call that produced no value."""
        return cls(status=status, error_type=error_type, error_message=message[:500], **fields)


#: The fields ``Outcome.to_dict`` gives.
_RECORDED = tuple(f.name for f in fields(Outcome) if f.name not in ("extra", "phases"))


def outcomes_match(expected: Outcome, actual: Outcome) -> bool:
    """Decide whether two outcomes count as the same behaviour.

    Both returned values that are equal under Python ``==`` (a NaN equals a
    NaN in the same place, a tuple never equals a list), or both raised the
    same exception type. Any other status matches only the same status: a
    timeout matches a timeout. Printed output, duration and fuel are ignored.
    A value whose encoding cannot be decoded (hostile code can forge one)
    matches nothing; ``compare_outcomes`` says why two outcomes differ.
    Never raises.
    """
    if expected.status is not actual.status:
        return False
    if expected.status is Status.OK:
        # The encoding is canonical for a type and value, so equal encodings are equal values (NaNs in the
        # same places included); only different encodings need decoding (1 == 1.0, dict order, -0.0 == 0.0).
        if expected.encoded == actual.encoded and expected.encoded is not None:
            return True
        try:
            return values.values_equal(values.decode(expected.encoded), values.decode(actual.encoded))
        except (values.EncodingError, RecursionError):
            return False
    if expected.status is Status.ERROR:
        return expected.error_type == actual.error_type
    return True


@dataclass(frozen=True)
class Comparison:
    """Whether two outcomes match, and if not, why.

    Attributes:
        matched: The result of ``outcomes_match``.
        reason: Empty when matched; otherwise one of ``"different status"``,
            ``"different value"``, ``"different exception type"``,
            ``"undecodable outcome"`` (the actual value's encoding is not valid: a forged outcome) or
            ``"undecodable expected outcome"`` (the expected one's is not: damaged gold data).
        detail: A sentence for people, e.g. ``"expected ok, got error"``.
    """

    matched: bool
    reason: str = ""
    detail: str = ""


def compare_outcomes(expected: Outcome, actual: Outcome) -> Comparison:
    """``outcomes_match`` with the reason two outcomes do not match. Never raises."""
    if expected.status is not actual.status:
        return Comparison(False, "different status", f"expected {expected.status}, got {actual.status}")
    if expected.status is Status.ERROR and expected.error_type != actual.error_type:
        return Comparison(False, "different exception type", f"expected {expected.error_type}, got {actual.error_type}")
    if expected.status is not Status.OK or (expected.encoded == actual.encoded and expected.encoded is not None):
        return Comparison(True)
    try:
        wanted = values.decode(expected.encoded)
    except values.EncodingError as exc:
        return Comparison(False, "undecodable expected outcome", str(exc))
    try:
        got = values.decode(actual.encoded)
    except values.EncodingError as exc:
        return Comparison(False, "undecodable outcome", str(exc))
    try:
        equal = values.values_equal(wanted, got)
    except RecursionError:
        return Comparison(False, "undecodable outcome", "the value is nested too deep to compare")
    if equal:
        return Comparison(True)
    return Comparison(False, "different value", "the returned values differ")
