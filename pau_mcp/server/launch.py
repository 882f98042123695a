"""Starting `pau-mcp serve --transport http` as a child process, for the harness, benchmarks and tests."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

__all__ = ["LaunchError", "http_server"]

_ROOT = Path(__file__).resolve().parents[2]
_URL = re.compile(r"serving at (http://\S+)")


class LaunchError(RuntimeError):
    """The server process did not start; the message carries the end of its error output."""


@contextlib.contextmanager
def http_server(args: Sequence[str] = (), env: dict[str, str] | None = None, timeout_s: float = 180) -> Iterator[str]:
    """Run ``pau-mcp serve --transport http --port 0 ARGS`` and yield its URL; stop it on exit.

    The server stops when this process ends, even if it is killed. Its stderr is read in the background for
    the whole run, so the server never blocks on a full pipe.

    Raises:
        LaunchError: the server exited or printed no URL within ``timeout_s``.
    """
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
    found: list[str] = []
    ready = threading.Event()

    def watch() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            if len(lines) < 500:
                lines.append(line)
            match = _URL.search(line)
            if match and not found:
                found.append(match.group(1))
                ready.set()
        ready.set()

    threading.Thread(target=watch, daemon=True).start()
    try:
        if not ready.wait(timeout=timeout_s) or not found:
            raise LaunchError("the MCP server did not start:\n" + "".join(lines[-20:]))
        yield found[0]
    finally:
        with contextlib.suppress(OSError):
            process.stdin.close()  # type: ignore[union-attr]
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
