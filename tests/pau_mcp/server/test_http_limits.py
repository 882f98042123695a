"""`pau-mcp serve --transport http` under attack: foreign hosts, oversized bodies, piles of sessions, idle and slow
connections. Each limit is tried with real sockets on loopback, against the app the command serves, run in this
process with the same flags (``memory_http_server``); what needs a process of its own (host names from the
environment, the open-file limit) is tried against a real server process."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from conftest import ROOT, http_server, memory_http_server, tool_of
from cpu_time import cpu_seconds, thread_cpu_seconds
from loadgen import LARGE_CALLS
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from pau_mcp.tls import shared_context

TOKEN = "test-token-0123456789"
TOOL = tool_of("builtin/b001")
ACCEPT = "application/json, text/event-stream"
INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}  # fmt: skip


def _address(url: str) -> tuple[str, int]:
    match = re.match(r"http://\[?([^\]/]+?)\]?:(\d+)/", url)
    assert match, url
    return match.group(1), int(match.group(2))


def _post(url: str, body: bytes | dict[str, Any], host: str | None = None, **headers: str) -> httpx2.Response:
    content = json.dumps(body).encode() if isinstance(body, dict) else body
    sent = {
        "content-type": "application/json",
        "accept": ACCEPT,
        **{k.replace("_", "-"): v for k, v in headers.items()},
    }
    if host is not None:
        sent["host"] = host
    # A request that hangs fails the test; one that is merely slow on a busy machine must not (no wall bound under
    # a minute: a 2-core machine at load 6+ stretches every step).
    return httpx2.post(url, content=content, headers=sent, timeout=60, verify=shared_context())


def _initialize(url: str) -> str:
    response = _post(url, INITIALIZE)
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    _post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, mcp_session_id=session)
    return session


def _ping(url: str, session: str) -> httpx2.Response:
    return _post(url, {"jsonrpc": "2.0", "id": 9, "method": "ping"}, mcp_session_id=session)


def _one_line_error(response: httpx2.Response) -> dict[str, Any]:
    body: dict[str, Any] = response.json()
    assert body["jsonrpc"] == "2.0" and "\n" not in body["error"]["message"], body
    return body


# -- DNS rebinding ---------------------------------------------------------------------------------------------


def _bindable(host: str) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family) as probe:
            probe.bind((host, 0))
    except OSError:
        return False
    return True


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1"])
def test_a_foreign_host_header_is_refused_on_every_loopback_address(tmp_path: Path, host: str) -> None:
    if not _bindable(host):
        pytest.skip(f"this machine cannot bind {host}")
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--host", host) as url:
        bare, port = _address(url)
        foreign = (
            "evil.example", f"evil.example:{port}", f"127.0.0.1.evil.example:{port}", f"localhost.evil.example:{port}",
            f"evil.example:{port}:{port}", "[::1", f"127.0.0.1:{port}x", "10.1.2.3", "",
        )  # fmt: skip
        for host in foreign:
            assert _post(url, INITIALIZE, host=host).status_code == 421, host
        shown = f"[{bare}]" if ":" in bare else bare
        for own in (f"{shown}:{port}", f"LocalHost:{port}", shown, f"127.9.9.9:{port}", f"[::1]:{port}"):
            assert _post(url, INITIALIZE, host=own).status_code == 200, own


def test_a_foreign_origin_is_refused(tmp_path: Path) -> None:
    with memory_http_server("--db", str(tmp_path / "runs.db")) as url:
        _, port = _address(url)
        assert _post(url, INITIALIZE, origin="http://evil.example").status_code == 403
        assert _post(url, INITIALIZE, origin="null").status_code == 403
        assert _post(url, INITIALIZE, origin=f"http://localhost:{port}").status_code == 200


def test_the_host_check_comes_before_authentication(tmp_path: Path) -> None:
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--token", TOKEN) as url:
        assert _post(url, INITIALIZE, host="evil.example").status_code == 421
        assert _post(url, INITIALIZE).status_code == 401


def test_an_allowed_host_setting_admits_a_proxy_name(tmp_path: Path) -> None:
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--allowed-host", "mcp.example.org") as url:
        assert _post(url, INITIALIZE, host="mcp.example.org").status_code == 200
        assert _post(url, INITIALIZE, host="other.example.org").status_code == 421
    names = {"PAU_MCP_ALLOWED_HOSTS": "a.example.org:b.example.org"}
    with http_server("--db", str(tmp_path / "runs.db"), env=names) as url:
        assert _post(url, INITIALIZE, host="a.example.org").status_code == 200
        assert _post(url, INITIALIZE, host="b.example.org:8443").status_code == 200
        assert _post(url, INITIALIZE, host="c.example.org").status_code == 421


# -- bodies ------------------------------------------------------------------------------------------------------


def test_a_body_over_the_limit_is_refused_413_with_its_request_id(tmp_path: Path) -> None:
    with memory_http_server("--db", str(tmp_path / "runs.db")) as url:
        session = _initialize(url)
        body = b'{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"x","arguments":{"arg0":"'
        body += b"x" * (3 << 20) + b'"}}}'
        declared = _post(url, body, mcp_session_id=session)
        assert declared.status_code == 413
        refused = _one_line_error(declared)
        assert refused["id"] == 77 and "--max-argument-kb" in refused["error"]["message"]

        def chunks() -> Iterator[bytes]:
            for start in range(0, len(body), 1 << 16):
                yield body[start : start + (1 << 16)]

        streamed = httpx2.post(
            url, content=chunks(), timeout=30,
            headers={"content-type": "application/json", "accept": ACCEPT, "mcp-session-id": session}, verify=shared_context(),
        )  # fmt: skip
        assert streamed.status_code == 413 and _one_line_error(streamed)["id"] == 77
        assert _ping(url, session).status_code == 200


def test_malformed_bodies_get_one_line_errors_with_their_ids(tmp_path: Path) -> None:
    with memory_http_server("--db", str(tmp_path / "runs.db")) as url:
        session = _initialize(url)
        call = '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"%s","arguments":{"arg0":%s}}}'
        surrogate = _post(url, (call % (TOOL, '"\\ud800"')).encode(), mcp_session_id=session)
        assert surrogate.status_code == 400
        assert _one_line_error(surrogate)["id"] == 5 and "surrogate" in surrogate.json()["error"]["message"]
        digits = _post(url, (call % (TOOL, "9" * 5000)).encode(), mcp_session_id=session)
        assert digits.status_code == 400 and "4,300 digits" in _one_line_error(digits)["error"]["message"]
        batch = _post(url, b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', mcp_session_id=session)
        assert batch.status_code == 400 and "one message" in _one_line_error(batch)["error"]["message"]
        null_id = _post(url, {"jsonrpc": "2.0", "id": None, "method": "ping"}, mcp_session_id=session)
        assert null_id.status_code == 400 and _one_line_error(null_id)["error"]["code"] == -32600
        assert _ping(url, session).status_code == 200


# -- sessions ----------------------------------------------------------------------------------------------------


def test_sessions_over_the_cap_are_refused_clearly_until_the_longest_idle_one_is_reclaimed(tmp_path: Path) -> None:
    # Three credentials (labels): a credential at the cap would reclaim its own idle session at once
    # (tests/pau_mcp/server/test_session_caps.py); another's only once idle long enough.
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--max-sessions", "2", "--session-idle", "6") as url:
        first = _initialize(f"{url}?session=first")
        time.sleep(0.5)
        second = _initialize(f"{url}?session=second")
        refused = _post(f"{url}?session=third", INITIALIZE)
        assert refused.status_code == 503 and int(refused.headers["retry-after"]) >= 1
        message = _one_line_error(refused)["error"]["message"]
        assert "--max-sessions" in message
        assert _ping(url, first).status_code == 200 and _ping(url, second).status_code == 200
        time.sleep(3.5)  # both idle for half of --session-idle: the longest idle one may be reclaimed
        assert _ping(url, second).status_code == 200
        third = _initialize(f"{url}?session=third")
        assert _ping(url, first).status_code == 404
        assert _ping(url, second).status_code == 200 and _ping(url, third).status_code == 200


def test_an_idle_session_expires(tmp_path: Path) -> None:
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--session-idle", "1") as url:
        session = _initialize(url)
        assert _ping(url, session).status_code == 200
        time.sleep(2.5)
        assert _ping(url, session).status_code == 404


# -- connections -------------------------------------------------------------------------------------------------


#: How long a test waits for what must happen. The tests that prove something happens "at once" (a client served
#: while attackers hold the connections, a head cut off at its size) set the server's own time-outs far beyond it,
#: so that the behaviour they prove is the only way to pass; a busy machine only makes them slower, never red.
PATIENCE_S = 60


def _connect(host: str, port: int) -> socket.socket:
    return socket.create_connection((host, port), timeout=PATIENCE_S)


def _served(url: str, deadline_s: float = PATIENCE_S) -> float:
    """Seconds until a fresh client is served (an initialize answered 200); fails the test past ``deadline_s``."""
    started = time.monotonic()
    while True:
        try:
            if _post(url, INITIALIZE).status_code == 200:
                return time.monotonic() - started
        except httpx2.HTTPError:
            pass
        assert time.monotonic() - started < deadline_s, "a real client was locked out"
        time.sleep(0.1)


def _closed_by_server(sock: socket.socket, timeout: float = PATIENCE_S) -> bool:
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except OSError:
        return True
    return True


def test_idle_connections_beyond_the_cap_do_not_lock_out_a_real_client(tmp_path: Path) -> None:
    # The idle connections would hold the cap for the whole read timeout (600 s) unless the server closes one to make
    # room: being served within PATIENCE_S can only come from that.
    with memory_http_server(
        "--db", str(tmp_path / "runs.db"), "--max-connections", "20", "--read-timeout", "600"
    ) as url:
        host, port = _address(url)
        idle = [_connect(host, port) for _ in range(150)]
        try:
            _served(url)
        finally:
            for sock in idle:
                sock.close()


def _open(sock: socket.socket) -> bool:
    """Whether the other end has not closed ``sock`` (nothing was ever sent on it)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)


