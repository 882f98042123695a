"""The run store as the server's event loop uses it: an operation never waits for a lock on the loop.

Every request of every agent is answered on one event loop, so anything that waits there waits for everyone. A run
store operation can wait: for SQLite's write lock held by another process (a replica, a report, a stuck client) up
to the busy timeout, for PostgreSQL's advisory lock, or for the network. While ``StoreBudget.reserve`` ran on the
loop, a lock held for 15 s made another agent's ``ping`` take 14 s, and three replicas flooding one SQLite file with
over-budget calls raised it from 2 ms to 398 ms.

``LoopStore.run`` first tries the operation on the loop with the store in ``immediately()`` mode (SQLite only: no
waiting for its in-process lock, a busy timeout of 0), which is what almost every operation needs: an uncontended
SQLite write takes about 0.02 ms, where a hop to a thread costs about 0.1 ms. When the store is busy it raises
``StoreBusy`` before writing anything, and the operation runs again in a thread, where it may wait as long as the
store's busy timeout; if the lock is still held then, ``StoreBusy`` reaches the caller, which answers with a
retryable error. PostgreSQL operations always run in a thread. Threads are bounded by a limiter of the store's own,
so a held lock ties up a few threads, never the pool that other work (large arguments) uses.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

from ..runstore import RunStore, StoreBusy

__all__ = ["LoopStore"]

T = TypeVar("T")

#: Threads that may wait for a SQLite store at once: its operations take turns on one connection anyway.
_SQLITE_THREADS = 4
#: Threads for a PostgreSQL store: as many as the connections each process keeps to it (``POOL_SIZE``).
_POSTGRES_THREADS = 8


class LoopStore:
    """Runs run-store operations for code on an event loop without the loop ever waiting for a lock.

    Args:
        store: The run store.
    """

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self._threads: anyio.CapacityLimiter | None = None

    @property
    def threads(self) -> anyio.CapacityLimiter:
        """The limiter of the threads this store's waiting operations run in (made on the loop that first needs it)."""
        if self._threads is None:
            self._threads = anyio.CapacityLimiter(
                _POSTGRES_THREADS if self.store.dialect == "postgres" else _SQLITE_THREADS
            )
        return self._threads

    async def run(self, operation: Callable[..., T], *args: Any, in_thread: bool = False, **kwargs: Any) -> T:
        """``operation(*args, **kwargs)``: a store operation that writes at most one transaction, or only
        transactions that are the same when run again (``ensure_run``, ``claim_session``), since after ``StoreBusy``
        on the loop it runs again in a thread.

        Args:
            operation: The operation (a ``RunStore`` method, or a function of one).
            in_thread: Go to a thread at once (a large record, whose writing itself takes long).

        Raises:
            StoreBusy: the store stayed busy for its whole busy timeout; nothing was written: try again later.
            StoreError: the store cannot take it.
        """
        call = functools.partial(operation, *args, **kwargs)
        if not in_thread and self.store.dialect == "sqlite":
            try:
                with self.store.immediately():
                    return call()
            except StoreBusy:
                pass
        return await anyio.to_thread.run_sync(call, limiter=self.threads)
