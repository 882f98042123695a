"""Per-call limits of the sandbox."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["FUEL_PER_SECOND", "WALL_CLOCK_FACTOR", "Limits"]

#: Fuel units per second of native CPython work: a function that CPython (3.11, x86-64) runs in t seconds
#: of CPU burns about t * FUEL_PER_SECOND fuel in the sandbox. Measured with ``benchmarks/calibrate.py``
#: on the reference machine (2 cores): 1.4e10 (sorting and dicts), 2.1e10 (string building), 2.2e10
#: (a prime sieve), 2.5e10 (an arithmetic loop), 4.3e10 (big-int additions) units per native second.
#: The value is the middle of that range, so work that CPython finishes within the time limit finishes
#: here too; big-int-heavy work gets about half its native time.
FUEL_PER_SECOND = 20_000_000_000
#: The wall-clock deadline is this many times the time limit, and no input holds the sandbox longer
#: (plus a tick or two). Fuel runs out first on an idle machine: the sandbox burns 4.3e9 (building
#: sets of ints, the slowest found) to 1.6e10 fuel a CPU second, so a function that spends its whole
#: budget takes 1.2 to 4.6 times the limit. On a loaded machine the clock can stop a function that
#: would have finished within its fuel; the factor is kept small because it is also what a hostile
#: input can make a worker wait (10x let one call hold a worker 20 s at the default 2 s limit).
WALL_CLOCK_FACTOR = 5


@dataclass(frozen=True)
class Limits:
    """Limits that hold for every input of a call, each on its own.

    Attributes:
        timeout_s: Time limit per input, in seconds of native CPython work: the CPU budget is
            ``timeout_s * FUEL_PER_SECOND`` fuel, and the wall-clock deadline (epoch interruption, a
            backstop) is ``timeout_s * WALL_CLOCK_FACTOR`` seconds.
        fuel: CPU budget per input in fuel units, in place of the one ``timeout_s`` gives.
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

    @property
    def deadline_s(self) -> float:
        """The wall-clock deadline per input, in seconds: the backstop behind the fuel budget."""
        return self.timeout_s * WALL_CLOCK_FACTOR

    def epoch_ticks(self, tick_s: float) -> int:
        """The wall-clock deadline in epoch ticks of ``tick_s`` seconds (one extra for the tick in flight)."""
        return max(1, math.ceil(self.deadline_s / tick_s)) + 1
