"""``--ray local``: the Ray instance a command starts for itself."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from conftest import AUTH

ROOT = Path(__file__).resolve().parents[3]

# Ray 2.60's release wheels leave usage statistics off for a cluster ray.init() starts; its nightly wheels collect
# them unless told not to. The command must not depend on which wheel (or version) is installed.
_CONNECT = """
from ray._common.usage import usage_lib
usage_lib.is_nightly_wheel = lambda: True
from pau_mcp.distributed import RayOptions, connect
cluster = connect(RayOptions(address="local"))
cluster.close()
print("closed")
"""


def test_a_cluster_started_for_a_command_reports_no_usage_statistics_whatever_rays_default() -> None:
    # A short temporary directory: Ray's Unix sockets live there, and a socket path may not exceed 107 bytes.
    with tempfile.TemporaryDirectory(prefix="ray-", dir="/tmp") as temporary:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PAU_", "RAY_"))}
        env |= AUTH | {"RAY_TMPDIR": temporary, "TMPDIR": temporary}
        done = subprocess.run(
            [sys.executable, "-c", _CONNECT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )
    assert done.returncode == 0 and "closed" in done.stdout, done.stderr[-3000:]
    # What Ray itself says as it starts: its usage statistics are off for this cluster.
    assert "Usage stats collection is disabled." in done.stdout + done.stderr


def test_a_test_process_killed_at_a_time_limit_leaves_no_node_of_its_cluster_running(tmp_path: Path) -> None:
    """A CI run killed at its time limit (SIGKILL: no teardown) took the tests' Ray nodes with it, not the other way."""
    from cluster_watchdog import cluster_processes

    holder_file = tmp_path / "cluster"
    env = {**os.environ, "PAU_TEST_HOLDER_FILE": str(holder_file)}
    holder = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", "-s",
         str(Path(__file__).with_name("cluster_holder.py"))],
        cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 240
    while not holder_file.exists() and holder.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert holder_file.exists(), "the holder's cluster did not start"
    base = holder_file.read_text() + "/"
    spared = {os.getsid(0), os.getsid(holder.pid)}  # this test's session and the holder's are not the cluster's
    assert len(cluster_processes(base, spared)) >= 3  # a head: ray start, its GCS server, its raylet, ...

    holder.kill()  # SIGKILL to the pytest process alone: no teardown runs
    holder.wait(timeout=30)

    deadline = time.monotonic() + 60
    while (cluster_processes(base, spared) or Path(base).exists()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert cluster_processes(base, spared) == []
    assert not Path(base).exists()
