"""Several `pau-mcp serve --transport http` processes on one run store, behind a plain round-robin HTTP proxy.

``Replica`` is one server process (killable); ``RoundRobin`` hands each request to the next replica in turn, as a
reverse proxy with no session affinity does, and tries the next one when a replica refuses the connection (the
request was not sent). A replica that dies with a request in flight leaves that request a 502.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import aiohttp
from aiohttp import web

ROOT = Path(__file__).resolve().parents[3]
_URL = re.compile(r"serving at (http://\S+)")
#: Headers that belong to one hop, never forwarded (RFC 9110 7.6.1), and what the proxy sets itself.
_HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "host",
        "content-length"}  # fmt: skip


class Replica:
    """One `pau-mcp serve --transport http --port 0 ARGS` process; ``url`` once it serves."""

    def __init__(self, args: Sequence[str], timeout_s: float = 120) -> None:
        command = [sys.executable, "-m", "pau_mcp", "serve", "--transport", "http", "--port", "0", "--exit-with-stdin",
                   *args]  # fmt: skip
        self.process = subprocess.Popen(
            command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ),
        )  # fmt: skip
        self.lines: list[str] = []
        found = threading.Event()
        self.url = ""

        def watch() -> None:
            assert self.process.stderr is not None
            for line in self.process.stderr:
                if len(self.lines) < 500:
                    self.lines.append(line)
                match = _URL.search(line)
                if match and not self.url:
                    self.url = match.group(1)
                    found.set()
            found.set()

        threading.Thread(target=watch, daemon=True).start()
        if not found.wait(timeout_s) or not self.url:
            self.stop()
            raise RuntimeError("a replica did not start:\n" + "".join(self.lines[-20:]))

    def kill(self) -> None:
        """SIGKILL: the process dies at once, whatever it was doing."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        assert self.process.stdin is not None  # opened with stdin=PIPE
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)


@contextlib.contextmanager
def replicas(count: int, args: Sequence[str]) -> Iterator[list[Replica]]:
    """``count`` replicas with the same arguments, started together; stopped on exit."""
    started: list[Replica] = []
    try:
        for _ in range(count):
            started.append(Replica(args))
        yield started
    finally:
        for replica in started:
            replica.stop()


class RoundRobin:
    """A reverse proxy at ``url`` handing each request to the next backend in turn (no affinity, no retries of a
    request once sent). ``served`` counts the requests each backend answered."""

    def __init__(self, backends: Sequence[str]) -> None:
        self.backends = list(backends)
        self._turn = itertools.cycle(range(len(self.backends)))
        self.served: Counter[str] = Counter()
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._client: aiohttp.ClientSession | None = None

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._client is not None
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        for _ in range(len(self.backends)):
            backend = self.backends[next(self._turn)]
            target = backend.rsplit("/mcp", 1)[0] + request.path_qs
            try:
                async with self._client.request(request.method, target, headers=headers, data=body) as answer:
                    payload = await answer.read()
                    self.served[backend] += 1
                    kept = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP}
                    return web.Response(status=answer.status, headers=kept, body=payload)
            except aiohttp.ClientConnectorError:
                continue  # refused before the request was sent: the next backend gets it
            except (aiohttp.ClientError, ConnectionError):
                return web.Response(status=502, text="the backend went away")
        return web.Response(status=502, text="no backend answered")

    async def __aenter__(self) -> RoundRobin:
        self._client = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120))
        app = web.Application(client_max_size=4 << 20)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}/mcp"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._client is not None:
            await self._client.close()
