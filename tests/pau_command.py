"""``pau-mcp ARGS`` run in the test's own process: the command group users run, its exit code and both streams.

A test about what a command does (its output, its exit code, what it writes) runs it here; a test about the
process itself (signals, stdio framing, a fresh interpreter, an installed script) starts one. Starting
``python -m pau_mcp`` costs about a second of CPU before any work; here the commands' modules are imported once.

The command runs as a process would run it: with the environment given (the whole of it, as ``subprocess.run``
takes it), in the directory given, and with anything it changes undone afterwards (environment, directory, the
``pau_mcp`` log handlers it adds). An exception no user would see as a message (anything but a clean exit)
is raised in the test, where a process would have printed a traceback. What a process settles once, at import,
stays the test process's: the commands' error console detects the terminal and colours when it is first
imported (under pytest: no terminal, plain text, unless the tests run with ``-s`` in one), and so do settings
libraries read at their first import (``HF_HUB_OFFLINE``): a test of those keeps a process. A server a command
starts writes its stderr to the test's, not to the run's.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

# mcp's stdio_client gives a server it starts (`pau-mcp eval`, `demo`, `rl`) the sys.stderr of when mcp.client.stdio
# was first imported: imported here, that is the test process's own (a file), not a stream a run captures (which has
# no file descriptor to hand a child).
import mcp.client.stdio  # noqa: F401
from click.testing import CliRunner

from pau_mcp.cli import main

__all__ = ["Ran", "run_pau", "run_pau_process"]


@dataclass(frozen=True)
class Ran:
    """What a command left: the fields of ``subprocess.CompletedProcess`` the tests read."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def _loggers_kept() -> Iterator[None]:
    """Log handlers a command adds write to that run's captured stderr: they leave with it."""
    kept = {name: (logging.getLogger(name).handlers[:], logging.getLogger(name).level) for name in ("", "pau_mcp")}
    try:
        yield
    finally:
        for name, (handlers, level) in kept.items():
            logger = logging.getLogger(name)
            logger.handlers[:] = handlers
            logger.setLevel(level)


def run_pau(
    *args: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> Ran:
    """Run ``pau-mcp ARGS`` in this process.

    Args:
        args: The command line after ``pau-mcp``.
        env: The command's whole environment (None: this process's, as it is).
        input: Its standard input.
        cwd: The directory it runs in (None: this one).

    Returns:
        Its exit code and what it wrote to stdout and stderr.
    """
    words = [os.fspath(arg) for arg in args]
    changes: dict[str, str | None] = {}
    if env is not None:
        changes = {key: None for key in os.environ if key not in env}
        changes.update({key: value for key, value in env.items() if os.environ.get(key) != value})
    runner = CliRunner()
    with _loggers_kept(), contextlib.chdir(Path(cwd) if cwd is not None else Path.cwd()):
        result = runner.invoke(main, words, input=input, env=changes, prog_name="pau-mcp")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Ran(args=words, returncode=result.exit_code, stdout=result.stdout, stderr=result.stderr)


def run_pau_process(
    *args: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float = 300,
    memory_limit: int | None = None,
) -> Ran:
    """``run_pau`` in a process of its own (``python -m pau_mcp ARGS``), for a test about the process itself.

    ``memory_limit`` caps the process's address space (bytes): a command that would read without end fails
    there instead of taking the machine's memory.
    """
    words = [os.fspath(arg) for arg in args]

    def cap() -> None:
        if memory_limit is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))

    done = subprocess.run(
        [sys.executable, "-m", "pau_mcp", *words], env=None if env is None else dict(env), input=input, cwd=cwd,
        capture_output=True, text=True, timeout=timeout, check=False, preexec_fn=cap,
    )  # fmt: skip
    return Ran(args=words, returncode=done.returncode, stdout=done.stdout, stderr=done.stderr)
