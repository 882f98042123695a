"""A throwaway PostgreSQL server for tests and benchmarks: ``initdb`` in a temporary directory, ``pg_ctl start`` on
a free loopback port, and stopped and deleted at the end, even when the process that started it is killed.

PostgreSQL's programs come from ``PATH``, else ``pg_config --bindir``, else Debian's ``/usr/lib/postgresql/N/bin``
(``apt-get install postgresql`` puts them there and only ``pg_config`` on ``PATH``). ``initdb`` refuses to run as
root, so as root the cluster belongs to the ``postgres`` user (``runuser``), as Debian's packages set it up.
Connections are trusted (no password) and only on 127.0.0.1 and a socket in the cluster's own directory.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["PostgresServer", "PostgresUnavailable", "find_bindir", "postgres_server"]

#: The role tests connect as (a superuser of the throwaway cluster).
USER = "pau"

#: Runs beside the server, in a session of its own: when the pipe from the process that started the server closes
#: (it ended, even by SIGKILL, or the group it ran in was killed), stops the server and deletes its directory.
_WATCHDOG = textwrap.dedent(
    """
    import shutil, subprocess, sys
    sys.stdin.buffer.read()
    command, directory = sys.argv[1:-1], sys.argv[-1]
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    shutil.rmtree(directory, ignore_errors=True)
    """
)


class PostgresUnavailable(RuntimeError):
    """PostgreSQL's programs are not on this machine, or its server would not start; the message says why."""


def find_bindir() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``, or None when PostgreSQL is not installed."""
    candidates: list[Path] = []
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(Path(initdb).resolve().parent)
    if shutil.which("pg_config"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            found = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, timeout=10)
            if found.returncode == 0:
                candidates.append(Path(found.stdout.strip()))
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: [int(n) for n in re.findall(r"\d+", d)])
    candidates += [Path(d) for d in reversed(versions)]
    for directory in candidates:
        if (directory / "initdb").is_file() and (directory / "pg_ctl").is_file():
            return directory
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class PostgresServer:
    """A running throwaway server.

    Attributes:
        bindir: Where its programs are.
        directory: Its data directory's parent, which also holds its socket and log.
        port: Its TCP port on 127.0.0.1.
    """

    bindir: Path
    directory: Path
    port: int
    _created: int = field(default=0, repr=False)

    def url(self, database: str = "postgres") -> str:
        """The URL of one of its databases."""
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, prefix: str = "t") -> str:
        """A new, empty database; returns its URL. Each gets a name of its own, so tests never share one."""
        import psycopg

        self._created += 1
        name = f"{re.sub(r'[^a-z0-9_]', '_', prefix.lower())[:40]}_{self._created}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def log(self) -> str:
        """The server's log so far (for a failing test's message)."""
        with contextlib.suppress(OSError):
            return (self.directory / "log").read_text(errors="replace")
        return ""


@contextlib.contextmanager
def postgres_server(durable: bool = False) -> Iterator[PostgresServer]:
    """Start a throwaway server; stop it and delete its files on exit.

    Args:
        durable: Keep PostgreSQL's defaults (every commit flushed to disk). Tests leave it off: with ``fsync=off``
            a commit costs no disk flush, which a test does not need and a shared machine's disk makes slow.

    Raises:
        PostgresUnavailable: PostgreSQL is not installed, or the server did not start (the message has its log).
    """
    bindir = find_bindir()
    if bindir is None:
        raise PostgresUnavailable(
            "PostgreSQL is not installed (no initdb on PATH, from pg_config --bindir or in /usr/lib/postgresql): "
            "apt-get install postgresql (as .ci/run does)"
        )
    as_root = os.geteuid() == 0
    if as_root:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            raise PostgresUnavailable(
                "running as root, and there is no postgres user to own the cluster (initdb refuses root): "
                "create one (useradd --system postgres) or run the tests as another user"
            ) from None
    # Not under pytest's own temporary directories: as root those are private to root, and the server runs as postgres.
    directory = Path(tempfile.mkdtemp(prefix="pau-pg-"))
    data = directory / "data"
    prefix = ["runuser", "-u", "postgres", "--"] if as_root else []
    if as_root:
        os.chown(directory, owner.pw_uid, owner.pw_gid)
    watchdog: subprocess.Popen[bytes] | None = None
    try:
        _run([*prefix, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", USER, "--no-sync",
              "-E", "UTF8", "--locale=C"], "initdb")  # fmt: skip
        options = [f"-k {directory}", "-c listen_addresses=127.0.0.1", "-c max_connections=200"]
        if not durable:
            options += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        stop = [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]
        watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, *stop, str(directory)], stdin=subprocess.PIPE, start_new_session=True
        )
        for attempt in range(3):  # another process may take the free port before the server binds it
            port = _free_port()
            started = subprocess.run(
                [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(directory / "log"), "-w", "-t", "60",
                 "-o", " ".join([f"-p {port}", *options]), "start"],
                capture_output=True, text=True, timeout=90, start_new_session=True,
            )  # fmt: skip
            if started.returncode == 0:
                break
            log = (directory / "log").read_text(errors="replace") if (directory / "log").exists() else ""
            if attempt == 2 or "could not bind" not in log:
                raise PostgresUnavailable(f"pg_ctl start failed: {started.stderr.strip()} {log[-2000:]}")
        yield PostgresServer(bindir, directory, port)
    finally:
        if watchdog is not None:
            assert watchdog.stdin is not None
            watchdog.stdin.close()  # the watchdog stops the server and deletes the directory
            watchdog.wait(timeout=90)
        else:
            shutil.rmtree(directory, ignore_errors=True)


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise PostgresUnavailable(f"{what} failed ({done.returncode}): {(done.stderr or done.stdout).strip()[-2000:]}")
