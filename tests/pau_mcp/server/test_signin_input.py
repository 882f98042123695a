"""Bad input at a signed-in server's edge (`serve --auth oauth`): malformed Authorization headers, oversized tokens,
and an issuer whose key set is huge or slow. Each gets a bounded refusal in one line, and none stalls another
request. The issuer is tests/keyserver.py, served over loopback HTTP."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import pytest
from conftest import memory_http_server
from keyserver import RESOURCE, KeyServer, key_server

from pau_mcp.tls import shared_context

MAIN = "main-token-0123456789"


@pytest.fixture
def issuer() -> Iterator[KeyServer]:
    with key_server() as server:
        yield server


def _serve(issuer: KeyServer, tmp_path: Path) -> AbstractContextManager[str]:
    return memory_http_server(
        "--auth", "oauth", "--issuer", issuer.issuer, "--resource", RESOURCE, "--token", MAIN,
        "--db", str(tmp_path / "runs.db"), "--methods", "builtin/b001",
    )  # fmt: skip


MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
}


def _post(url: str, authorization: str | None) -> httpx2.Response:
    """A 2026-07-28 ``tools/list`` (200 when it is let in)."""
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/list",
    }
    if authorization is not None:
        headers["authorization"] = authorization
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}
    return httpx2.post(url, json=body, headers=headers, timeout=60, verify=shared_context())


def _line(reply: httpx2.Response, status: int, words: str) -> None:
    assert reply.status_code == status, (reply.status_code, reply.text)
    line = reply.json()["error_description"]
    assert words in line and "\n" not in line, line
    assert reply.headers["www-authenticate"].startswith("Bearer ")


def _raw(url: str, authorization: bytes) -> httpx2.Response:
    """A POST with an Authorization header no HTTP client library would send, over a plain socket."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        head = f"POST /mcp HTTP/1.1\r\nHost: {parts.netloc}\r\nconnection: close\r\ncontent-length: 2\r\n".encode()
        sock.sendall(head + b"Authorization: " + authorization + b"\r\n\r\n{}")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return httpx2.Response(int(lines[0].split()[1]), headers=headers, content=body)


@pytest.mark.parametrize(
    ("header", "status", "words"),
    [
        ("Bearer", 400, "'Bearer ' followed by one token"),
        ("Bearer ", 400, "'Bearer ' followed by one token"),
        ("Bearer two tokens", 400, "'Bearer ' followed by one token"),
        ("Bearer tok\u00e9n", 400, "'Bearer ' followed by one token"),
        ("Bearertoken", 400, "'Bearer ' followed by one token"),
        ("Basic dXNlcjpwYXNz", 401, "Bearer tokens only"),
        ("bearer " + "a" * 20_000, 401, "at most 16,384"),
    ],
)
def test_a_malformed_authorization_header_gets_one_clear_line(
    issuer: KeyServer, tmp_path: Path, header: str, status: int, words: str
) -> None:
    with _serve(issuer, tmp_path) as url:
        _line(_raw(url, header.encode("utf-8")), status, words)
        assert _post(url, f"Bearer {MAIN}").status_code == 200  # and the server carries on


def test_a_40_kb_token_is_refused_unread_and_the_server_carries_on(issuer: KeyServer, tmp_path: Path) -> None:
    with _serve(issuer, tmp_path) as url:
        _line(_post(url, "Bearer " + "a" * 40_000), 401, "the token is 40,000 characters; this server reads at most")
        assert _post(url, f"Bearer {MAIN}").status_code == 200


def test_a_100_kb_token_is_past_the_request_head_limit_and_the_server_carries_on(
    issuer: KeyServer, tmp_path: Path
) -> None:
    # A request head holds at most 64 KiB (431 beyond, pau_mcp/guard.py), however it reaches the server: a 100 KB
    # Authorization header, written at once, used to slip past that limit and reach the sign-in.
    with _serve(issuer, tmp_path) as url:
        assert _post(url, "Bearer " + "a" * 100_000).status_code == 431
        assert _post(url, f"Bearer {MAIN}").status_code == 200


def test_a_huge_key_set_is_a_bounded_refusal(issuer: KeyServer, tmp_path: Path) -> None:
    issuer.mode = "huge"
    with _serve(issuer, tmp_path) as url:
        _line(_post(url, f"Bearer {issuer.token()}"), 401, "over 262,144 bytes")


def test_a_slow_key_set_stalls_no_other_request(issuer: KeyServer, tmp_path: Path) -> None:
    """A token whose key must be fetched from an issuer answering a byte a second waits for the fetch's time limit
    and is refused; meanwhile requests with the main token, and with a token of a key already held, are answered."""
    issuer.mode = "slow"
    done: list[str] = []
    with _serve(issuer, tmp_path) as url:

        def slow() -> None:
            reply = _post(url, f"Bearer {issuer.token()}")
            done.append(f"slow {reply.status_code} {reply.json()['error_description']}")

        waiting = threading.Thread(target=slow)
        waiting.start()
        deadline = time.monotonic() + 30
        while issuer.jwks_requests == 0 and time.monotonic() < deadline:  # the fetch has begun
            time.sleep(0.01)
        for _ in range(5):
            reply = _post(url, f"Bearer {MAIN}")
            done.append(f"main {reply.status_code}")
        waiting.join(60)
    assert done[:5] == ["main 200"] * 5, done
    assert done[5].startswith("slow 401") and "did not answer within 5 s" in done[5], done
