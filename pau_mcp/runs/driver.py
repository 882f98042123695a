"""One resumable-run driver for evaluation runs and RL rollouts, handed the source that plays its episodes.

A run's state lives in the run store: its episodes are planned once, each is marked running when it starts and
done (or failed) when it ends, so running the same command again after ``kill -9`` finishes the unfinished ones
and never repeats a finished one. ``drive`` is that skeleton, once: it opens (or resumes) the run, refusing one
recorded with another configuration, plans the episodes, hands the open ones to an ``EpisodeSource`` a few at a
time, and records each ending exactly once. Where episodes are played is the source's business: in this process
(``pau_mcp.harness.hosting``, ``pau_mcp.rl.rollout``) or on a Ray cluster (``pau_mcp.distributed``, which imports
this module; nothing here imports Ray or the sources). This process alone writes the run store.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import anyio
import anyio.abc

from ..runstore import EpisodeResult, RunStore, SessionRecord

__all__ = ["Ending", "EpisodeSource", "Planned", "Play", "Progress", "RunError", "RunSpec", "drive", "open_run"]

_log = logging.getLogger("pau_mcp.runs")
#: The most of an unforeseen error's message recorded with its episode.
_MAX_ERROR_CHARS = 500


class RunError(RuntimeError):
    """A run cannot start or continue; the message says what to do."""


@dataclass
class Ending:
    """How one attempt of an episode ended, wherever it was played: what the driver records and counts.

    Attributes:
        method_id: The episode's method.
        attempt: The attempt's number (``RunStore.start_episode``).
        result: The ending, as the run store records it.
        session: The session's rows when another store recorded them (a Ray worker's own server); None when they
            are in the run store already.
        fatal: An error that ends the whole run once this ending is recorded (a bad key, an unknown model).
    """

    method_id: str
    attempt: int
    result: EpisodeResult
    session: SessionRecord | None = None
    fatal: BaseException | None = None


class Planned(Protocol):
    """What an episode is planned for: a method (``pau_mcp.manifests.Method``) or a task, known by its id."""

    @property
    def id(self) -> str:
        """Its id: the episode's key in the run (``episodes.method_id``)."""
        ...


E = TypeVar("E", bound=Ending)
E_co = TypeVar("E_co", bound=Ending, covariant=True)
T = TypeVar("T", bound=Planned)
T_contra = TypeVar("T_contra", bound=Planned, contravariant=True)

#: Plays one attempt of an episode: ``await play(method, attempt)``.
Play = Callable[[T, int], Awaitable[E]]


class EpisodeSource(Protocol[T_contra, E_co]):
    """Where a run's episodes are played: in this process, or on the workers of a Ray cluster.

    ``episodes(todo)`` readies the source for the episodes left to play (starts a server, workers, ...) and yields
    the function that plays one attempt; leaving it stops what it started. A source that can no longer play any
    episode (no Ray worker left) raises ``RunError`` from the play function: the driver ends the run with it.
    """

    @property
    def workers(self) -> int:
        """Ray workers that played at least one episode (0: this process plays them)."""
        ...

    @property
    def rerun(self) -> int:
        """Episodes played again elsewhere after their worker was lost."""
        ...

    def episodes(self, todo: Sequence[T_contra]) -> AbstractAsyncContextManager[Play[T_contra, E_co]]:
        """Ready the source for ``todo``; yields the play function."""
        ...


@dataclass(frozen=True)
class RunSpec:
    """One run as the driver opens it.

    Attributes:
        name: The run's name in the store (the same name resumes it).
        kind: ``eval`` or ``rl``, recorded with a new run.
        identity: What must match for the run to be resumed rather than refused.
        keys: Every key an identity of this kind of run may hold (a stored key outside it is recorded, not
            compared; one inside it that this identity lacks is a difference).
        defaults: Identity values of runs recorded before a key existed (a run made before protocols were
            recorded followed ours).
        recorded: Recorded with a new run beside its identity, never compared (the prompts' digest, ...).
        retry_failed: Play the episodes that failed in an earlier invocation again.
    """

    name: str
    kind: str
    identity: Mapping[str, Any]
    keys: tuple[str, ...]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    recorded: Mapping[str, Any] = field(default_factory=dict)
    retry_failed: bool = False

    def stored_identity(self, stored: Mapping[str, Any]) -> dict[str, Any]:
        """The identity part of a stored run configuration."""
        return {**self.defaults, **{k: v for k, v in stored.items() if k in self.keys}}

    def conflict(self, stored: Mapping[str, Any]) -> str | None:
        """How a stored configuration differs from this run's identity (at most three keys), or None when the run
        may be resumed. A run recorded with no configuration (a server's, before any driver opened it) may be."""
        if not stored:
            return None
        have, want = self.stored_identity(stored), dict(self.identity)
        keys = sorted(k for k in set(have) | set(want) if have.get(k) != want.get(k))
        if not keys:
            return None
        return "; ".join(f"{k}: stored {have.get(k)!r}, asked {want.get(k)!r}" for k in keys[:3])


