"""``--ray local``: the Ray instance a command starts for itself."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
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


def test_a_cluster_started_for_a_command_reports_no_usage_statistics_whatever_rays_default():
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