def test_a_connection_that_sends_nothing_is_closed_after_the_read_timeout(tmp_path: Path) -> None:
    # Two servers, one with a 1 s read timeout and one with 40 s (the default is 10 s): the first connection must be
    # closed, no sooner than its timeout, while the other is still open. The clock of a busy machine runs late for
    # both alike, so this holds at any load, and fails if the setting is ignored (both close at the default) or if
    # nothing closes an idle connection (uvicorn alone waits forever).
    with (
        memory_http_server("--db", str(tmp_path / "runs.db"), "--read-timeout", "1") as url,
        memory_http_server("--db", str(tmp_path / "patient.db"), "--read-timeout", "40") as patient_url,
    ):
        patient = _connect(*_address(patient_url))
        sock = _connect(*_address(url))
        started = time.monotonic()
        assert _closed_by_server(sock)
        assert time.monotonic() - started >= 0.9  # not before its time out (less the clock's resolution)
        assert _open(patient), "the connection with a 40 s read timeout was closed as soon as the 1 s one"
        patient.close()


def test_headers_trickled_slowly_are_cut_off_and_a_real_client_is_still_served(tmp_path: Path) -> None:
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--read-timeout", "2", "--max-connections", "30") as url:
        host, port = _address(url)
        stop = threading.Event()
        socks = [_connect(host, port) for _ in range(60)]
        cut: list[bool] = []

        def trickle(sock: socket.socket) -> None:
            try:
                sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                while not stop.is_set():
                    sock.sendall(b"X-Slow: a\r\n")
                    time.sleep(0.3)
            except OSError:
                cut.append(True)

        threads = [threading.Thread(target=trickle, args=(s,), daemon=True) for s in socks]
        for thread in threads:
            thread.start()
        try:
            _served(url)
            # Each trickler is cut at its 2 s read timeout, or never (a head's time is not reset by each line).
            deadline = time.monotonic() + PATIENCE_S
            while len(cut) < len(socks) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert len(cut) == len(socks)
        finally:
            stop.set()
            for sock in socks:
                sock.close()


