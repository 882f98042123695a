"""`pau-mcp scorer` under a flood of slow connections: the connection guard the MCP server has (``pau_mcp.guard``)
keeps the endpoint serving the holder of the scorer token. Tried with real sockets against a real scorer process
whose open-file limit is small, as a server's often is (each connection is a file)."""

from __future__ import annotations

import contextlib
import queue
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from cpu_time import cpu_seconds
from loadgen import PIPELINE_FLOOD
from scorer_process import TOKEN, clean_env

from pau_mcp.manifests import ManifestStore
from pau_mcp.tls import shared_context

RUNS = ManifestStore().method("builtin/b002")
#: The open-file limit the scorer runs under: well below the attack, so that without a cap it runs out of files.
FILES = 256
#: Slow connections the attack opens: more than the scorer can hold open.
ATTACKERS = 400
#: How long a test waits for what must happen. No wall bound under a minute: a 2-core machine at load 6+ stretches
#: every step. The tests that prove something happens "at once" set the scorer's read timeout far past it instead
#: (``LONG_READ_TIMEOUT``), so the behaviour they prove is the only way to pass.
PATIENCE_S = 60
LONG_READ_TIMEOUT = "600"


@contextlib.contextmanager
def _scorer(tmp_path: Path, *args: str, files: int = FILES, pids: list[int] | None = None) -> Iterator[str]:
    """A `pau-mcp scorer` process with the scorer token and at most ``files`` open files; yields its URL (and puts
    its process id in ``pids``)."""
    launcher = (
        "import os, resource, sys; "
        f"resource.setrlimit(resource.RLIMIT_NOFILE, ({files}, {files})); os.execv(sys.argv[1], sys.argv[1:])"
    )
    command = [
        sys.executable, "-m", "pau_mcp", "scorer", "--port", "0", "--scorer-token", TOKEN, "--no-cache",
        "--data-dir", str(tmp_path), "--workers", "1", *args,
    ]  # fmt: skip
    process = subprocess.Popen(
        [sys.executable, "-c", launcher, *command], env=clean_env(), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    if pids is not None:
        pids.append(process.pid)  # the launcher execs the scorer: the same process
    stderr = process.stderr
    assert stderr is not None  # stderr=PIPE
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in stderr:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        seen: list[str] = []
        while True:
            line = lines.get(timeout=90)
            seen.append(line)
            found = re.search(r"serving at (http://\S+)", line)
            if found:
                break
            assert process.poll() is None, "".join(seen)
        yield found.group(1)
        assert process.poll() is None, "the scorer died under the attack"
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


def _address(url: str) -> tuple[str, int]:
    match = re.match(r"http://\[?([^\]/]+?)\]?:(\d+)", url)
    assert match, url
    return match.group(1), int(match.group(2))


def _score(url: str, timeout: float) -> httpx2.Response:
    """The token holder's request: score the method's own source as direct code (sandbox only, no model)."""
    body = {"method": "builtin/b002", "code": RUNS.source, "scores": ["direct"], "view": "agent"}
    headers = {"Authorization": f"Bearer {TOKEN}"}
    return httpx2.post(f"{url}/v1/score", json=body, headers=headers, timeout=timeout, verify=shared_context())


def _served_within(url: str, deadline_s: float) -> float:
    """Seconds until the token holder's score request is answered 200 (fails the test past ``deadline_s``)."""
    started = time.monotonic()
    while True:
        left = deadline_s - (time.monotonic() - started)
        assert left > 0, "the holder of the scorer token was locked out"
        try:
            reply = _score(url, timeout=max(0.5, left))
        except httpx2.HTTPError:
            time.sleep(0.05)
            continue
        assert reply.status_code == 200, reply.text
        assert reply.json()["direct_code_match"] == 1.0
        return time.monotonic() - started


class _Attack:
    """``count`` slow clients: half connect and send nothing, half trickle a request head that never ends; each
    one that the scorer closes connects again at once, for as long as the attack lasts."""

    def __init__(self, host: str, port: int, count: int) -> None:
        self.address = (host, port)
        self.stop = threading.Event()
        self.closed_by_server = 0
        self._lock = threading.Lock()
        self.threads = [threading.Thread(target=self._run, args=(i % 2 == 0,), daemon=True) for i in range(count)]

    def __enter__(self) -> _Attack:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=10)

    def _run(self, trickle: bool) -> None:
        while not self.stop.is_set():
            try:
                with socket.create_connection(self.address, timeout=5) as sock:
                    if trickle:
                        sock.sendall(b"POST /v1/score HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                    while not self.stop.is_set():
                        if trickle:
                            sock.sendall(b"X-Slow: a\r\n")
                        sock.settimeout(0.3)
                        try:
                            if sock.recv(4096) == b"":
                                break  # closed by the scorer
                        except TimeoutError:
                            continue
            except OSError:
                pass
            if not self.stop.is_set():
                with self._lock:
                    self.closed_by_server += 1


def test_slow_connections_beyond_the_open_file_limit_do_not_lock_out_the_token_holder(tmp_path: Path) -> None:
    # With a 600 s read timeout, the attackers would hold every file for ten minutes unless the scorer closes one to
    # make room: that is the only way to be served within PATIENCE_S.
    with (
        _scorer(tmp_path, "--read-timeout", LONG_READ_TIMEOUT) as url,
        _Attack(*_address(url), ATTACKERS) as attack,
    ):
        time.sleep(1)  # every attacker connected (or queued) before the token holder comes
        _served_within(url, PATIENCE_S)
        assert attack.closed_by_server > 0  # the scorer made room by closing slow connections
        _served_within(url, PATIENCE_S)


def test_a_scorer_connection_that_sends_nothing_is_closed_after_the_read_timeout(tmp_path: Path) -> None:
    # A read timeout above the default (10 s), and a lower bound: closed no sooner than 12 s shows the setting is the
    # scorer's (the default would close it first), closed at all that something closes idle connections. A busy
    # machine only closes it later, within PATIENCE_S to spare.
    with _scorer(tmp_path, "--read-timeout", "12") as url:
        with socket.create_connection(_address(url), timeout=PATIENCE_S) as sock:
            started = time.monotonic()
            sock.settimeout(12 + PATIENCE_S)
            assert sock.recv(1) == b""
            assert time.monotonic() - started >= 11.9  # the clock's resolution aside


def test_a_scorer_request_head_that_never_ends_is_cut_off_at_its_size_limit(tmp_path: Path) -> None:
    # Closed within PATIENCE_S, under a 600 s read timeout: cut at its size, not at the timeout (recv would time out).
    with _scorer(tmp_path, "--read-timeout", LONG_READ_TIMEOUT) as url:
        with socket.create_connection(_address(url), timeout=PATIENCE_S) as sock:
            with contextlib.suppress(OSError):  # the scorer may close it before all is sent
                sock.sendall(b"POST /v1/score HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * (4 << 20))
            sock.settimeout(PATIENCE_S)
            answer = b""
            with contextlib.suppress(ConnectionResetError):
                while chunk := sock.recv(65536):
                    answer += chunk
            assert answer == b"" or answer.startswith(b"HTTP/1.1 431"), answer[:200]
        _served_within(url, PATIENCE_S)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_flood_of_pipelined_requests_never_read_costs_the_scorer_little_and_stalls_nobody(tmp_path: Path) -> None:
    # As against the MCP server: 200 connections each writing 400 requests (no token) and never reading.
    pids: list[int] = []
    with _scorer(tmp_path, files=4096, pids=pids) as url:
        host, port = _address(url)
        _served_within(url, PATIENCE_S)
        before = cpu_seconds(pids[0])
        flood = subprocess.Popen(
            [sys.executable, "-c", PIPELINE_FLOOD, host, str(port), "/v1/score", "200", "400"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert flood.stdin is not None  # stdin=PIPE
        try:
            during = [_served_within(url, PATIENCE_S) for _ in range(5)]
            assert flood.stdout is not None and flood.stdout.readline().startswith("sent")
        finally:
            flood.stdin.close()
            flood.wait(timeout=60)
        after = [_served_within(url, PATIENCE_S) for _ in range(3)]
        spent = cpu_seconds(pids[0]) - before
    # The stall came from that CPU (the scorer's event loop parsing the flood), so the CPU bound is what proves nobody
    # is stalled; the round trips (each served within PATIENCE_S) are only shown: on a busy machine their wall time
    # says more about the machine than the scorer.
    assert spent < 2.5, (spent, during, after)
