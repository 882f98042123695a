"""Run in a pytest process of its own by ``test_cluster.py``, which kills that process: starts a test cluster's
head as the tests' fixture starts it, writes the cluster's directory to ``$PAU_TEST_HOLDER_FILE``, and waits to be
killed. Not collected by the suite (its name is not test_*.py); pytest collects it when given it by name."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from conftest import LocalCluster


def test_holds_a_cluster_until_killed() -> None:
    cluster = LocalCluster(Path(tempfile.mkdtemp(prefix="pr", dir="/tmp")))
    cluster.start_head()
    Path(os.environ["PAU_TEST_HOLDER_FILE"]).write_text(str(cluster.base))
    sys.stdin.read()  # the test process never writes: this returns only if the holder's stdin closes
