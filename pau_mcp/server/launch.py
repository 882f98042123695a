"""Starting `pau-mcp serve --transport http` as a child process, for the harness, benchmarks and tests."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path

__all__ = ["LaunchError", "Launched", "http_server", "launched"]

_ROOT = Path(__file__).resolve().parents[2]
_URL = re.compile(r"serving at (http://\S+)")


class LaunchError(RuntimeError):
    """The server process did not start; the message carries the end of its error output."""


class Launched:
    """A running ``pau-mcp serve --transport http`` child: its URL, and whether (and how) it has stopped."""

    def __init__(self, url: str, process: subprocess.Popen[str], tail: deque[str]) -> None:
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
def http_server(args: Sequence[str] = (), env: dict[str, str] | None = None, timeout_s: float = 180) -> Iterator[str]:
    """Run ``pau-mcp serve --transport http --port 0 ARGS`` and yield its URL; stop it on exit.

    The server stops when this process ends, even if it is killed. Its stderr is read in the background for
    the whole run, so the server never blocks on a full pipe.

    Raises:
        LaunchError: the server exited or printed no URL within ``timeout_s``.
    """
    with launched(args, env, timeout_s) as server:
        yield server.url


@contextlib.contextmanager
def launched(args: Sequence[str] = (), env: dict[str, str] | None = None, timeout_s: float = 180) -> Iterator[Launched]:
    """``http_server``, yielding the running server (``Launched``): its URL, and whether it has stopped since."""
    command = [
        sys.executable,
        "-m",
        "pau_mcp",
        "serve",
        "--transport",
        "http",
        "--port",
        "0",
        "--exit-with-stdin",
        *args,
    ]
    # The server's stdin is a pipe only this process writes to: when this process ends, however it ends (even
    # kill -9), the kernel closes it and the server stops. The pipe is not inherited by other children.
    process = subprocess.Popen(
        command, cwd=_ROOT, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    lines: list[str] = []
    tail: deque[str] = deque(maxlen=5)  # what it said last, cut per line, for a server that stops mid-run
    found: list[str] = []
    ready = threading.Event()

    def watch() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            if len(lines) < 500:
                lines.append(line)
            match = _URL.search(line)
            if not match:
                tail.append(line[:500])
            if match and not found:
                found.append(match.group(1))
                ready.set()
        ready.set()

    threading.Thread(target=watch, daemon=True).start()
    try:
        if not ready.wait(timeout=timeout_s) or not found:
            raise LaunchError("the MCP server did not start:\n" + "".join(lines[-20:]))
        yield Launched(found[0], process, tail)
    finally:
        with contextlib.suppress(OSError):
            process.stdin.close()  # type: ignore[union-attr]
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