def test_a_request_head_that_never_ends_is_cut_off_at_its_size_limit(tmp_path: Path) -> None:
    # A read timeout ten times the test's patience: the connection closed within it was cut at its size.
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--read-timeout", str(10 * PATIENCE_S)) as url:
        host, port = _address(url)
        sock = _connect(host, port)
        with contextlib.suppress(OSError):
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * (4 << 20))
        assert _closed_by_server(sock)
        sock.close()
        _served(url)


def _serve_with_few_files(db: Path, limit: int, *args: str) -> subprocess.Popen[str]:
    """`pau-mcp serve --transport http ARGS` with at most ``limit`` open files (RLIMIT_NOFILE)."""
    launcher = (
        "import os, resource, sys; "
        f"resource.setrlimit(resource.RLIMIT_NOFILE, ({limit}, {limit})); os.execv(sys.argv[1], sys.argv[1:])"
    )
    command = [sys.executable, "-m", "pau_mcp", "serve", "--transport", "http", "--port", "0", "--db", str(db), *args]
    return subprocess.Popen(
        [sys.executable, "-c", launcher, *command], cwd=ROOT, stderr=subprocess.PIPE, text=True, env=dict(os.environ)
    )


def test_the_connection_cap_stays_below_the_open_file_limit(tmp_path: Path) -> None:
    # Out of files, the server could accept no one until the idle connections' read timeout freed some: at 600 s, a
    # client served within PATIENCE_S shows the cap kept files free.
    process = _serve_with_few_files(tmp_path / "runs.db", 256, "--read-timeout", "600")
    idle: list[socket.socket] = []
    try:
        assert process.stderr is not None
        url = None
        for line in process.stderr:
            found = re.search(r"serving at (http://\S+)", line)
            if found:
                url = found.group(1)
                break
        assert url, "the server did not start"
        stderr = process.stderr  # narrowed above; a lambda would see the attribute, which may be None
        threading.Thread(target=lambda: [None for _ in stderr], daemon=True).start()
        host, port = _address(url)
        idle = [_connect(host, port) for _ in range(400)]
        _served(url)
        assert process.poll() is None
    finally:
        for sock in idle:
            sock.close()
        process.terminate()
        process.wait(timeout=30)


