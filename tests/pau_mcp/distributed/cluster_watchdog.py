"""The test Ray cluster's watchdog: when the test process that started the cluster ends, however it ends (SIGKILL at
a CI time limit included), every process of the cluster is killed and its directory removed.

``ray start --block`` nodes run in sessions of their own (so that a test can kill one node like a dead machine),
and Ray gives each worker a process group of its own: a killed test process leaves them all running, re-parented.
The watchdog holds the read end of a pipe whose write end only the test process has; the kernel closes that end
when the test process dies, so the read returns then, or when the tests close it after their own teardown.

Usage: ``python cluster_watchdog.py BASE`` with the pipe on stdin; BASE is the directory every node's command line
or environment names (its ``--temp-dir`` and ``TMPDIR`` are under it).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
from pathlib import Path


def processes_mentioning(text: str) -> list[int]:
    """Every process but this one whose command line or environment contains ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (entry / "environ").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if text in command or text in environ:
            found.append(int(entry.name))
    return found


def session_of(pid: int) -> int | None:
    """A process's session id, None once it has gone (or is a zombie, which holds nothing)."""
    try:
        # After the command name (in parentheses, which may hold spaces): state, ppid, pgrp, session, ...
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else int(fields[3])


def in_sessions(sessions: set[int]) -> list[int]:
    """Every living process but this one in one of ``sessions``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid() and session_of(int(entry.name)) in sessions:
            found.append(int(entry.name))
    return found


def cluster_processes(base: str, spared: set[int]) -> list[int]:
    """The processes of the cluster under ``base``: those naming it, and the other processes of the sessions such a
    process leads (each node is ``ray start`` leading a session of its own, and some of its helpers rename
    themselves: ``ray::DashboardAgent`` names nothing). Only a session whose leader names ``base`` is taken, and
    never one of ``spared``."""
    named = processes_mentioning(base)
    leaders = {pid for pid in named if session_of(pid) == pid} - spared - {0, 1}
    return sorted({*named, *in_sessions(leaders)})


def kill_all(base: str, spared: set[int], rounds: int = 50) -> None:
    """SIGKILL the cluster's processes, again until none is left (a dying raylet may have started one more)."""
    for _ in range(rounds):
        doomed = cluster_processes(base, spared)
        if not doomed:
            return
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def main() -> None:
    base = sys.argv[1].rstrip("/") + "/"  # a directory's own name: not another directory that begins the same
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C meant for the tests: they stop the cluster themselves
    spared = {os.getsid(0), os.getsid(os.getppid())}  # this one's, and the tests' own: never a node's
    sys.stdin.buffer.read()  # returns at end of file: the tests closed the pipe, or their process is gone
    kill_all(base, spared)
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
