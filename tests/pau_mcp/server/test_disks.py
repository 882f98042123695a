"""A read-only data directory or a full disk: every command says so in one line, never with a traceback.

The commands run in the test's process (`run_pau`), but on a full disk: that limit (RLIMIT_FSIZE) is a process's,
set in a process of their own.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT
from pau_command import Ran, run_pau

from pau_mcp.runstore import RunStore


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[Path]:
    """``path`` made read-only, even for root (immutable, where the file system allows it)."""
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(0o555 if path.is_dir() else 0o444)
        try:
            yield path
        finally:
            path.chmod(mode)
        return
    made = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot make {path} read-only as root here: {made.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def pau(*args: str, limit_file_bytes: int | None = None, stdin: str = "") -> Ran:
    """Run ``pau-mcp ARGS`` in this process; with ``limit_file_bytes``, in a process of its own where no file it
    writes may grow past that (a full disk)."""
    if limit_file_bytes is None:
        return run_pau(*args, input=stdin, cwd=ROOT)
    launcher = (
        "import os, resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit_file_bytes}, {limit_file_bytes})); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    command = [sys.executable, "-c", launcher, sys.executable, "-m", "pau_mcp", *args]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, input=stdin)
    return Ran(args=list(args), returncode=done.returncode, stdout=done.stdout, stderr=done.stderr)


def _one_clear_line(result: Ran) -> str:
    assert result.returncode == 1, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if line.strip() and not line.strip().startswith("0.")]
    errors = [line for line in lines if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr[-2000:]
    return errors[0]


COMMANDS = {
    "serve": ["serve"],
    "serve-http": ["serve", "--transport", "http", "--port", "0"],
    "call": ["call", "builtin/b001", "(1,)"],
    "eval": ["eval", "--agent", "probe", "--limit", "1", "--no-score"],
    "score": ["score", "some-run"],
}


@pytest.mark.parametrize("command", list(COMMANDS), ids=list(COMMANDS))
def test_a_read_only_data_directory_is_one_clear_line(tmp_path: Path, command: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    with read_only(data):
        result = pau(*COMMANDS[command], "--data-dir", str(data))
    line = _one_clear_line(result)
    assert str(data) in line and "--data-dir" in line


def test_runs_on_a_store_in_a_read_only_directory_is_one_clear_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    RunStore(data / "runs.db").close()
    with read_only(data):
        line = _one_clear_line(pau("runs", "list", "--data-dir", str(data)))
    assert "runs.db" in line


def test_a_read_only_store_file_is_one_clear_line(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    RunStore(db).close()
    with read_only(db):
        line = _one_clear_line(pau("call", "builtin/b001", "(1,)", "--db", str(db)))
    assert "runs.db" in line and "writable" in line


@pytest.mark.parametrize("command", ["serve", "call", "eval"])
def test_a_full_disk_at_startup_is_one_clear_line(tmp_path: Path, command: str) -> None:
    db = tmp_path / "runs.db"
    RunStore(db).close()
    result = pau(*COMMANDS[command], "--db", str(db), "--data-dir", str(tmp_path), limit_file_bytes=0)
    line = _one_clear_line(result)
    assert "runs.db" in line and "full" in line
