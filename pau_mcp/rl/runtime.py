"""What environments of one process share: a sandbox and an event loop, made again in a forked child.

RL trainers step environments from thread pools and fork worker processes
from those same threaded processes (Ray, multiprocessing, data loaders). A
child of a fork has the parent's memory but none of its threads: a sandbox's
warm-instance thread and epoch ticker, an event loop's thread, and any lock a
parent thread held at that moment are gone or stuck. So nothing here is
handed across a fork: each process makes its own sandbox (loading the compiled
guest takes milliseconds) and its own loop on first use, and the parent's
objects are kept, untouched, rather than torn down in the child, where tearing
them down could wait on a lock no thread will release.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Generic, TypeVar

from wasm_runtime import Limits, SandboxInterface

__all__ = ["ProcessLocal", "Runtime"]

T = TypeVar("T")

_GUARD = threading.Lock()
_ORPHANS: list[Any] = []  # the parent's objects, seen in a child: kept alive, never used or torn down


def _new_guard() -> None:
    global _GUARD
    _GUARD = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_guard)


class ProcessLocal(Generic[T]):
    """A value made on first use in each process: a forked child makes its own instead of using the parent's.

    Args:
        make: Makes the value (called at most once per process).
    """

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._made: tuple[int, T] | None = None  # the process that made the value, and the value

    def get(self) -> T:
        """The value for this process."""
        pid = os.getpid()
        made = self._made
        if made is not None and made[0] == pid:
            return made[1]
        with _GUARD:
            made = self._made
            if made is None or made[0] != pid:
                if made is not None:
                    _ORPHANS.append(made[1])
                made = self._made = (pid, self._make())
        return made[1]

    def made(self) -> bool:
        """True when this process has made its value."""
        return self._made is not None and self._made[0] == os.getpid()


class _LoopThread:
    """An event loop in a daemon thread, for running coroutines from synchronous code in any thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._serve, name="pau-rl-loop", daemon=True)
        self.thread.start()
        self._ready.wait()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        self.loop.run_forever()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self.thread:
            coroutine.close()
            raise RuntimeError(
                "a synchronous environment step was called from inside the environment's own event loop; "
                "from async code, await env.astep(...) instead"
            )
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()


class Runtime:
    """The sandbox and event loop that environments of one process share.

    Args:
        sandbox: Makes the sandbox (called once per process). Default: ``wasm_runtime.Sandbox`` with
            ``limits`` and ``cache_dir``, in this process; pass ``lambda: WorkerSandbox(...)`` for
            worker processes.
        limits: Limits of each call.
        cache_dir: Where the built guest component is cached.

    Example:
        >>> runtime = Runtime()
        >>> runtime.sandbox().call("def f(a):\\n    return a + 1", "(1,)", entry="f").value
        '2'
    """

    def __init__(
        self,
        sandbox: Callable[[], SandboxInterface] | None = None,
        *,
        limits: Limits | None = None,
        cache_dir: Path | None = None,
    ) -> None:
        self.limits = limits

        def default() -> SandboxInterface:
            from wasm_runtime import Sandbox

            return Sandbox(limits=limits, cache_dir=cache_dir)

        self._sandbox: ProcessLocal[SandboxInterface] = ProcessLocal(sandbox or default)
        self._loop: ProcessLocal[_LoopThread] = ProcessLocal(_LoopThread)

    def sandbox(self) -> SandboxInterface:
        """This process's sandbox (made on first use)."""
        return self._sandbox.get()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on this process's environment loop and wait for its result, from any thread but that loop's."""
        return self._loop.get().run(coroutine)

    def close(self) -> None:
        """Stop this process's worker processes, if its sandbox has any (an in-process sandbox needs nothing)."""
        if self._sandbox.made():
            closing = getattr(self._sandbox.get(), "close", None)
            if closing is not None:
                closing()


_DEFAULT: Runtime | None = None


def default_runtime() -> Runtime:
    """The runtime environments use when given none: an in-process sandbox with default limits."""
    global _DEFAULT
    with _GUARD:
        if _DEFAULT is None:
            _DEFAULT = Runtime()
        return _DEFAULT
