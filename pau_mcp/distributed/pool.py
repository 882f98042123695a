"""A pool of episode workers on a Ray cluster that runs every episode to an ending, whatever workers die.

Each worker is a Ray actor holding one CPU, spread over the nodes, that starts its own servers and sandbox
workers once (``start``) and then plays episodes (``play``) many at a time. The driver sends each episode to
the live worker with the fewest in flight. When a worker is lost (its process or node died, or it found its
own server dead) the episodes it was running are sent to another worker, and a replacement worker is
started while the cluster has room for one. A re-run repeats the same attempt: the lost run wrote nothing
to the driver's store, and the store records an attempt's ending once, so nothing is counted twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from dataclasses import dataclass, field
from typing import Any

import anyio

from .cluster import Cluster, ClusterError

__all__ = ["PooledSource", "WorkerLost", "WorkerPool"]


class WorkerLost(RuntimeError):
    """Raised by a worker that cannot play any more episodes (its own server died): the pool replaces it."""


@dataclass(eq=False)
class _Worker:
    handle: Any
    inflight: int = 0
    info: dict[str, Any] = field(default_factory=dict)


def _lost_types(ray: Any) -> tuple[type[BaseException], ...]:
    errors = ray.exceptions
    return (
        errors.RayActorError, errors.WorkerCrashedError, errors.NodeDiedError, errors.ObjectLostError,
        errors.OutOfMemoryError,
    )  # fmt: skip


def _cause(exc: BaseException) -> BaseException:
    """The worker's own exception inside Ray's wrapper."""
    return getattr(exc, "cause", None) or exc


class WorkerPool:
    """Episode workers of one class on a Ray cluster.

    Args:
        cluster: The connected cluster (how many workers to start).
        factory: The worker class: ``start()`` returns a description of the worker, ``play(*args)`` one
            episode's record, ``stop()`` cleans up. Methods are coroutines; the class is importable on every node.
        setup: The one argument of the worker's constructor (put in Ray's object store once for all workers).
        concurrency: Episodes in flight over the whole pool (sizes each worker's capacity).
        name: What the workers are called in messages.
    """

    def __init__(self, cluster: Cluster, factory: type, setup: Any, *, concurrency: int, name: str = "worker") -> None:
        import ray

        self._ray = ray
        self._lost_types = _lost_types(ray)
        self.cluster = cluster
        self.name = name
        self.rerun = 0
        self._played: set[int] = set()
        self._remote = ray.remote(factory)
        self._setup = ray.put(setup)
        # Every worker can take the whole run's concurrency: after losses, the survivors carry it all.
        self._capacity = max(1, concurrency) + 2
        self._ready: list[_Worker] = []
        self._starting = 0
        self._launched = 0
        self._limit = max(3 * cluster.workers, cluster.workers + 4)
        self._problems: list[str] = []
        self._changed = anyio.Event()
        self._group: Any = None

    @property
    def live(self) -> int:
        """Workers ready to play."""
        return len(self._ready)

    @property
    def played(self) -> int:
        """Workers that have played at least one episode to its end."""
        return len(self._played)

    async def __aenter__(self) -> WorkerPool:
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        for _ in range(self.cluster.workers):
            self._launch()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._group.cancel_scope.cancel()
        await self._group.__aexit__(None, None, None)
        workers, self._ready = self._ready, []
        with anyio.move_on_after(30, shield=True):
            async with anyio.create_task_group() as group:
                for worker in workers:
                    group.start_soon(self._stop, worker)
        for worker in workers:
            self._kill(worker)

    async def _stop(self, worker: _Worker) -> None:
        with contextlib.suppress(Exception):  # a worker that cannot stop is killed just after
            await worker.handle.stop.remote()

    def _kill(self, worker: _Worker) -> None:
        with contextlib.suppress(Exception):  # already gone
            self._ray.kill(worker.handle, no_restart=True)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def _launch(self) -> None:
        if self._launched >= self._limit:
            return
        self._launched += 1
        self._starting += 1
        handle = self._remote.options(
            num_cpus=1, max_restarts=0, max_concurrency=self._capacity, scheduling_strategy="SPREAD"
        ).remote(self._setup)
        self._group.start_soon(self._start, _Worker(handle))

    async def _start(self, worker: _Worker) -> None:
        try:
            worker.info = await worker.handle.start.remote()
        except asyncio.CancelledError:
            self._kill(worker)
            raise
        except self._lost_types as exc:
            self._problems.append(f"a {self.name} died while starting: {_first_line(exc)}")
            self._kill(worker)
            self._launch()
        except Exception as exc:  # noqa: BLE001 - a worker that cannot start says why; no replacement would do better
            self._problems.append(f"a {self.name} could not start: {_first_line(_cause(exc))}")
            self._kill(worker)
        else:
            self._ready.append(worker)
        finally:
            self._starting -= 1
            self._notify()

    async def _pick(self) -> _Worker:
        deadline = anyio.current_time() + self.cluster.options.start_timeout_s
        while not self._ready:
            if not self._starting:
                raise ClusterError(self._none_left())
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                raise ClusterError(
                    f"no {self.name} became ready within {self.cluster.options.start_timeout_s:.0f} s: the cluster "
                    "may have no free CPU for one (each takes one; see `ray status`)"
                    + (f"; {self._problems[-1]}" if self._problems else "")
                )
            with anyio.move_on_after(remaining):
                await self._changed.wait()
        return min(self._ready, key=lambda w: w.inflight)

    def _none_left(self) -> str:
        seen = "; ".join(dict.fromkeys(self._problems[-3:])) or "no reason was given"
        return (
            f"no {self.name} is left on the Ray cluster ({seen}); finished episodes are recorded: run the same "
            "command again to resume once the cluster is healthy (see `ray status` and the Ray logs)"
        )

    def _lose(self, worker: _Worker, why: str) -> None:
        if worker in self._ready:
            self._ready.remove(worker)
            self._problems.append(f"a {self.name} was lost: {why}")
            self._kill(worker)
            self._launch()
            self._notify()

    async def call(self, *args: Any) -> Any:
        """Play one episode on the least busy live worker; on another one if that worker is lost meanwhile.

        Raises:
            ClusterError: no worker is left and none can be started, or a worker failed in a way that is
                not a loss (a bug, reported with the worker's traceback).
        """
        tries = 0
        while True:
            worker = await self._pick()
            worker.inflight += 1
            try:
                result = await worker.handle.play.remote(*args)
                self._played.add(id(worker))
                return result
            except self._lost_types as exc:
                self._lose(worker, _first_line(exc))
            except Exception as exc:
                cause = _cause(exc)
                if not isinstance(cause, WorkerLost):
                    raise ClusterError(f"an episode failed on a Ray {self.name}: {exc}") from None
                self._lose(worker, str(cause))
            finally:
                worker.inflight -= 1
            tries += 1
            self.rerun += 1
            if tries > math.ceil(self._limit / 2):
                raise ClusterError(f"an episode lost {tries} workers in a row; {self._none_left()}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


class PooledSource:
    """An episode source whose episodes a ``WorkerPool`` plays: what it reports of its workers once a run ends."""

    _pool: WorkerPool | None = None

    @property
    def workers(self) -> int:
        """Workers that played at least one episode."""
        return self._pool.played if self._pool is not None else 0

    @property
    def rerun(self) -> int:
        """Episodes played again after their worker was lost."""
        return self._pool.rerun if self._pool is not None else 0
