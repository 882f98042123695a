"""Fair shares of a resource that runs a few things at once (the sandbox workers): turns handed out across parties.

A sandbox has a worker per CPU and runs calls first come, first served. One credential that keeps its allowed calls
in flight, each running to the CPU limit, then holds every worker, and another agent's 10 ms call waited a median of
11-18 s behind it (issue 32). ``FairShare`` stands in front of the workers and hands out turns itself:

* **Round robin by what each party holds.** When a turn frees, it goes to the waiting party (a credential) that
  holds the fewest turns now, the one served longest ago among equals, whatever order the requests came in; a
  party's own requests keep their order. So no party holds more than its share while another waits: a party
  holding more gets no further turn until every waiting party holding fewer has had one.
* **Reserved turns for a party holding none.** A call cannot be paused once it runs, so a party arriving while a
  hog holds every worker would still wait for one of the hog's calls to end (seconds, at the CPU limit). Of the
  ``slots`` turns, ``reserved`` go only to a party that holds no turn at all: the newcomer starts at once, beside
  the hog's calls (the operating system shares the CPUs between them), and a hog alone never holds them. The
  resource must be able to run ``slots`` at once (the server gives its sandbox that many workers).

State is kept only for parties holding or waiting for a turn, so it is bounded by the requests in flight.
"""

from __future__ import annotations

import contextlib
import itertools
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Hashable
from dataclasses import dataclass, field

import anyio

__all__ = ["FairShare"]


@dataclass
class _Party:
    holding: int = 0
    waiting: deque[anyio.Event] = field(default_factory=deque)
    served: int = 0  # when it last got a turn (a count of turns handed out): the longest ago goes first among equals


class FairShare:
    """Turns of a resource that runs ``slots`` things at once, handed out fairly across parties.

    Args:
        slots: How many may run at once in all.
        reserved: How many of those only a party holding no turn may take (``slots - reserved`` is what parties
            already holding turns share).

    Raises:
        ValueError: fewer than one slot, or ``reserved`` not below ``slots``.
    """

    def __init__(self, slots: int, reserved: int = 0) -> None:
        if slots < 1 or not 0 <= reserved < slots:
            raise ValueError(f"a fair share needs at least one slot and fewer reserved ones, got {slots}/{reserved}")
        self.slots = slots
        self.reserved = reserved
        self._busy = 0
        self._parties: OrderedDict[Hashable, _Party] = OrderedDict()
        self._turns = itertools.count(1)

    @property
    def busy(self) -> int:
        """Turns held now."""
        return self._busy

    def holding(self, party: Hashable) -> int:
        """Turns ``party`` holds now."""
        entry = self._parties.get(party)
        return entry.holding if entry is not None else 0

    def waiting(self, party: Hashable | None = None) -> int:
        """Requests waiting for a turn: ``party``'s, or everyone's."""
        if party is not None:
            entry = self._parties.get(party)
            return len(entry.waiting) if entry is not None else 0
        return sum(len(entry.waiting) for entry in self._parties.values())

    def parties(self) -> int:
        """Parties holding or waiting for a turn (the state kept)."""
        return len(self._parties)

    @contextlib.asynccontextmanager
    async def turn(self, party: Hashable) -> AsyncIterator[None]:
        """Hold a turn for the body, waiting for one as the rules above say.

        Cancelled while waiting, the request leaves the queue and takes no turn.
        """
        entry = self._parties.get(party)
        if entry is None:
            entry = self._parties[party] = _Party()
        ready = anyio.Event()
        entry.waiting.append(ready)
        self._hand_out()
        try:
            await ready.wait()
        except BaseException:
            if ready.is_set():  # handed a turn as it was cancelled: give it back
                self._release(party)
            else:
                entry.waiting.remove(ready)
                self._forget(party)
            raise
        try:
            yield
        finally:
            self._release(party)

    def _release(self, party: Hashable) -> None:
        entry = self._parties[party]
        entry.holding -= 1
        self._busy -= 1
        self._forget(party)
        self._hand_out()

    def _forget(self, party: Hashable) -> None:
        entry = self._parties.get(party)
        if entry is not None and not entry.holding and not entry.waiting:
            del self._parties[party]

    def _hand_out(self) -> None:
        """Give free turns to waiting parties: fewest held first, then the one served longest ago."""
        while self._busy < self.slots:
            candidates = [
                (entry.holding, entry.served, party) for party, entry in self._parties.items() if entry.waiting
            ]
            if not candidates:
                return
            holding, _, party = min(candidates, key=lambda c: (c[0], c[1]))
            if holding and self._busy >= self.slots - self.reserved:
                return  # the free turns are reserved for a party holding none, and none waits
            entry = self._parties[party]
            entry.holding += 1
            entry.served = next(self._turns)
            self._busy += 1
            entry.waiting.popleft().set()
