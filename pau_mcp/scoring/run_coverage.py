"""Exploration coverage of whole runs (``pau-mcp coverage``): each finished episode's recorded calls run again with
tracing, the coverage stored with the episode and summarised per run. For the operator only (``scoring.coverage``)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio

from .. import eventloop
from ..contract import RecordStatus
from ..manifests import ManifestError, ManifestStore
from ..manifests.importers.common import Progress, no_progress
from ..runstore import RunStore, StoreError
from .coverage import measure_coverage

if TYPE_CHECKING:
    from wasm_runtime import Limits, Sandbox

__all__ = ["CoverageOfRuns", "RunCoverage", "measure_runs"]


@dataclass(frozen=True)
class RunCoverage:
    """One run's coverage as measured now.

    Attributes:
        run: The run's name.
        episodes: Episodes whose calls ran again now (0: nothing (more) to measure).
        measured: Of those, the episodes measured (not stopped before reporting).
        lines: The median share of the lines the hidden tests run that the agent's calls ran (None: none known).
        branches: The same for branches.
        lost: Traced calls that stopped at a limit before reporting.
    """

    run: str
    episodes: int
    measured: int
    lines: float | None
    branches: float | None
    lost: int


@dataclass
class CoverageOfRuns:
    """What measuring runs came to.

    Attributes:
        status: ``measured`` (maybe nothing: see each run) or ``error`` (a run is not in the store).
        message: Why nothing was measured, on error.
        runs: Each run asked for, in order.
        empty: Runs without episodes (coverage is measured per episode).
        unknown: ``run: method`` of the episodes whose method is not installed, skipped.
    """

    status: Literal["measured", "error"]
    message: str = ""
    runs: list[RunCoverage] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Job:
    run: str
    run_id: int
    method_id: str
    inputs: list[str]


def _jobs(store: RunStore, name: str, run_id: int, force: bool) -> list[_Job] | None:
    """A run's finished episodes still to measure (all of them with ``force``), each with its agent's inputs; None
    when the run has no episodes."""
    calls: dict[tuple[str, str], list[str]] = {}
    for call in store.calls(run_id):
        # The agent's own calls: a counterexample (feedback) was run by the scorer, not by the agent.
        if call.counted and call.status != RecordStatus.COUNTEREXAMPLE:
            calls.setdefault((call.session_key, call.method_id), []).append(call.arguments)
    episodes = store.episodes(run_id)
    if not episodes:
        return None
    return [
        _Job(name, run_id, episode.method_id, calls.get((episode.session_key or "", episode.method_id), []))
        for episode in episodes
        if episode.state in ("done", "failed") and not (episode.coverage and not force)
    ]


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _summary(run: str, found: list[dict[str, Any]]) -> RunCoverage:
    done = [c for c in found if c["status"] == "measured"]
    lines = [c["lines"]["agent_of_tests"] for c in done if c["lines"]["agent_of_tests"] is not None]
    branches = [c["branches"]["agent_of_tests"] for c in done if c["branches"]["agent_of_tests"] is not None]
    return RunCoverage(run, len(found), len(done), _median(lines), _median(branches), sum(c["lost"] for c in done))


def measure_runs(
    store: RunStore,
    names: list[str],
    *,
    manifests: ManifestStore,
    sandbox: Callable[[], Sandbox],
    limits: Limits,
    force: bool = False,
    progress: Progress = no_progress,
) -> CoverageOfRuns:
    """Measure and store the coverage of the runs' finished episodes not measured yet (all of them with ``force``).

    Args:
        store: The run store the calls come from and the coverage goes to.
        names: The runs, by name (each once).
        manifests: The suites the methods come from.
        sandbox: Makes the in-process sandbox (tracing is its option, not worker processes'), when there is work.
        limits: The limits of each call (``trace_limits`` widens them).
        force: Measure again the episodes that already have a coverage.
        progress: A progress bar factory.
    """
    names = list(dict.fromkeys(names))
    try:
        runs = [(name, store.run_id(name)) for name in names]
    except StoreError as exc:
        return CoverageOfRuns("error", str(exc))
    result = CoverageOfRuns("measured")
    jobs: list[_Job] = []
    for name, run_id in runs:
        found = _jobs(store, name, run_id, force)
        if found is None:
            result.empty.append(name)
        jobs += found or []
    measured: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    if jobs:
        eventloop.run(_measure, jobs, store, manifests, sandbox(), limits, progress, measured, result.unknown)
    result.runs = [_summary(name, found) for name, found in measured.items()]
    return result


async def _measure(
    jobs: list[_Job], store: RunStore, manifests: ManifestStore, sandbox: Sandbox, limits: Limits,
    progress: Progress, measured: dict[str, list[dict[str, Any]]], unknown: list[str],
) -> None:  # fmt: skip
    with progress("measuring coverage", len(jobs)) as advance:
        for job in jobs:
            try:
                method = manifests.method(job.method_id)
            except ManifestError:
                unknown.append(f"{job.run}: {job.method_id}")
                advance()
                continue
            found = await measure_coverage(sandbox, method, job.inputs, limits=limits)
            await anyio.to_thread.run_sync(store.record_coverage, job.run_id, job.method_id, found)
            measured[job.run].append(found)
            advance()