# -- one request must not stall everyone -------------------------------------------------------------------------


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_another_sessions_ping_answers_promptly_while_the_largest_allowed_calls_run(tmp_path: Path) -> None:
    latencies: list[float] = []
    loop_spent: list[float] = []

    async def heavy(url: str, arguments: dict[str, Any]) -> None:
        async with streamable_http_client(url) as (read, write, *_), ClientSession(read, write) as session:
            await session.initialize()
            for _ in range(3):
                await session.call_tool(TOOL, arguments)

    async def main(url: str, loop_thread: int) -> None:
        async with streamable_http_client(url) as (read, write, *_), ClientSession(read, write) as pinger:
            await pinger.initialize()
            before = thread_cpu_seconds(loop_thread)
            async with anyio.create_task_group() as group:
                group.start_soon(heavy, url, {"arg0": "x" * 1_000_000})  # refused by the argument cap
                group.start_soon(heavy, url, {"args": "(" + "[" * 99 + "1" + "]" * 99 + ",)"})
                group.start_soon(heavy, url, {"arg0": list(range(12_000))})  # just under 64 KiB
                group.start_soon(heavy, url, {"args": "(" + repr(list(range(11_000))) + ",)"})
                await anyio.sleep(0.3)
                for _ in range(20):
                    started = time.perf_counter()
                    with anyio.fail_after(PATIENCE_S):
                        await pinger.send_ping()
                    latencies.append(time.perf_counter() - started)
                    await anyio.sleep(0.02)
            loop_spent.append(thread_cpu_seconds(loop_thread) - before)

    # The server shares this process with every test before it: a full collection of that heap, due whenever its
    # allocations tip it, runs in whichever thread allocates then, and once charged the loop 0.49 s in a CI run
    # (its pings still answered within 40 ms). Frozen, the collector scans only what is made from here on.
    gc.collect()
    gc.freeze()
    try:
        with memory_http_server("--db", str(tmp_path / "runs.db"), "--budget", "0") as url:
            (server,) = [thread for thread in threading.enumerate() if thread.name == "memory-http-server"]
            assert server.native_id is not None
            anyio.run(main, url, server.native_id)
    finally:
        gc.unfreeze()
    # A ping stalls when the server's event loop is busy with a large call; the loop runs in the server's thread, so
    # its CPU over the twelve calls is held (measured: 0.08-0.09 s at load 10 on 2 cores), not the pings' wall time,
    # which a busy machine stretches with the loop free. Any stall of a third of a second would show.
    assert loop_spent[0] < 0.4, (loop_spent, max(latencies))


