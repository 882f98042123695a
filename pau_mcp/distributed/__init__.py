"""Spreading episodes over a Ray cluster: evaluation runs and RL rollouts (``--ray``), with one writer of the store.

Ray is optional (``pip install 'pau-mcp[ray]'``) and imported only when a command connects to a cluster.
``connect`` joins or starts a cluster; ``WorkerPool`` keeps episode workers on it and runs every episode
to an ending whatever workers die; ``evaluation`` and ``rollouts`` hold the workers of each kind of run.
"""

from __future__ import annotations

from .cluster import Cluster, ClusterError, RayOptions, connect
from .pool import WorkerLost, WorkerPool
from .shipping import Shipment, pack, worker_key

__all__ = [
    "Cluster", "ClusterError", "RayOptions", "Shipment", "WorkerLost", "WorkerPool", "connect", "pack", "worker_key",
]  # fmt: skip
