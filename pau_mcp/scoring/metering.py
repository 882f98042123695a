"""What one piece of scored code may take from the sandbox: a total of time over a method's whole test suite, and
turns at the workers shared fairly with everyone else's scoring.

Each test input is bounded on its own (the per-input limits), but a suite has tens of inputs: code that spins to the
limit on each took minutes of a worker, and code that hands back a 50 MB outcome on each (the host refuses it and
starts a new instance) took 42 s of scoring, while four such submissions made another agent's feedback wait 417 s
(issue 32). ``MeteredSandbox`` runs the code's inputs in chunks of ``CHUNK``, each chunk one turn at the shared
workers (``pau_mcp.fairness.FairShare``, keyed by whose submission it is), and stops once the code has had
``seconds`` in the sandbox: the inputs not run then are ``timeout`` outcomes that say why.

The total is kept two ways. CPU: each chunk's inputs get at most an equal part of the fuel left of ``seconds``
(deterministic, as fuel is, so the same code stops at the same input on any machine). Time in the sandbox (the
outcomes' wall clock): what fuel does not count, such as the host refusing huge outcomes; it only binds for code
far slower than any honest one, and it is measured in wall time, so where it binds depends on the machine's load.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Hashable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any

from wasm_runtime import Limits, Outcome, SandboxInterface, Status
from wasm_runtime.limits import FUEL_PER_SECOND

from ..fairness import FairShare

__all__ = ["CHUNK", "DEFAULT_SECONDS", "MeteredSandbox"]

#: Test inputs run in one turn (one sandbox batch). A fixed size, so where a batch's state ends does not depend on
#: the machine; small, so a turn at the workers is short and another submission's turn comes soon.
CHUNK = 4
#: The default total time in the sandbox of one piece of code over a method's tests (``--score-seconds``).
DEFAULT_SECONDS = 10.0
#: A chunk with less fuel than this per input is not run: nothing useful finishes on it.
_MIN_FUEL = FUEL_PER_SECOND // 1000


class MeteredSandbox(SandboxInterface):
    """One piece of code's runs on ``inner``: in turns at ``share`` for ``party``, within ``seconds`` in all.

    Args:
        inner: The sandbox the inputs run in.
        seconds: Time in the sandbox allowed over every run through this object (None: no total).
        share: The fair share of ``inner``'s workers (None: no turns).
        party: Whose turns these are (a credential; one submission's scoring by default).
    """

    def __init__(
        self, inner: SandboxInterface, seconds: float | None, share: FairShare | None = None,
        party: Hashable | None = None,
    ) -> None:  # fmt: skip
        self.inner = inner
        self.limits = inner.limits
        self.seconds = seconds
        self.share = share
        self.party: Hashable = party if party is not None else object()
        self.spent_s = 0.0
        self.fuel_used = 0

    def _turn(self) -> AbstractAsyncContextManager[Any]:
        return self.share.turn(self.party) if self.share is not None else nullcontext()

    def _chunk_limits(self, limits: Limits | None, size: int) -> Limits | None:
        """The chunk's per-input limits: the given ones, with at most an equal part of the fuel left each."""
        if self.seconds is None:
            return limits
        base = limits or self.limits
        share = (int(self.seconds * FUEL_PER_SECOND) - self.fuel_used) // size
        return base if share >= base.fuel_budget else dataclasses.replace(base, fuel=share)

    def _spent(self) -> bool:
        if self.seconds is None:
            return False
        fuel_left = int(self.seconds * FUEL_PER_SECOND) - self.fuel_used
        return self.spent_s >= self.seconds or fuel_left < _MIN_FUEL * CHUNK

    def _not_run(self, count: int) -> list[Outcome]:
        message = (
            f"not run: this code had used its {self.seconds:g} s in the sandbox over the method's tests "
            "(--score-seconds)"
        )
        return [Outcome(status=Status.TIMEOUT, error_type="Timeout", error_message=message)] * count

    def _count(self, outcomes: Iterable[Outcome]) -> None:
        for outcome in outcomes:
            self.spent_s += outcome.duration_ms / 1000
            self.fuel_used += outcome.fuel

    async def arun(
        self, source: str, inputs: Sequence[str | tuple[Any, ...]], entry: str = "test_func",
        limits: Limits | None = None, fresh: bool = False, engine: str | None = None,
    ) -> list[Outcome]:  # fmt: skip
        outcomes: list[Outcome] = []
        items = list(inputs)
        for start in range(0, len(items), CHUNK):
            chunk = items[start : start + CHUNK]
            if self._spent():
                outcomes += self._not_run(len(items) - start)
                break
            async with self._turn():
                got = await self.inner.arun(
                    source, chunk, entry=entry, limits=self._chunk_limits(limits, len(chunk)), fresh=fresh,
                    engine=engine,
                )  # fmt: skip
            self._count(got)
            outcomes += got
        return outcomes

    def run(
        self, source: str, inputs: Iterable[str | tuple[Any, ...]], entry: str = "test_func",
        limits: Limits | None = None, fresh: bool = False, engine: str | None = None,
    ) -> list[Outcome]:  # fmt: skip
        """``arun`` for a caller without an event loop (no turns: those belong to a loop)."""
        outcomes: list[Outcome] = []
        items = iter(inputs)
        while chunk := list(itertools.islice(items, CHUNK)):
            if self._spent():
                outcomes += self._not_run(len(chunk) + sum(1 for _ in items))
                break
            got = self.inner.run(
                source, chunk, entry=entry, limits=self._chunk_limits(limits, len(chunk)), fresh=fresh, engine=engine
            )
            self._count(got)
            outcomes += got
        return outcomes

    def info(self) -> dict[str, Any]:
        return self.inner.info()

    def close(self) -> None:
        """Nothing to release: the inner sandbox is its owner's to close."""

    async def aparse_arguments(self, text: str, limiter: Any = None) -> tuple[Any, ...]:
        return await self.inner.aparse_arguments(text, limiter)
