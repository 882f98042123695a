"""A Ray cluster of this machine for the distributed tests: a head and two worker nodes, each its own process.

Every node is `ray start --block` in a process group of its own, so a test can kill one worker node outright
(SIGKILL to its group: its raylet, its workers) the way a machine dies, and teardown stops exactly the
processes these tests started. Ray refuses a multi-node cluster on the loopback address and advertises this
machine's own address instead; nothing leaves the machine. Ray's temporary directories get short paths:
its Unix sockets live there and a socket path may not exceed 107 bytes. A watchdog process
(``cluster_watchdog.py``) kills the whole cluster when the test process ends, however it ends: a test run killed
at a time limit leaves no node running.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_watchdog import processes_mentioning

# Token authentication with a token of these tests' own, never a file in the home directory (which would change
# how every other Ray cluster of this user starts). Ray reads the mode once, when it is imported: this process
# (a driver in test_ray_pool.py) gets it before that.
AUTH = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
os.environ.update(AUTH)

pytest.importorskip("ray", reason="the distributed tests need Ray: pip install 'pau-mcp[ray]'")

RAY = str(Path(sys.executable).with_name("ray"))
WATCHDOG = Path(__file__).with_name("cluster_watchdog.py")
START_TIMEOUT_S = 180


class LocalCluster:
    """The head and worker nodes started by these tests, and what they share.

    Attributes:
        address: The head's address (``host:port``) for ``--ray``.
        base: The directory holding every node's Ray directory, data directory and temporary files.
        node_data: ``PAU_MCP_DATA_DIR`` of the worker nodes (their LLM cache; never the driver's key).
    """

    def __init__(self, base: Path) -> None:
        self.base = base
        self.address = ""
        self.node_data = base / "node-data"
        self.nodes: dict[str, subprocess.Popen[bytes]] = {}
        self._count = 0
        self.stopped = False
        self.auth = AUTH
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("PAU_", "RAY_"))},
            **self.auth,
            "PAU_MCP_DATA_DIR": str(self.node_data),
            "PAU_MCP_WORKERS": "1",  # two cores: one sandbox worker per server and scorer is plenty
            "TMPDIR": str(base / "tmp"),
            "RAY_USAGE_STATS_ENABLED": "0",
            # A killed node is declared dead after about 3 s rather than 15 (period x threshold).
            "RAY_health_check_period_ms": "1000",
            "RAY_health_check_failure_threshold": "3",
        }
        (base / "tmp").mkdir(parents=True, exist_ok=True)
        # Started before any node, in a session of its own (a kill of the tests' process group spares it): it reads
        # a pipe only this process writes to, so it wakes when this process ends and kills what is left.
        self._watchdog = subprocess.Popen(
            [sys.executable, str(WATCHDOG), str(base)], stdin=subprocess.PIPE, start_new_session=True
        )

    def driver_env(self) -> dict[str, str]:
        """The environment of a command run against this cluster: no PAU_ or RAY_ settings but its token."""
        return {**{k: v for k, v in os.environ.items() if not k.startswith(("PAU_", "RAY_"))}, **self.auth}

    def _start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = (self.base / f"{name}.log").open("w")
        process = subprocess.Popen(
            [RAY, "start", "--block", "--disable-usage-stats", f"--temp-dir={self.base / name}",
             "--dashboard-agent-listen-port=0", "--min-worker-port=0", "--max-worker-port=0", *args],
            stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True,
        )  # fmt: skip
        self.nodes[name] = process
        return process

    def _wait_log(self, name: str, pattern: str) -> re.Match[str]:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            text = (self.base / f"{name}.log").read_text(errors="replace")
            found = re.search(pattern, text)
            if found:
                return found
            if self.nodes[name].poll() is not None:
                break
            time.sleep(0.2)
        raise RuntimeError(f"Ray node {name} did not start:\n{text[-3000:]}")

    def start_head(self) -> None:
        self._start("head", "--head", "--port=0", "--num-cpus=0", "--include-dashboard=false")
        self.address = self._wait_log("head", r"--address='([^']+)'").group(1)

    def add_workers(self, count: int) -> list[str]:
        """Start ``count`` worker nodes at once (each mostly waits on the head while it joins) and wait for them."""
        names = []
        for _ in range(count):
            self._count += 1
            names.append(f"w{self._count}")
            # One log monitor per host, the head's, as Ray advises: more would each ship the same files to the driver.
            self._start(names[-1], f"--address={self.address}", "--num-cpus=1", "--include-log-monitor=false")
        for name in names:
            self._wait_log(name, r"Ray runtime started")
        return names

    def workers(self) -> list[str]:
        """Worker nodes still running."""
        return [n for n, p in self.nodes.items() if n != "head" and p.poll() is None]

    def ensure_workers(self, count: int) -> None:
        missing = count - len(self.workers())
        if missing > 0:
            self.add_workers(missing)

    def kill(self, name: str) -> None:
        """Kill a node as a machine dies: every process of its group, and its workers, at once.

        Ray starts a node's workers in process groups of their own; left alive, a worker finishes what it holds
        and returns it before Ray has noticed its node is gone, which no dead machine does.
        """
        node_dir = f"{self.base / name}/"
        # The node's episode workers are its raylet's children, each in a process group of its own, and name
        # neither the node nor its directory: found by parentage, before their parents die and they are re-parented.
        doomed = {*_descendants(self.nodes[name].pid), *processes_mentioning(node_dir)}
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.nodes[name].pid, signal.SIGKILL)
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.nodes[name].wait(timeout=30)

    def stop(self) -> None:
        """Kill every node and what it started; a second call does nothing."""
        if self.stopped:
            return
        self.stopped = True
        for name in reversed(list(self.nodes)):
            self.kill(name)
        # Episode workers and their servers run in process groups of their own (Ray gives each worker one);
        # any still alive belong to these nodes: they name this cluster's directories in their command line.
        for pid in processes_mentioning(f"{self.base}/"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert self._watchdog.stdin is not None  # a pipe, as it was started with
        self._watchdog.stdin.close()
        self._watchdog.wait(timeout=60)


def _descendants(root: int) -> list[int]:
    """Every living process below ``root`` in the process tree."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # The parent's pid follows the command name, which is in parentheses and may hold spaces.
            parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


#: The cluster of this test process while it runs: stopped as soon as the tests here have run (below), not at the end
#: of the session. Idle, its three nodes spend about 2.4 s of CPU a minute, and these tests run first.
_RUNNING: list[LocalCluster] = []
_HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[LocalCluster]:
    """A head (no CPUs: it hosts no episode worker) and two worker nodes of one CPU each."""
    base = Path(tempfile.mkdtemp(prefix="pr", dir="/tmp"))
    cluster = LocalCluster(base)
    try:
        cluster.start_head()
        cluster.ensure_workers(2)
        _RUNNING.append(cluster)
        yield cluster
    finally:
        cluster.stop()  # stopped already, unless the session ended before the last test here
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(autouse=True)
def _cluster_still_running(request: pytest.FixtureRequest) -> None:
    if "ray_cluster" in request.fixturenames and request.getfixturevalue("ray_cluster").stopped:
        pytest.fail(
            "the Ray cluster was stopped when the tests here stopped running one after another; they run as one "
            "unit (_work_unit in tests/conftest.py): run this directory's tests together"
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """The cluster stops after the last of these tests: the scheduler hands them to one worker, one after another."""
    try:
        return (yield)
    finally:
        if nextitem is None or _HERE not in nextitem.path.parents:
            while _RUNNING:
                _RUNNING.pop().stop()