def test_sixteen_sessions_of_calls_at_the_argument_limit_do_not_starve_another_sessions_ping(tmp_path: Path) -> None:
    # Each such call's arguments take one C call of 15-50 ms to parse, holding the interpreter lock: sixteen at once
    # in sixteen threads kept the event loop from it, and another session's ping waited 1.0-1.7 s (0.7 s at p90 on a
    # loaded machine). They are now parsed in a process of the sandbox's own. A bound on starvation, not a speed
    # test: docs/benchmarks.md has the measured numbers.
    assert len(json.dumps({"args": "(" + repr(list(range(10_900))) + ",)"}, separators=(",", ":"))) < 64 * 1024
    baseline: list[float] = []
    latencies: list[float] = []

    async def main(url: str) -> None:
        async with streamable_http_client(url) as (read, write, *_), ClientSession(read, write) as pinger:
            await pinger.initialize()
            for _ in range(20):  # the same pings before the load: what this machine gives them now
                started = time.perf_counter()
                with anyio.fail_after(PATIENCE_S):
                    await pinger.send_ping()
                baseline.append(time.perf_counter() - started)
                await anyio.sleep(0.05)
            load = subprocess.Popen(
                [sys.executable, "-c", LARGE_CALLS, url, TOOL, "16"], stderr=subprocess.DEVNULL, cwd=ROOT
            )
            try:
                await anyio.sleep(3)  # every session open and calling
                assert load.poll() is None, "the load generator ended early"
                for _ in range(30):
                    started = time.perf_counter()
                    with anyio.fail_after(PATIENCE_S):
                        await pinger.send_ping()
                    latencies.append(time.perf_counter() - started)
                    await anyio.sleep(0.05)
            finally:
                load.kill()
                load.wait()

    # Sixteen sessions of one credential: past the default per-credential session cap, which is not under test here.
    with http_server("--db", str(tmp_path / "runs.db"), "--budget", "0", "--max-sessions-per-credential", "32") as url:
        anyio.run(main, url)
    latencies.sort()
    usual = statistics.median(baseline)
    # Ratios to the same pings before the load, not seconds: a busy machine stretches both alike. Measured at load
    # 10-11 on 2 cores: a median 3 times the baseline's, nine in ten within 9 times; with the large literals parsed
    # in the server's process (--workers 0, one at a time), 10 and 51 times; before the fix (sixteen at once in
    # threads), a median of 186 ms and nine in ten within 0.47-0.69 s, some 40 and 100 times an idle server's ping.
    assert latencies[len(latencies) // 2] < 10 * usual, (usual, latencies)
    assert latencies[len(latencies) * 9 // 10] < 40 * usual, (usual, latencies)


# -- pipelining ----------------------------------------------------------------------------------------------------


def _listed(url: str) -> float:
    """The main token holder's 2026-07-28 tools/list: its round trip, in seconds."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "legitimate", "version": "1"},
    }  # fmt: skip
    started = time.perf_counter()
    reply = _post(
        url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}},
        authorization=f"Bearer {TOKEN}", **{"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"},
    )  # fmt: skip
    assert reply.status_code == 200, reply.text[:300]
    return time.perf_counter() - started


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_flood_of_pipelined_requests_never_read_costs_the_server_little_and_stalls_nobody(tmp_path: Path) -> None:
    # 200 connections each writing 400 requests without a credential and never reading (15 MB, 0.01 s of the
    # attacker's CPU) cost the server 7-9 s of CPU; the next legitimate request waited 15 s here (5 s in the issue).
    from loadgen import PIPELINE_FLOOD
    from replicas import Replica

    replica = Replica(["--token", TOKEN, "--db", str(tmp_path / "runs.db")])
    try:
        host, port = _address(replica.url)
        _listed(replica.url)
        before = cpu_seconds(replica.process.pid)
        flood = subprocess.Popen(
            [sys.executable, "-c", PIPELINE_FLOOD, host, str(port), "/mcp", "200", "400"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert flood.stdin is not None
        try:
            during = []
            for _ in range(8):
                during.append(_listed(replica.url))
                time.sleep(0.2)
            assert flood.stdout is not None and flood.stdout.readline().startswith("sent")
        finally:
            flood.stdin.close()
            flood.wait(timeout=60)
        after = [_listed(replica.url) for _ in range(3)]
        spent = cpu_seconds(replica.process.pid) - before
    finally:
        replica.stop()
    # Each connection has at most 8 requests answered before it is closed: a small part of the 80,000. The stall
    # came from that CPU (7-9 s of it, in the event loop), so the CPU bound is what proves nobody is stalled; the
    # round trips (each answered 200 within _post's minute) are only shown, as their wall time on a busy machine
    # says more about the machine than the server.
    assert spent < 2.5, (spent, during, after)
