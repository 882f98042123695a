"""The connection guard every HTTP service runs behind (``pau_mcp.guard``), on a real socket with uvicorn.

The MCP server's and the scorer's own tests attack it through each service (tests/pau_mcp/server/test_http_limits.py,
tests/pau_mcp/scoring/test_scorer_connections.py); here is what neither service can easily show: a newcomer when
every connection is busy with a request."""

from __future__ import annotations

import asyncio
import contextlib
import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.auto import AutoHTTPProtocol
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from pau_mcp.guard import MAX_HEAD_BYTES, MAX_PIPELINED, connection_guard
from pau_mcp.listening import listening_socket, uvicorn_server

ROOT = Path(__file__).resolve().parents[2]
BUSY = json.dumps({"error": "the service's own words"}).encode()
BIG = 16 * 1024 * 1024


@contextlib.contextmanager
def _guarded(
    cap: int,
    release: threading.Event,
    entered: threading.Semaphore,
    read_timeout_s: float = 30,
    base: type[asyncio.Protocol] = AutoHTTPProtocol,
) -> Iterator[tuple[str, int]]:
    """A guarded uvicorn on loopback whose ``/slow`` answers only once ``release`` is set (``entered`` is released as
    each ``/slow`` request reaches the app), and whose ``/big`` answers 16 MB."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                kind = (await receive())["type"]
                await send({"type": f"{kind}.complete"})
                if kind == "lifespan.shutdown":
                    return
        if scope["path"] == "/early":  # refused before its body is read, as a 413 or a 415 is
            await send({"type": "http.response.start", "status": 413, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        if scope["path"] == "/big":
            body = b"b" * BIG
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-length", str(BIG).encode())]}
            )
            await send({"type": "http.response.body", "body": body})
            return
        if scope["path"] == "/slow":
            entered.release()
            while not release.is_set():
                await asyncio.sleep(0.02)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    sock = listening_socket("127.0.0.1", 0)
    server = uvicorn_server(app, http=connection_guard(base, cap, read_timeout_s, BUSY))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve([sock])), daemon=True)
    thread.start()
    try:
        while not server.started:
            thread.join(0.02)
            assert thread.is_alive(), "uvicorn did not start"
        yield sock.getsockname()
    finally:
        release.set()
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def _request(address: tuple[str, int], path: str) -> socket.socket:
    sock = socket.create_connection(address, timeout=10)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    return sock


def _answer(sock: socket.socket) -> bytes:
    data = b""
    with contextlib.suppress(OSError):
        while chunk := sock.recv(65536):
            data += chunk
            if data.endswith(b"ok") or data.endswith(b"}"):
                break
    return data


def test_when_every_connection_is_busy_a_newcomer_gets_503_with_the_services_body() -> None:
    release, entered = threading.Event(), threading.Semaphore(0)
    with _guarded(4, release, entered) as address:
        busy = [_request(address, "/slow") for _ in range(4)]
        assert all(entered.acquire(timeout=10) for _ in busy)  # each one's request is in: busy, not waiting
        try:
            refused = _answer(_request(address, "/"))
            head, _, body = refused.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 503") and b"retry-after: 1" in head.lower()
            assert body == BUSY
            release.set()
            assert all(_answer(sock).endswith(b"ok") for sock in busy)
            assert _answer(_request(address, "/")).endswith(b"ok")
        finally:
            for sock in busy:
                sock.close()


def test_an_idle_connection_makes_room_for_a_newcomer_before_any_is_refused() -> None:
    release, entered = threading.Event(), threading.Semaphore(0)
    with _guarded(4, release, entered) as address:
        busy = [_request(address, "/slow") for _ in range(3)]
        assert all(entered.acquire(timeout=10) for _ in busy)
        idle = socket.create_connection(address, timeout=10)
        try:
            assert _answer(_request(address, "/")).endswith(b"ok")
            idle.settimeout(10)
            assert idle.recv(1) == b""  # closed to make room
        finally:
            for sock in [*busy, idle]:
                sock.close()


def test_the_mcp_server_and_the_scorer_use_the_one_guard() -> None:
    users = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "pau_mcp").rglob("*.py")
        if "guarded_protocol(" in path.read_text() and path.name != "guard.py"
    )
    assert users == ["pau_mcp/scoring/http.py", "pau_mcp/server/transport.py"]
    copies = [str(p.relative_to(ROOT)) for p in (ROOT / "pau_mcp").rglob("*.py") if "def _pau_drop" in p.read_text()]
    assert copies == ["pau_mcp/guard.py"]


def test_an_answer_sent_before_the_body_was_read_reaches_a_client_that_goes_on_sending() -> None:
    release, entered = threading.Event(), threading.Semaphore(0)
    with _guarded(8, release, entered) as address:
        for _ in range(3):
            sock = socket.create_connection(address, timeout=10)
            try:
                sock.sendall(
                    b"POST /early HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-length: 4000000\r\n\r\n" + b"x" * 1024
                )
                assert select.select([sock], [], [], 10)[0], "no answer"
                # Answered already; the client, as most do, sends the rest of its body before it reads.
                sock.sendall(b"x" * (4_000_000 - 1024))
                answer = b""
                while chunk := sock.recv(65536):  # a reset here would lose the answer
                    answer += chunk
                assert answer.startswith(b"HTTP/1.1 413")
            finally:
                sock.close()


def _answers(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    data = b""
    with contextlib.suppress(OSError):
        while chunk := sock.recv(65536):
            data += chunk
    return data


def test_a_client_pipelining_a_few_requests_gets_every_answer_in_order() -> None:
    release, entered = threading.Event(), threading.Semaphore(0)
    with _guarded(8, release, entered) as address:
        with socket.create_connection(address, timeout=10) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 3 + b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         b"Connection: close\r\n\r\n")  # fmt: skip
            assert _answers(sock).count(b"HTTP/1.1 200") == 4


def test_a_connection_pipelining_past_the_bound_gets_the_answers_already_in_and_is_closed() -> None:
    # 200 connections each writing 400 requests and never reading cost the MCP server 7-9 s of CPU: every request a
    # read brought in was parsed at once and answered in turn, whatever the client did with the answers.
    release, entered = threading.Event(), threading.Semaphore(0)
    with _guarded(8, release, entered) as address:
        with socket.create_connection(address, timeout=10) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 400)
            answers = _answers(sock)  # the server closes the connection
        assert answers.count(b"HTTP/1.1 200") == MAX_PIPELINED
        assert _answer(_request(address, "/")).endswith(b"ok")  # everyone else is served as before


def test_a_client_that_leaves_its_answers_unread_is_closed_after_the_read_timeout() -> None:
    release, entered = threading.Event(), threading.Semaphore(0)
    with _guarded(8, release, entered, read_timeout_s=1) as address:
        with socket.create_connection(address, timeout=30) as sock:
            sock.sendall(b"GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            time.sleep(4)  # reads nothing: the answer fills every buffer, and the transport pauses writing
            received = _answers(sock)
        # Closed while most of the answer was still unsent: it did not wait for this client to read it all.
        assert received.startswith(b"HTTP/1.1 200") and len(received) < BIG / 2


#: uvicorn's two HTTP parsers: httptools' (its default when httptools is installed, as here) and h11's.
PARSERS = pytest.mark.parametrize("base", [HttpToolsProtocol, H11Protocol], ids=["httptools", "h11"])


def _head(size: int, headers: int = 1) -> bytes:
    """A GET whose head is about ``size`` bytes, in ``headers`` headers of equal length."""
    line = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    each = max(1, (size - len(line) - 2) // headers - len(b"X-Pad-0000: \r\n"))
    return line + b"".join(b"X-Pad-%04d: " % n + b"a" * each + b"\r\n" for n in range(headers)) + b"\r\n"


def _refused_or_closed(sock: socket.socket, data: bytes, chunk: int | None = None) -> bytes:
    """Send ``data`` (at once, or ``chunk`` bytes at a time with Nagle off); what the server answered."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with contextlib.suppress(OSError):  # the server may close the connection before all is sent
        if chunk is None:
            sock.sendall(data)
        else:
            for start in range(0, len(data), chunk):
                sock.sendall(data[start : start + chunk])
                time.sleep(0.001)
    return _answers(sock)


