"""The tests' throwaway PostgreSQL server (tests/postgres_server.py) never outlives the process that started it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psycopg
import pytest
from postgres_server import PostgresServer

TESTS = Path(__file__).resolve().parent

_OWNER = textwrap.dedent(
    f"""
    import sys, time
    sys.path.insert(0, {str(TESTS)!r})
    from postgres_server import postgres_server
    with postgres_server() as server:
        print(server.url(), server.directory, flush=True)
        time.sleep(600)
    """
)


def test_a_server_whose_owner_is_killed_stops_and_its_files_are_deleted(postgres: PostgresServer) -> None:
    """As a CI run killed at its time limit would leave it (``postgres``: PostgreSQL is here, or the test skips)."""
    owner = subprocess.Popen([sys.executable, "-c", _OWNER], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        url, directory = owner.stdout.readline().split()
        with psycopg.connect(url, connect_timeout=10) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(timeout=30)
    deadline = time.monotonic() + 60
    while Path(directory).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(directory).exists()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=5)
