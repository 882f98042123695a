"""How many tool calls one credential may have in flight at once, so that no credential takes the sandbox over.

The sandbox workers (one per CPU) run calls first come, first served. Without a limit, one session token that sends
a hundred calls at once, each running to the CPU limit, would queue them all ahead of every other agent's: minutes
of wait for everyone. ``CallSlots`` lets each credential run ``running`` calls at once; its further calls wait for
one of its own to finish (they do not stand in the workers' queue meanwhile), up to ``waiting`` of them; beyond
that a call is refused at once, without running or counting, so that a flood cannot hold connections either.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Hashable
from dataclasses import dataclass

import anyio

__all__ = ["CallSlots", "TooManyCalls"]


class TooManyCalls(RuntimeError):
    """A credential has as many calls in flight as it may; the message says what to do."""


@dataclass
class _Credential:
    running: anyio.Semaphore
    in_flight: int = 0


class CallSlots:
    """Calls in flight per credential: ``running`` at once, ``waiting`` more queued behind them, the rest refused.

    State is kept only for credentials with a call in flight, so it is bounded by the calls in flight. It lives in
    one server process: replicas each allow as much.

    Args:
        running: Calls of one credential running at once (0: no limit at all).
        waiting: Further calls of one credential waiting for one of those to finish.
    """

    def __init__(self, running: int, waiting: int) -> None:
        self.running = running
        self.waiting = waiting
        self._credentials: dict[Hashable, _Credential] = {}

    def in_flight(self, credential: Hashable) -> int:
        """Calls of ``credential`` running or waiting now."""
        entry = self._credentials.get(credential)
        return entry.in_flight if entry is not None else 0

    def held(self) -> int:
        """Credentials with a call in flight (for tests and diagnostics)."""
        return len(self._credentials)

    @contextlib.asynccontextmanager
    async def slot(self, credential: Hashable) -> AsyncIterator[None]:
        """Hold one of ``credential``'s running slots for the body, waiting for one if all are taken.

        Raises:
            TooManyCalls: ``running + waiting`` calls of the credential are already in flight.
        """
        if self.running <= 0:
            yield
            return
        entry = self._credentials.get(credential)
        if entry is None:
            entry = self._credentials[credential] = _Credential(anyio.Semaphore(self.running))
        if entry.in_flight >= self.running + self.waiting:
            raise TooManyCalls(
                f"too many calls at once from this credential: {self.running} run at a time and {self.waiting} more "
                "may wait (--max-concurrent-calls / PAU_MCP_MAX_CONCURRENT_CALLS on the server); this call did not "
                "run or count: wait for your earlier calls to answer, then send it again"
            )
        entry.in_flight += 1
        try:
            async with entry.running:
                yield
        finally:
            entry.in_flight -= 1
            if entry.in_flight == 0:
                del self._credentials[credential]
