"""Evaluation episodes on Ray workers (``RayEpisodes``, an episode source of the run driver): the same episode code
as a local run, against each worker's own server.

A worker (``EvalWorker``, one Ray actor) unpacks the driver's shipment into a temporary directory, starts
``pau-mcp serve --transport http`` there over a run store of its own, and plays episodes with the same
``EpisodeHost`` a local run uses. After each episode it reads the session its server recorded (calls,
submission) and the scores back from its store and returns them with the ending; the driver imports them
into the run's store in one transaction, exactly once per attempt (``RunStore.import_episode``). The command
chooses this source (``--ray``) and hands it to ``pau_mcp.harness.run_eval``; the harness never imports Ray.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx2

from ..assembly import run_scorer
from ..config import Settings, SettingsError
from ..harness.configuration import EvalConfig, EvalError
from ..harness.hosting import EpisodeHost, EpisodeRecord, Play, agent_llm
from ..manifests import ManifestStore, Method, tool_name
from ..runstore import RunStore
from ..sandboxing import make_sandbox
from ..tls import shared_context
from .cluster import Cluster, ClusterError
from .pool import PooledSource, WorkerLost, WorkerPool
from .shipping import Shipment, pack, worker_key

__all__ = ["EvalSetup", "EvalWorker", "RayEpisodes", "eval_shipment"]


@dataclass(frozen=True)
class EvalSetup:
    """What every evaluation worker of a run gets: the run, and the driver's shipment."""

    config: EvalConfig
    shipment: Shipment


class EvalWorker:
    """One Ray worker of an evaluation: a server, a scorer and the run's agent, over a run store of its own.

    Args:
        setup: The run and the driver's shipment.
    """

    def __init__(self, setup: EvalSetup) -> None:
        self._setup = setup
        self._directory: Path | None = None
        self._host: EpisodeHost | None = None
        self._sandbox: Any = None
        self._methods: Any = None

    async def start(self) -> dict[str, Any]:
        """Start the worker's server and scorer; returns where it runs.

        Raises:
            EvalError: the server did not start (its error output says why).
        """
        setup = self._setup
        # A local run's --server does not apply: each worker serves its own episodes.
        config = replace(setup.config, server=None)
        self._directory = Path(tempfile.mkdtemp(prefix="pau-mcp-worker-"))
        settings = setup.shipment.settings(self._directory)
        env = setup.shipment.env
        self._methods = ManifestStore(settings.manifests)
        self._sandbox = make_sandbox(settings, processes=config.score)
        scorer = run_scorer(
            settings, self._sandbox, run=config.run, share_samples=config.share_samples,
            use_cache=setup.shipment.use_cache, env=env,
        )  # fmt: skip
        store = RunStore(settings.db_path)
        llm = agent_llm(settings, replace(config, cache=config.cache and setup.shipment.use_cache), env=env)
        self._host = EpisodeHost(settings, config, scorer, store, setup.shipment.key, llm=llm)
        # Starting the server waits on a child process; the actor has nothing else to do meanwhile.
        await self._host.start()
        return {"host": socket.gethostname(), "pid": os.getpid()}

    async def play(self, method_id: str, tool: str, attempt: int) -> EpisodeRecord:
        """Play one attempt of an episode; returns its ending with the session and scores recorded for it.

        Raises:
            WorkerLost: this worker's server died, so its ending says nothing about the episode.
        """
        host = self._host
        if host is None:
            raise EvalError("the worker was not started")
        method: Method = self._methods.method(method_id)
        record = await host.play(method, tool, attempt)
        if record.result.state == "failed" and not await self._serving():
            raise WorkerLost(f"the worker's own MCP server at {host.url} stopped answering")
        session = host.store.export_session(host.config.run, record.result.session_key or "")
        if session is None:  # the episode ended before its session began: nothing of it is in this store
            return replace(record, result=replace(record.result, submission_id=None))
        return replace(record, session=session)

    async def _serving(self) -> bool:
        """Whether the worker's server still answers HTTP at all."""
        host = self._host
        assert host is not None and host.url is not None
        try:
            async with httpx2.AsyncClient(timeout=5, verify=shared_context()) as client:
                await client.get(host.url)
        except httpx2.HTTPError:
            return False
        return True

    async def stop(self) -> None:
        """Stop the server and the sandbox workers, and delete the worker's directory."""
        if self._host is not None:
            if self._host.scorer is not None:
                await self._host.scorer.aclose()
            await self._host.close()
        if self._sandbox is not None and hasattr(self._sandbox, "close"):
            self._sandbox.close()
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)


def eval_shipment(settings: Settings, config: EvalConfig, deployment_key: str) -> Shipment:
    """What an evaluation worker gets: the run's settings and suite, the variables of the providers it calls (the
    agent's, and the judge's and code writer's when it scores with them), and a key of its own for its server's
    tool names, derived from the deployment key, which it never gets (that key signs the deployment's session
    tokens).

    Raises:
        ManifestError: the suite does not exist or is broken.
    """
    scores = set(config.kinds) if config.score else set()
    models = (
        config.model,
        settings.judge_model if "judge" in scores else None,
        settings.coder_model if "codematch" in scores else None,
    )
    return pack(
        settings, (config.suite,), key=worker_key(deployment_key, config.run), models=models, use_cache=config.cache
    )


class RayEpisodes(PooledSource):
    """Evaluation episodes played by the workers of a Ray cluster: an episode source for ``run_eval``.

    Args:
        cluster: The connected cluster.
        settings: The driver's settings (shipped to the workers: ``eval_shipment``).
        config: The run.

    Raises:
        EvalError: the run names a running server (``--server``): each worker starts its own.
    """

    def __init__(self, cluster: Cluster, settings: Settings, config: EvalConfig) -> None:
        if config.server:
            raise EvalError("--server and --ray do not mix: each Ray worker starts its own server; drop one of them")
        self._cluster = cluster
        self._settings = settings
        self._config = config

    @contextlib.asynccontextmanager
    async def episodes(self, todo: Sequence[Method]) -> AsyncIterator[Play]:
        """Start the workers; yields the play function. They stop when the context ends.

        Raises:
            EvalError: the workers cannot start, or are all lost (from the play function).
        """
        try:
            shipment = eval_shipment(self._settings, self._config, self._settings.deployment_key())
        except (ValueError, SettingsError) as exc:
            raise EvalError(str(exc)) from None
        pool = WorkerPool(
            self._cluster, EvalWorker, EvalSetup(self._config, shipment), concurrency=self._config.concurrency,
            name="evaluation worker",
        )  # fmt: skip

        async def play(method: Method, attempt: int) -> EpisodeRecord:
            try:
                record: EpisodeRecord = await pool.call(method.id, tool_name(shipment.key, method.id), attempt)
            except ClusterError as exc:
                raise EvalError(str(exc)) from None
            return record

        self._pool = pool
        async with pool:
            yield play
