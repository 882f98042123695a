"""Per-call limits of the sandbox."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["FUEL_PER_SECOND", "Limits"]

#: Fuel units per second of CPU time, calibrated on the reference machine (2 cores, x86-64) with
#: ``benchmarks/sandbox.py``: a tight Python loop burns about 1e10 units a second. The CPU budget
#: is set well below the wall-clock deadline, so a busy machine still stops a loop by fuel, which is
#: deterministic, rather than by the clock, which is not.
FUEL_PER_SECOND = 2_500_000_000


@dataclass(frozen=True)
class Limits:
    """Limits that hold for every input of a call, each on its own.

    Attributes:
        timeout_s: Wall-clock deadline per input (epoch interruption).
        fuel: CPU budget per input in fuel units; by default ``timeout_s * FUEL_PER_SECOND``.
        memory_bytes: Linear memory of the instance, including the interpreter itself (about 60 MiB).
        max_output_bytes: Largest returned value, measured on its repr and its encoding.
        recursion_limit: Python's recursion limit inside the sandbox.
        stdout_chars: How much printed text is kept in the outcome.
        flood_chars: Printing more than this ends the call with ``output_limit``.
    """

    timeout_s: float = 2.0
    fuel: int | None = None
    memory_bytes: int = 256 * 1024 * 1024
    max_output_bytes: int = 64 * 1024
    recursion_limit: int = 1000
    stdout_chars: int = 4096
    flood_chars: int = 1024 * 1024

    def __post_init__(self) -> None:
        if not (0 < self.timeout_s <= 3600):
            raise ValueError(f"timeout must be between 0 and 3600 seconds, got {self.timeout_s}")
        if self.fuel is not None and self.fuel <= 0:
            raise ValueError(f"fuel must be positive, got {self.fuel}")
        if self.memory_bytes < 96 * 1024 * 1024:
            raise ValueError("memory must be at least 96 MiB: the interpreter alone takes about 60 MiB")
        if self.max_output_bytes < 64:
            raise ValueError("the output limit must be at least 64 bytes")
        if not (50 <= self.recursion_limit <= 100_000):
            raise ValueError("the recursion limit must be between 50 and 100000")

    @property
    def fuel_budget(self) -> int:
        """The CPU budget in fuel units."""
        return self.fuel if self.fuel is not None else int(self.timeout_s * FUEL_PER_SECOND)

    @property
    def outcome_bytes(self) -> int:
        """The largest outcome text the host accepts from the guest for one input, in bytes.

        Room for a value and its encoding at the output limit, the kept
        printed text and the error fields, even when every character is
        written as a 12-byte JSON escape; anything longer cannot come from
        the guest's own code and is dropped unread (``output_limit``).
        """
        return 24 * self.max_output_bytes + 12 * self.stdout_chars + 64 * 1024

    def epoch_ticks(self, tick_s: float) -> int:
        """The wall-clock deadline in epoch ticks of ``tick_s`` seconds (one extra for the tick in flight)."""
        return max(1, math.ceil(self.timeout_s / tick_s)) + 1
