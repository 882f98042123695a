"""The one interface every sandbox offers: run inputs, call once, sync or async, and close.

``Sandbox`` (in this process), ``WorkerSandbox`` (worker processes) and each
engine behind them implement ``run``, ``info`` and ``close``; the rest comes
from here, so every caller (server, scorer, manifests) can take any of them,
and the shared contract tests hold them all to the same behaviour.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from functools import partial
from types import TracebackType
from typing import Any, Self

import anyio

from .limits import Limits
from .literals import parse_arguments
from .outcome import Outcome

__all__ = ["SandboxClosed", "SandboxInterface"]


class SandboxClosed(RuntimeError):
    """The sandbox was closed; make a new one to run more calls."""


class SandboxInterface(ABC):
    """Runs hidden functions on argument literals; usable as a context manager that closes it.

    Attributes:
        limits: Default limits for calls that do not give their own.
    """

    limits: Limits
    _limiter: anyio.CapacityLimiter | None = None
    _closed: bool = False

    @abstractmethod
    def run(
        self,
        source: str,
        inputs: Iterable[str | tuple[Any, ...]],
        entry: str = "test_func",
        limits: Limits | None = None,
        fresh: bool = False,
        engine: str | None = None,
    ) -> list[Outcome]:
        """Run ``entry`` from ``source`` on each input; one outcome per input, in order.

        Args:
            source: Python source defining ``entry``.
            inputs: Argument literals (``"(1, 'a')"``) or argument tuples.
            entry: The function to call.
            limits: Limits for each input; the sandbox default when None.
            fresh: Run every input in its own instance (slower; for checking batches).
            engine: ``"python"`` or ``"numpy"`` to pin the engine; None picks it from what the source
                imports (``engines.engine_for``).

        Raises:
            EngineUnavailable: The function needs the numpy engine, which is not installed.
        """

    @abstractmethod
    def info(self) -> dict[str, Any]:
        """What the guest interpreter offers: Python version, bundled and absent modules, hash probe."""

    @abstractmethod
    def close(self) -> None:
        """Release the sandbox's threads, processes and instances. Calling it again does nothing."""

    def call(
        self,
        source: str,
        arguments: str | tuple[Any, ...],
        entry: str = "test_func",
        limits: Limits | None = None,
        engine: str | None = None,
    ) -> Outcome:
        """Run ``entry`` on one input in a fresh instance."""
        return self.run(source, [arguments], entry=entry, limits=limits, engine=engine)[0]

    async def arun(
        self,
        source: str,
        inputs: Sequence[str | tuple[Any, ...]],
        entry: str = "test_func",
        limits: Limits | None = None,
        fresh: bool = False,
        engine: str | None = None,
    ) -> list[Outcome]:
        """``run`` in a worker thread, at most ``max_concurrency`` at once."""
        call = partial(self.run, source, list(inputs), entry=entry, limits=limits, fresh=fresh, engine=engine)
        return await anyio.to_thread.run_sync(call, limiter=self._limiter)

    async def acall(
        self,
        source: str,
        arguments: str | tuple[Any, ...],
        entry: str = "test_func",
        limits: Limits | None = None,
        engine: str | None = None,
    ) -> Outcome:
        """``call`` from async code."""
        return (await self.arun(source, [arguments], entry=entry, limits=limits, engine=engine))[0]

    async def aparse_arguments(self, text: str, limiter: anyio.CapacityLimiter | None = None) -> tuple[Any, ...]:
        """``parse_arguments(text)`` from async code, without holding up the event loop.

        Parsing 64 KiB of literal holds the interpreter lock for tens of milliseconds. Here it runs in a worker
        thread (``limiter`` bounds how many at once); ``WorkerSandbox`` parses in a process of its own, so the
        calling process's event loop never waits for the lock.

        Raises:
            InvalidInput: As ``parse_arguments``: the text is not an argument literal the sandbox accepts.
        """
        return await anyio.to_thread.run_sync(parse_arguments, text, limiter=limiter)

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxClosed("this sandbox was closed; create a new one to run more calls")

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()