@dataclass
class Progress(Generic[E]):
    """Live totals of one invocation of a run, for the progress display and the summary.

    Attributes:
        total: Episodes planned.
        done: Episodes finished by this invocation.
        failed: Episodes that failed in this invocation.
        skipped: Episodes finished (or failed, and not retried) by earlier invocations.
        input_tokens: Tokens read by this invocation's models.
        output_tokens: Tokens they wrote.
        cost_usd: What they cost.
        errors: One line per failed episode, ``method: error``.
        workers: Ray workers that played episodes (0: this process played them).
        rerun: Episodes played again elsewhere after their worker was lost.
    """

    total: int = 0
    done: int = 0
    failed: int = 0
    skipped: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    errors: list[str] = field(default_factory=list)
    workers: int = 0
    rerun: int = 0

    def count_crash(self, method_id: str, error: str) -> None:
        """Add an episode that ended in an error its source did not foresee (recorded as failed by the driver)."""
        self.failed += 1
        self.errors.append(f"{method_id}: {error.partition(': ')[2] or error}")

    def count(self, ending: E) -> None:
        """Add a recorded ending to the totals (a kind of run adds what it measures on top)."""
        result = ending.result
        self.input_tokens += result.input_tokens
        self.output_tokens += result.output_tokens
        self.cost_usd += result.cost_usd
        if result.state == "done":
            self.done += 1
        else:
            self.failed += 1
            self.errors.append(f"{ending.method_id}: {(result.error or '').partition(': ')[2] or result.error}")


P = TypeVar("P", bound=Progress[Any])


def open_run(store: RunStore, run: RunSpec) -> int:
    """The id of ``run`` in the store: created with its identity if new, else checked against it.

    Raises:
        RunError: the run exists with another configuration.
    """
    run_id = store.find_run(run.name)
    if run_id is None:
        return store.ensure_run(run.name, kind=run.kind, config={**run.identity, **run.recorded})
    difference = run.conflict(store.run_config(run_id))
    if difference is not None:
        raise RunError(
            f"run {run.name!r} exists with another configuration ({difference}); resume it with the same options or "
            "choose another --run"
        )
    return run_id


async def drive(
    store: RunStore,
    run: RunSpec,
    methods: Sequence[T],
    source: EpisodeSource[T, E],
    concurrency: int,
    progress: P,
    on_progress: Callable[[P], None] | None = None,
) -> P:
    """Run (or resume) ``run`` over ``methods``: every open episode played by ``source``, its ending recorded once.

    Args:
        store: The run store (written by this process alone).
        run: The run's name, kind and identity.
        methods: One episode each (methods, or tasks), in plan order.
        source: Plays the episodes (here, or on Ray workers).
        concurrency: Episodes at once.
        progress: The totals to keep; returned.
        on_progress: Called with ``progress`` before the first episode and after every one.

    Raises:
        RunError: the run exists with another configuration, or the source can play no more episodes.
        BaseException: an ending's ``fatal`` error, once the episodes in flight are cancelled.
    """
    run_id = open_run(store, run)
    store.plan_episodes(run_id, [m.id for m in methods])
    if run.retry_failed:
        store.reopen_failed(run_id)
    open_ids = set(store.open_episodes(run_id))
    todo = [m for m in methods if m.id in open_ids]
    progress.total, progress.skipped = len(methods), len(methods) - len(todo)
    if on_progress:
        on_progress(progress)
    if not todo:
        return progress
    limiter = anyio.Semaphore(max(1, concurrency))
    stop: list[BaseException] = []  # what ends the whole run: raised once the episodes in flight are cancelled

    async def one(method: T, play: Play[T, E], group: anyio.abc.TaskGroup) -> None:
        async with limiter:
            attempt = store.start_episode(run_id, method.id)
            try:
                ending = await play(method, attempt)
            except RunError as exc:
                stop.append(exc)
                group.cancel_scope.cancel()
                return
            except Exception as exc:  # noqa: BLE001 - what no source foresaw fails its episode, never the whole run
                _crashed(store, run_id, method.id, attempt, exc, progress)
                if on_progress:
                    on_progress(progress)
                return
            finally:
                progress.workers, progress.rerun = source.workers, source.rerun
            if store.import_episode(run_id, method.id, attempt, ending.result, ending.session):
                progress.count(ending)
            if on_progress:
                on_progress(progress)
            if ending.fatal is not None:
                stop.append(ending.fatal)
                group.cancel_scope.cancel()

    async with source.episodes(todo) as play, anyio.create_task_group() as group:
        for method in todo:
            group.start_soon(one, method, play, group)
    if stop:
        raise stop[0]
    return progress


def _crashed(
    store: RunStore, run_id: int, method_id: str, attempt: int, exc: Exception, progress: Progress[Any]
) -> None:
    """Record an episode whose play raised what its source did not foresee as failed (never left ``running``), so
    that the run goes on, the same command plays it again, and the error is reported with the others."""
    _log.debug("episode %s failed with an unforeseen error", method_id, exc_info=exc)
    said = " ".join(str(exc).split())[:_MAX_ERROR_CHARS]
    error = f"internal error: {type(exc).__name__}: {said or 'no message'}"
    if store.import_episode(run_id, method_id, attempt, EpisodeResult(state="failed", error=error), None):
        progress.count_crash(method_id, error)
