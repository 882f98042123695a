"""Connecting to a Ray cluster: where episodes run when a command is given ``--ray``.

Ray is an optional dependency (``pip install 'pau-mcp[ray]'``); nothing here imports it until a command
asks for a cluster. ``--ray`` alone connects to ``RAY_ADDRESS`` or the cluster started on this machine
(``ray start --head``); ``--ray local`` starts a private one for the command; anything else is a cluster's
address (``10.0.0.5:6379``, or ``ray://head:10001`` through Ray Client).

Ray is a tool for a trusted network (docs/scaling.md, "Trust"): whoever reaches a cluster can run code on it.
A cluster this module starts (``--ray local``) reports no usage statistics to Ray's developers; one started
with ``ray start`` reports them unless started with ``--disable-usage-stats``, as the docs' commands are.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

__all__ = ["Cluster", "ClusterError", "RayOptions", "connect", "worker_nodes"]

LOCAL = "local"
#: Ray's switch for its usage statistics ("0": off), read by the processes of a cluster when they start.
USAGE_STATS_VARIABLE = "RAY_USAGE_STATS_ENABLED"


class ClusterError(RuntimeError):
    """The Ray cluster cannot be used, or has no worker left; the message says what to do."""


@dataclass(frozen=True)
class RayOptions:
    """How a command uses Ray.

    Attributes:
        address: ``auto`` (``RAY_ADDRESS`` or the cluster started on this machine), ``local`` (start one for
            this command), or a cluster's address.
        workers: Episode workers to start (each a Ray actor holding one CPU, with its own server and
            sandbox workers); None for one per node that has a CPU.
        start_timeout_s: How long to wait for a first worker to be ready, or for a replacement when every
            worker was lost, before giving up.
    """

    address: str = "auto"
    workers: int | None = None
    start_timeout_s: float = 600.0


@dataclass
class Cluster:
    """A connected Ray cluster and how many episode workers a run starts on it.

    Attributes:
        options: What the command asked for.
        workers: Episode workers a run starts.
        nodes: Alive nodes with a CPU when connected.
        started_here: True when ``connect`` started Ray itself (``--ray local``) rather than joining a cluster.
    """

    options: RayOptions
    workers: int
    nodes: int
    started_here: bool = False

    def close(self) -> None:
        """Disconnect this process (and stop a cluster ``connect`` started)."""
        import ray

        ray.shutdown()


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ClusterError("--ray needs Ray on this machine and on every node: pip install 'pau-mcp[ray]'") from None
    return ray


def worker_nodes(ray: Any) -> list[dict[str, Any]]:
    """The alive nodes that can host an episode worker (one CPU each)."""
    return [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= 1]


def connect(options: RayOptions) -> Cluster:
    """Join (or, with ``local``, start) a Ray cluster.

    Raises:
        ClusterError: Ray is not installed, no cluster answers at the address, or no node has a CPU for a worker.
    """
    ray = _ray()
    started_here = options.address == LOCAL
    if not ray.is_initialized():
        try:
            if started_here:
                # The cluster's processes inherit this process's environment; a user who opted in keeps their choice.
                os.environ.setdefault(USAGE_STATS_VARIABLE, "0")
                ray.init(include_dashboard=False, logging_level=logging.WARNING)
            else:
                ray.init(address=options.address, logging_level=logging.WARNING)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = "RAY_ADDRESS or a cluster started on this machine" if options.address == "auto" else options.address
            raise ClusterError(
                f"cannot connect to a Ray cluster at {where}: {exc}; start one with `ray start --head` (then "
                "`ray start --address=HEAD:PORT` on each other node), pass its address to --ray, or use "
                "--ray local for a cluster of this machine alone"
            ) from None
    nodes = worker_nodes(ray)
    if not nodes:
        raise ClusterError(
            "the Ray cluster has no alive node with a CPU for an episode worker (each takes one); add a node "
            "with `ray start --address=HEAD:PORT --num-cpus=N`, or see `ray status`"
        )
    workers = options.workers if options.workers else len(nodes)
    return Cluster(options=options, workers=workers, nodes=len(nodes), started_here=started_here)
