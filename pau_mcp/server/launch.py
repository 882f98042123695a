"""Starting `pau-mcp serve` as a child process, for the harness, the demo, the Inspect task, benchmarks and tests.

A parent hands its child server one serialised ``Settings`` object (``Settings.to_json``), not flags and variables:
every limit the parent was given (``--timeout``, ``--memory-mb``, ...) is the child's. The object is written to a
file only this user can read, in a directory of its own that goes when the child does, and named to the child by
``--settings-file``: the secrets in it (the token, the deployment key, a PostgreSQL URL's password) never appear on
a command line or in an environment, which other local users or child processes could read.

Over HTTP (``http_server``) the child runs with ``--launched``: it writes one JSON line ``{"ready": URL}`` on stdout
once it listens (the parent reads that, not the log), and it stops when its stdin closes, so it ends with its
parent however the parent ends (even ``kill -9``). Over stdio (``stdio_server``) stdin and stdout are the MCP stream.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..config import Settings

__all__ = ["LaunchError", "Launched", "http_server", "launched", "ready_line", "settings_file", "stdio_server"]

_ROOT = Path(__file__).resolve().parents[2]
#: Lines of the child's error output kept for the message when it does not start.
_KEPT_LINES = 500
#: Longest line read from the child's stdout (its ready line is short).
_LINE_LIMIT = 64 * 1024


class LaunchError(RuntimeError):
    """The server process did not start; the message carries the end of its error output."""


class Launched:
    """A running ``pau-mcp serve --transport http`` child: its URL, and whether (and how) it has stopped."""

    def __init__(self, url: str, process: subprocess.Popen[bytes], tail: deque[str]) -> None:
        self.url = url
        self._process = process
        self._tail = tail

    def stopped(self, wait_s: float = 0.0) -> str | None:
        """None while the server runs; once it has exited, how (its exit code or signal, and the last lines of its
        error output). Waits up to ``wait_s`` seconds for a server that is on its way out."""
        try:
            code = self._process.wait(timeout=wait_s) if wait_s > 0 else self._process.poll()
        except subprocess.TimeoutExpired:
            code = None
        if code is None:
            return None
        how = (
            f"killed by {signal.Signals(-code).name}"
            if code < 0 and -code in signal.valid_signals()
            else f"exit code {code}"
        )
        said = "".join(self._tail).strip()
        return how + (f"; its last words: {said}" if said else "")


@contextlib.contextmanager
def settings_file(settings: Settings) -> Iterator[Path]:
    """``settings`` in a file only this user can read, for ``--settings-file``; removed with its directory on exit."""
    directory = Path(tempfile.mkdtemp(prefix="pau-mcp-launch-"))  # mode 0700
    try:
        path = directory / "settings.json"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(settings.to_json())
        yield path
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _one_process(settings: Settings) -> Settings:
    """``settings`` for a server a process starts for itself (a run's own, the demo's, the Inspect task's): one
    process, whatever ``PAU_MCP_PROCESSES`` (set for the operator's own servers) says."""
    return settings.model_copy(update={"processes": 1})


def ready_line(url: str) -> str:
    """The line a ``--launched`` server writes on stdout once it listens at ``url``."""
    return json.dumps({"ready": url})


@contextlib.contextmanager
def http_server(
    args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    timeout_s: float = 180,
    settings: Settings | None = None,
) -> Iterator[str]:
    """Run ``pau-mcp serve --transport http --port 0 ARGS`` and yield its URL; stop it on exit.

    The server stops when this process ends, even if it is killed. Its stderr is read in the background for
    the whole run, so the server never blocks on a full pipe.

    Args:
        args: The command's other options (``--suite``, ``--run``, ...); with ``settings``, no settings.
        env: Variables added to this process's for the child.
        timeout_s: How long the child may take to listen.
        settings: The child's whole settings; None: its flags and ``PAU_*`` variables, as the command reads them.

    Raises:
        LaunchError: the server exited or did not report that it listens within ``timeout_s``.
    """
    with launched(args, env, timeout_s, settings) as server:
        yield server.url


@contextlib.contextmanager
def launched(
    args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    timeout_s: float = 180,
    settings: Settings | None = None,
) -> Iterator[Launched]:
    """``http_server``, yielding the running server (``Launched``): its URL, and whether it has stopped since."""
    with contextlib.ExitStack() as stack:
        chosen = (
            ["--settings-file", str(stack.enter_context(settings_file(_one_process(settings))))] if settings else []
        )
        # One process unless ARGS say otherwise (a later --processes wins), whatever PAU_MCP_PROCESSES says.
        command = [
            sys.executable, "-m", "pau_mcp", "serve", "--transport", "http", "--port", "0", "--launched",
            "--processes", "1", *chosen, *args,
        ]  # fmt: skip
        # The server's stdin is a pipe only this process writes to: when this process ends, however it ends (even
        # kill -9), the kernel closes it and the server stops. The pipe is not inherited by other children.
        process = subprocess.Popen(
            command, cwd=_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})},
        )  # fmt: skip
        stack.callback(_stop, process)
        tail: deque[str] = deque(maxlen=5)  # what it said last, cut per line, for a server that stops mid-run
        url = _wait_ready(process, timeout_s, tail)
        yield Launched(url, process, tail)


def _wait_ready(process: subprocess.Popen[bytes], timeout_s: float, tail: deque[str]) -> str:
    """The URL a ``--launched`` child reports on stdout; its stderr is read until it exits (its last lines into
    ``tail``).

    Raises:
        LaunchError: it exited, or reported nothing within ``timeout_s``.
    """
    lines: list[str] = []
    found: list[str] = []
    ready = threading.Event()

    def errors() -> None:
        assert process.stderr is not None
        for raw in process.stderr:
            line = raw.decode("utf-8", "replace")
            if len(lines) < _KEPT_LINES:
                lines.append(line)
            tail.append(line[:500])

    def answers() -> None:
        assert process.stdout is not None
        while line := process.stdout.readline(_LINE_LIMIT):
            with contextlib.suppress(ValueError, AttributeError):
                url = json.loads(line).get("ready")
                if isinstance(url, str) and not found:
                    found.append(url)
                    ready.set()
        ready.set()

    watchers = [threading.Thread(target=target, daemon=True) for target in (errors, answers)]
    for watcher in watchers:
        watcher.start()
    if not ready.wait(timeout=timeout_s) or not found:
        watchers[0].join(timeout=2)  # the end of its error output, once it has exited
        raise LaunchError("the MCP server did not start:\n" + "".join(lines[-20:]))
    return found[0]


def _stop(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        assert process.stdin is not None
        process.stdin.close()
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@contextlib.contextmanager
def stdio_server(settings: Settings, args: Sequence[str] = ()) -> Iterator[Any]:
    """How an MCP client starts ``pau-mcp serve ARGS`` over stdio with ``settings`` (the demo, the Inspect task), for
    as long as the context is open (the settings file goes with it).

    Yields:
        ``mcp.client.stdio.StdioServerParameters`` for ``stdio_client`` or ``Client``.
    """
    from mcp.client.stdio import StdioServerParameters

    with settings_file(_one_process(settings)) as path:
        yield StdioServerParameters(
            command=sys.executable, args=["-m", "pau_mcp", "serve", "--settings-file", str(path), *args],
            cwd=str(_ROOT), env=dict(os.environ),
        )  # fmt: skip