@PARSERS
@pytest.mark.parametrize(
    ("size", "headers", "chunk"),
    [(100_000, 1, None), (100_000, 200, None), (100_000, 1, 1024), (100_000, 50, 997), (1 << 20, 1000, None)],
    ids=["one-header-one-chunk", "many-headers-one-chunk", "small-chunks", "many-headers-small-chunks", "megabyte"],
)
def test_a_request_head_over_the_limit_gets_431_however_it_is_chunked(
    base: type[asyncio.Protocol], size: int, headers: int, chunk: int | None
) -> None:
    # A 100 KB head in one TCP chunk went through the httptools parser unchecked: the guard counted a head only while
    # it was still incomplete after a read, and one read brought all of it in.
    release, entered = threading.Event(), threading.Semaphore(0)
    with _guarded(8, release, entered, base=base) as address:
        for _ in range(2):
            with socket.create_connection(address, timeout=10) as sock:
                answer = _refused_or_closed(sock, _head(size, headers), chunk)
            assert answer == b"" or answer.startswith(b"HTTP/1.1 431"), answer[:200]
            assert b"HTTP/1.1 200" not in answer
            assert _answer(_request(address, "/")).endswith(b"ok")  # and the server answers everyone else at once


@PARSERS
def test_a_request_head_just_under_the_limit_is_served_whole_or_in_pieces(base: type[asyncio.Protocol]) -> None:
    release, entered = threading.Event(), threading.Semaphore(0)
    with _guarded(8, release, entered, base=base) as address:
        for chunk in (None, 1024):
            head = _head(MAX_HEAD_BYTES - 1024, 40)
            assert len(head) <= MAX_HEAD_BYTES
            with socket.create_connection(address, timeout=10) as sock:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                for start in range(0, len(head), chunk or len(head)):
                    sock.sendall(head[start : start + (chunk or len(head))])
                assert _answer(sock).endswith(b"ok")


@PARSERS
def test_a_pipelined_request_head_over_the_limit_gets_431_after_the_answer_before_it(
    base: type[asyncio.Protocol],
) -> None:
    release, entered = threading.Event(), threading.Semaphore(0)
    with _guarded(8, release, entered, base=base) as address:
        with socket.create_connection(address, timeout=10) as sock:
            answers = _refused_or_closed(sock, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" + _head(100_000, 100))
        assert answers.count(b"HTTP/1.1 200") == 1 and b"HTTP/1.1 431" in answers, answers[:400]
        assert _answer(_request(address, "/")).endswith(b"ok")
