"""CPU time of another process, for tests that bound what an attack or a load costs a server: unlike its wall time,
a busy machine does not stretch it (a test must pass first time on 2 cores at load 6+)."""

from __future__ import annotations

import os
from pathlib import Path


def cpu_seconds(pid: int) -> float:
    """User and system CPU the process ``pid`` has used so far, all its threads (not its children); Linux only."""
    return _cpu(Path(f"/proc/{pid}/stat"))


def main_thread_cpu_seconds(pid: int) -> float:
    """User and system CPU of the process's main thread alone (a served process's event loop runs there)."""
    return _cpu(Path(f"/proc/{pid}/task/{pid}/stat"))


def _cpu(stat: Path) -> float:
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu_seconds(native_id: int) -> float:
    """User and system CPU of one thread of this process (``threading.Thread.native_id``)."""
    return _cpu(Path(f"/proc/self/task/{native_id}/stat"))
