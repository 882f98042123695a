"""RL rollout episodes on Ray workers: the same episode code as a local rollout, with each worker's own sandbox.

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
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio

from ..llm import LLMClient
from ..manifests import Method
from ..rl.rollout import PlayRollout, RolloutConfig, RolloutError, RolloutProgress, RolloutRecord, play_rollout
from ..sandboxing import make_sandbox
from .cluster import Cluster, ClusterError
from .shipping import Shipment, pack

__all__ = ["RolloutSetup", "RolloutWorker", "ray_rollouts", "rollout_shipment"]


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
        self._llm: LLMClient | None = None
        self._runtime: Any = None
        self._critic: Any = None

    async def start(self) -> dict[str, Any]:
        """Make the client, the runtime and the critic; returns where the worker runs."""
        from ..rl import Runtime, critic_for

        setup = self._setup
        self._directory = Path(tempfile.mkdtemp(prefix="pau-mcp-worker-"))
        settings = setup.shipment.settings(self._directory)
        self._llm = LLMClient.from_settings(
            settings,
            use_cache=setup.shipment.use_cache,
            env=setup.shipment.env,
            sample_scope=setup.config.run,
            share_samples=setup.config.share_samples,
        )
        self._runtime = Runtime(lambda: make_sandbox(settings, processes=bool(settings.workers)))
        critic = setup.config.critic
        # The critic runs on the runtime's event loop: a client of its own, closed there (an SDK client belongs to
        # the loop that made it).
        critic_llm = LLMClient.from_settings(
            settings, use_cache=setup.shipment.use_cache, env=setup.shipment.env, sample_scope=setup.config.run,
            share_samples=setup.config.share_samples,
        )  # fmt: skip
        self._critic = critic_for(
            critic_llm, critic["model"], critic["mode"], coder_model=critic.get("coder_model"),
            sandbox=self._runtime.sandbox,
        )  # fmt: skip
        return {"host": socket.gethostname(), "pid": os.getpid()}

    async def play(self, method: Method, attempt: int) -> RolloutRecord:
        """Play one attempt of an episode; a fatal model error comes back as a ``RolloutError`` in the record."""
        if self._llm is None:
            raise RolloutError("the worker was not started")
        record = await play_rollout(method, attempt, self._setup.config, self._llm, self._critic, self._runtime)
        if record.fatal is not None:
            # The SDK's exception types need not survive pickling; their message is what the user needs.
            record = replace(record, fatal=RolloutError(str(record.fatal)))
        return record

    async def stop(self) -> None:
        """Close the client and the runtime, and delete the worker's directory."""
        if self._llm is not None:
            await self._llm.aclose()
        if self._runtime is not None:
            if self._critic is not None:  # on the runtime's loop, from a thread: this loop must not wait on it
                await anyio.to_thread.run_sync(self._runtime.run, self._critic.aclose())
            self._runtime.close()
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)


def rollout_shipment(settings: Any, config: RolloutConfig) -> Shipment:
    """What a rollout worker gets: the run's settings and the variables of the providers it calls (the policy's,
    the critic's, and its code writer's if it has one); no key, as it serves no tools."""
    return pack(settings, models=(config.model, config.critic.get("model"), config.critic.get("coder_model")))


@contextlib.asynccontextmanager
async def ray_rollouts(
    cluster: Cluster, settings: Any, config: RolloutConfig, progress: RolloutProgress
) -> AsyncIterator[PlayRollout]:
    """Episodes played by Ray workers, for ``run_rollout``; ``progress`` counts the workers and the re-runs.

    Raises:
        RolloutError: the workers cannot start or are all lost.
    """
    from .pool import WorkerPool

    if settings is None:
        raise RolloutError("a rollout on a Ray cluster needs the driver's settings to ship to its workers")
    pool = WorkerPool(
        cluster, RolloutWorker, RolloutSetup(config, rollout_shipment(settings, config)),
        concurrency=config.concurrency,
        name="rollout worker",
    )  # fmt: skip

    async def play(method: Method, attempt: int) -> RolloutRecord:
        try:
            record: RolloutRecord = await pool.call(method, attempt)
        except ClusterError as exc:
            raise RolloutError(str(exc)) from None
        finally:
            progress.workers, progress.rerun = pool.played, pool.rerun
        return record

    async with pool:
        yield play
