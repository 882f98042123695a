"""When each phase of a call ran, carried back with its outcome (``Outcome.phases``).

A call has three phases: **instantiate** (a fresh instance of the guest, or one the warm pool prepared), **load** (the
hidden function's source compiled in it) and **call** (the function run on one input, its outcome taken). The
sandbox records each phase's start and end in nanoseconds since the epoch, so a host in another process (the worker
pools run calls in processes of their own) can place them on its own timeline: the server turns them into trace
spans (``pau_mcp.tracing``). Only the first input of a batch has instantiate and load phases (the others share them).
Recording costs six clock reads per batch and one per input; nothing here knows of tracing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .outcome import Outcome

__all__ = ["Phase", "stamped"]


@dataclass(frozen=True)
class Phase:
    """One phase of a call.

    Attributes:
        name: ``instantiate``, ``load`` or ``call``.
        start_ns: When it began, in nanoseconds since the epoch (``time.time_ns``).
        end_ns: When it ended.
    """

    name: str
    start_ns: int
    end_ns: int


def stamped(
    outcomes: Sequence[Outcome], instantiate: tuple[int, int], load: tuple[int, int], calls: Sequence[tuple[int, int]]
) -> list[Outcome]:
    """``outcomes`` with their phases: the batch's instantiate and load on the first, each one's call on it."""
    stamped_outcomes = []
    for index, outcome in enumerate(outcomes):
        phases = [Phase("instantiate", *instantiate), Phase("load", *load)] if index == 0 else []
        if index < len(calls):
            phases.append(Phase("call", *calls[index]))
        stamped_outcomes.append(dataclasses.replace(outcome, phases=tuple(phases)))
    return stamped_outcomes
