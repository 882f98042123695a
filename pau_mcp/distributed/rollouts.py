"""RL rollout episodes on Ray workers (``RayRollouts``, an episode source of the run driver): the same episode code
as a local rollout, with each worker's own sandbox.

A worker (``RolloutWorker``, one Ray actor) makes its own LLM client (the driver's provider variables), its
own sandbox runtime and critic, and plays episodes with ``play_rollout``; the driver records each ending
once (``RunStore.import_episode``). Methods travel with each episode: the asymmetric critic reads the
method's source and gold description on the worker, as it does in a local rollout.
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

from ..assembly import RolloutParts, rollout_parts
from ..config import Settings
from ..manifests import Method
from ..rl.rollout import PlayRollout, RolloutConfig, RolloutError, RolloutRecord, play_rollout
from .cluster import Cluster, ClusterError
from .pool import PooledSource, WorkerPool
from .shipping import Shipment, pack

__all__ = ["RayRollouts", "RolloutSetup", "RolloutWorker", "rollout_shipment"]


@dataclass(frozen=True)
class RolloutSetup:
    """What every rollout worker of a run gets: the run, and the driver's shipment."""

    config: RolloutConfig
    shipment: Shipment


class RolloutWorker:
    """One Ray worker of a rollout: the policy's client, a sandbox runtime and the critic.

    Args:
        setup: The run and the driver's shipment.
    """

    def __init__(self, setup: RolloutSetup) -> None:
        self._setup = setup
        self._directory: Path | None = None
        self._parts: RolloutParts | None = None

    async def start(self) -> dict[str, Any]:
        """Make the client, the runtime and the critic; returns where the worker runs."""
        setup = self._setup
        self._directory = Path(tempfile.mkdtemp(prefix="pau-mcp-worker-"))
        settings = setup.shipment.settings(self._directory)
        self._parts = rollout_parts(settings, setup.config, use_cache=setup.shipment.use_cache, env=setup.shipment.env)
        return {"host": socket.gethostname(), "pid": os.getpid()}

    async def play(self, method: Method, attempt: int) -> RolloutRecord:
        """Play one attempt of an episode; a fatal model error comes back as a ``RolloutError`` in the record."""
        parts = self._parts
        if parts is None:
            raise RolloutError("the worker was not started")
        record = await play_rollout(method, attempt, self._setup.config, parts.llm, parts.critic, parts.runtime)
        if record.fatal is not None:
            # The SDK's exception types need not survive pickling; their message is what the user needs.
            record = replace(record, fatal=RolloutError(str(record.fatal)))
        return record

    async def stop(self) -> None:
        """Close the client and the runtime, and delete the worker's directory."""
        if self._parts is not None:
            await self._parts.aclose()
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)


def rollout_shipment(settings: Settings, config: RolloutConfig, use_cache: bool = True) -> Shipment:
    """What a rollout worker gets: the run's settings and the variables of the providers it calls (the policy's,
    the critic's, and its code writer's if it has one); no key, as it serves no tools."""
    models = (config.model, config.critic.get("model"), config.critic.get("coder_model"))
    return pack(settings, models=models, use_cache=use_cache)


class RayRollouts(PooledSource):
    """Rollout episodes played by the workers of a Ray cluster: an episode source for ``run_rollout``.

    Args:
        cluster: The connected cluster.
        settings: The driver's settings (shipped to the workers: ``rollout_shipment``).
        config: The run.
        use_cache: Let workers use their node's LLM response cache.
    """

    def __init__(self, cluster: Cluster, settings: Settings, config: RolloutConfig, use_cache: bool = True) -> None:
        self._cluster = cluster
        self._settings = settings
        self._config = config
        self._use_cache = use_cache

    @contextlib.asynccontextmanager
    async def episodes(self, todo: Sequence[Method]) -> AsyncIterator[PlayRollout]:
        """Start the workers; yields the play function. They stop when the context ends.

        Raises:
            RolloutError: the workers cannot start, or are all lost (from the play function).
        """
        pool = WorkerPool(
            self._cluster, RolloutWorker,
            RolloutSetup(self._config, rollout_shipment(self._settings, self._config, self._use_cache)),
            concurrency=self._config.concurrency, name="rollout worker",
        )  # fmt: skip

        async def play(method: Method, attempt: int) -> RolloutRecord:
            try:
                record: RolloutRecord = await pool.call(method, attempt)
            except ClusterError as exc:
                raise RolloutError(str(exc)) from None
            return record

        self._pool = pool
        async with pool:
            yield play
