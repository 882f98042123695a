"""The worker pool on a real Ray cluster: a worker that cannot start, one that finds itself broken, a bug."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from pau_mcp.distributed import Cluster, ClusterError, RayOptions, WorkerLost, WorkerPool, connect

if TYPE_CHECKING:  # its own directory's conftest, for the fixture's type only
    from conftest import LocalCluster

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow

# Ray workers cannot import this test module: its classes travel by value.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


class Unstartable:
    def __init__(self, setup: str) -> None:
        self.setup = setup

    async def start(self) -> dict[str, Any]:
        raise RuntimeError(f"no sandbox here ({self.setup})")

    async def play(self, n: int) -> int:
        return n

    async def stop(self) -> None:
        pass


class FirstOneBroken:
    """The first worker to start finds its server dead on every episode; the others double numbers."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.broken = False

    async def start(self) -> dict[str, Any]:
        try:
            os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL))
            self.broken = True
        except FileExistsError:
            pass
        return {"pid": os.getpid()}

    async def play(self, n: int) -> tuple[int, int]:
        await anyio.sleep(0.2)
        if self.broken:
            raise WorkerLost("its own server stopped answering")
        return n * 2, os.getpid()

    async def stop(self) -> None:
        pass


class Buggy(FirstOneBroken):
    async def play(self, n: int) -> tuple[int, int]:
        raise ValueError(f"episode {n} hit a bug")


@pytest.fixture(scope="module")
def cluster(ray_cluster: LocalCluster) -> Iterator[Cluster]:
    # One driver for the module: Ray's driver, connected and shut down three times in one process, once aborted the
    # whole test process on a busy machine (glibc: __pthread_tpp_change_priority), on the third connection.
    ray_cluster.ensure_workers(2)
    connected = connect(RayOptions(address=ray_cluster.address, start_timeout_s=120))
    yield connected
    connected.close()


async def _calls(pool: WorkerPool, numbers: list[int]) -> list[Any]:
    results: dict[int, object] = {}

    async def one(n: int) -> None:
        results[n] = await pool.call(n)

    async with pool, anyio.create_task_group() as group:
        for n in numbers:
            group.start_soon(one, n)
    return [results[n] for n in numbers]


def test_a_worker_that_cannot_start_ends_the_run_with_its_reason(cluster: Cluster) -> None:
    pool = WorkerPool(cluster, Unstartable, "node setup", concurrency=2, name="test worker")
    with pytest.raises(BaseException) as raised:
        anyio.run(_calls, pool, [1])
    error = raised.value.exceptions[0] if isinstance(raised.value, BaseExceptionGroup) else raised.value
    assert isinstance(error, ClusterError)
    assert "no test worker is left" in str(error) and "no sandbox here (node setup)" in str(error)


def test_a_worker_that_finds_itself_broken_is_replaced_and_its_episodes_run_on_another(
    cluster: Cluster, tmp_path: Path
) -> None:
    pool = WorkerPool(cluster, FirstOneBroken, str(tmp_path / "broken"), concurrency=6, name="test worker")
    results = anyio.run(_calls, pool, list(range(6)))
    assert [value for value, _ in results] == [0, 2, 4, 6, 8, 10]
    assert pool.rerun >= 1
    assert len({pid for _, pid in results}) >= 1


def test_a_bug_on_a_worker_ends_the_run_with_the_workers_error(cluster: Cluster, tmp_path: Path) -> None:
    pool = WorkerPool(cluster, Buggy, str(tmp_path / "marker"), concurrency=1, name="test worker")
    with pytest.raises(BaseException) as raised:
        anyio.run(_calls, pool, [7])
    error = raised.value.exceptions[0] if isinstance(raised.value, BaseExceptionGroup) else raised.value
    assert isinstance(error, ClusterError) and "episode 7 hit a bug" in str(error) and "ValueError" in str(error)
