"""Handshake-era MCP sessions are capped per credential as well as overall: one session-token holder (or one label of
the main token) cannot take every session slot of the server, and whatever it changes between requests it is still
the one credential. Tried by a hostile client with its own HTTP client: sessions that are never idle (each holds an
open stream, as the official client's do), labels and runs on the URL, and a stream of new sessions."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from conftest import TEST_KEY, memory_http_server, served, tool_of

from pau_mcp.config import Settings
from pau_mcp.server import TokenSigner
from pau_mcp.tls import shared_context

MAIN = "main-token-0123456789"
TOOL = tool_of("builtin/b001")
ACCEPT = "application/json, text/event-stream"
VERSION = "2025-06-18"
INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "hostile", "version": "1"}},
}  # fmt: skip


def _token(label: str, run: str | None = None) -> str:
    return TokenSigner(TEST_KEY).issue(label, run=run)


class _Client:
    """One hostile client: opens handshake-era sessions with a bearer token, and keeps them busy or lets them idle."""

    def __init__(self, url: str, bearer: str | None, **query: str) -> None:
        self.url = url
        self.query = query
        self.headers = {"accept": ACCEPT, **({"authorization": f"Bearer {bearer}"} if bearer else {})}
        self.http = httpx2.Client(verify=shared_context(), timeout=30)
        self.streams = contextlib.ExitStack()

    def open(self, busy: bool = False, **query: str) -> httpx2.Response:
        """Open a session (``initialize`` and ``initialized``); with ``busy``, hold a GET stream open on it."""
        reply = self.http.post(self.url, params={**self.query, **query}, headers=self.headers, json=INITIALIZE)
        if reply.status_code != 200:
            return reply
        session = reply.headers["mcp-session-id"]
        headers = {**self.headers, "mcp-session-id": session, "mcp-protocol-version": VERSION}
        done = self.http.post(self.url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert done.status_code == 202, done.text
        if busy:
            stream = self.streams.enter_context(
                self.http.stream("GET", self.url, headers={**headers, "accept": "text/event-stream"})
            )
            assert stream.status_code == 200, stream.status_code
        return reply

    def call(self, session: str, arguments: dict[str, Any]) -> httpx2.Response:
        headers = {**self.headers, "mcp-session-id": session, "mcp-protocol-version": VERSION}
        body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": TOOL, "arguments": arguments}}
        return self.http.post(self.url, headers=headers, json=body)

    def delete(self, session: str) -> int:
        headers = {**self.headers, "mcp-session-id": session, "mcp-protocol-version": VERSION}
        return self.http.delete(self.url, headers=headers).status_code

    def close(self) -> None:
        self.streams.close()
        self.http.close()


@contextlib.contextmanager
def _clients(url: str) -> Iterator[list[_Client]]:
    made: list[_Client] = []
    try:
        yield made
    finally:
        for client in made:
            client.close()


def _refused_for_its_credential(reply: httpx2.Response) -> str:
    assert reply.status_code == 429, (reply.status_code, reply.text)
    assert int(reply.headers["retry-after"]) >= 1
    message: str = reply.json()["error"]["message"]
    assert "\n" not in message
    return message


@pytest.mark.parametrize("main_token", [MAIN, None], ids=["with --token", "loopback without a token"])
def test_one_session_token_cannot_take_every_session_and_another_token_still_gets_one(
    tmp_path: Path, main_token: str | None
) -> None:
    args = ("--db", str(tmp_path / "runs.db"), "--max-sessions", "20", *(("--token", main_token) if main_token else ()))
    with memory_http_server(*args) as url, _clients(url) as clients:
        hog = _Client(url, _token("hog"))
        clients.append(hog)
        opened = [hog.open(busy=True).status_code for _ in range(30)]
        assert opened == [200] * 8 + [429] * 22
        message = _refused_for_its_credential(hog.open(busy=True))
        assert "--max-sessions-per-credential" in message and "PAU_MCP_MAX_SESSIONS_PER_CREDENTIAL" in message
        assert "DELETE" in message and "no new budget" in message

        other = _Client(url, _token("other"))
        clients.append(other)
        reply = other.open()
        assert reply.status_code == 200
        called = other.call(reply.headers["mcp-session-id"], {"arg0": 5})
        assert called.status_code == 200 and served(called.json())


def test_anonymous_local_clients_of_a_loopback_server_without_a_token_are_not_capped_per_credential(
    tmp_path: Path,
) -> None:
    # Every tokenless client of a loopback server is the one anonymous credential: twenty of them holding streams
    # (hosts, inspectors, agents, the conformance suite) must all get in, up to the server's own cap.
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--max-sessions", "30") as url, _clients(url) as clients:
        local = _Client(url, None)
        clients.append(local)
        assert [local.open(busy=True).status_code for _ in range(20)] == [200] * 20
        # A label or a run named on the URL is a credential of its own again, capped as before.
        labelled = _Client(url, None, session="agent-1")
        clients.append(labelled)
        assert [labelled.open(busy=True).status_code for _ in range(9)] == [200] * 8 + [429]
        # Up to the server's cap, and there it gets the server's 503, never a 429.
        assert [local.open(busy=True).status_code for _ in range(2)] == [200, 200]
        full = local.open(busy=True)
        assert full.status_code == 503 and "--max-sessions" in full.json()["error"]["message"]


def test_anonymous_clients_of_a_server_with_a_token_keep_the_cap_per_credential(tmp_path: Path) -> None:
    args = ("--db", str(tmp_path / "runs.db"), "--token", MAIN, "--max-sessions-per-credential", "3")
    with memory_http_server(*args) as url, _clients(url) as clients:
        unlabelled = _Client(url, MAIN)
        clients.append(unlabelled)
        assert [unlabelled.open(busy=True).status_code for _ in range(4)] == [200, 200, 200, 429]


def test_changing_the_url_label_or_run_does_not_escape_a_session_tokens_cap(tmp_path: Path) -> None:
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--token", MAIN) as url, _clients(url) as clients:
        hog = _Client(url, _token("hog", run="contest"))
        clients.append(hog)
        assert [hog.open(busy=True).status_code for _ in range(8)] == [200] * 8
        for query in ({"session": "fresh"}, {"run": "another"}, {"session": "x", "run": "y"}):
            _refused_for_its_credential(hog.open(busy=True, **query))
        # The same label in another run is another credential, with a cap of its own.
        elsewhere = _Client(url, _token("hog", run="elsewhere"))
        clients.append(elsewhere)
        assert elsewhere.open(busy=True).status_code == 200


def test_each_label_of_the_main_token_has_a_cap_of_its_own(tmp_path: Path) -> None:
    args = ("--db", str(tmp_path / "runs.db"), "--token", MAIN, "--max-sessions-per-credential", "3")
    with memory_http_server(*args) as url, _clients(url) as clients:
        alice = _Client(url, MAIN, session="alice")
        unlabelled = _Client(url, MAIN)
        clients += [alice, unlabelled]
        assert [alice.open(busy=True).status_code for _ in range(4)] == [200, 200, 200, 429]
        # The same label named in a header instead of the URL is the same credential.
        by_header = _Client(url, MAIN)
        by_header.headers["x-pau-session"] = "alice"
        clients.append(by_header)
        _refused_for_its_credential(by_header.open(busy=True))
        assert alice.open(busy=True, session="bob").status_code == 200  # the URL's last word: label bob
        assert [unlabelled.open(busy=True).status_code for _ in range(4)] == [200, 200, 200, 429]


def test_a_credentials_own_idle_sessions_make_room_for_its_new_ones(tmp_path: Path) -> None:
    args = ("--db", str(tmp_path / "runs.db"), "--token", MAIN, "--max-sessions-per-credential", "3")
    with memory_http_server(*args) as url, _clients(url) as clients:
        agent = _Client(url, _token("agent"))
        clients.append(agent)
        idle = [agent.open().headers["mcp-session-id"] for _ in range(3)]
        fourth = agent.open()  # the longest idle of its own three is closed to make room
        assert fourth.status_code == 200
        assert agent.call(idle[0], {"arg0": 1}).status_code == 404
        assert all(agent.call(s, {"arg0": 1}).status_code == 200 for s in [*idle[1:], fourth.headers["mcp-session-id"]])

        # Ended sessions leave no count behind: after DELETE, three busy sessions fit again.
        for session in [*idle[1:], fourth.headers["mcp-session-id"]]:
            assert agent.delete(session) == 200
        assert [agent.open(busy=True).status_code for _ in range(4)] == [200, 200, 200, 429]


def test_at_the_servers_cap_a_credential_reclaims_its_own_idle_session_before_anyone_elses(tmp_path: Path) -> None:
    args = ("--db", str(tmp_path / "runs.db"), "--token", MAIN, "--max-sessions", "4", "--session-idle", "600")
    with memory_http_server(*args) as url, _clients(url) as clients:
        others = _Client(url, _token("others"))
        agent = _Client(url, _token("agent"))
        clients += [others, agent]
        theirs = [others.open().headers["mcp-session-id"] for _ in range(3)]
        mine = agent.open().headers["mcp-session-id"]
        assert agent.open().status_code == 200  # the server is full: the agent's own idle session goes
        assert agent.call(mine, {"arg0": 1}).status_code == 404
        assert all(others.call(s, {"arg0": 1}).status_code == 200 for s in theirs)
        # A credential with nothing of its own to give up waits for the server's cap to free up (503, as before).
        newcomer = _Client(url, _token("newcomer"))
        clients.append(newcomer)
        full = newcomer.open()
        assert full.status_code == 503 and "--max-sessions" in full.json()["error"]["message"]


def test_the_cap_per_credential_is_a_setting_with_a_flag_and_a_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().max_sessions_per_credential == 8
    monkeypatch.setenv("PAU_MCP_MAX_SESSIONS_PER_CREDENTIAL", "2")
    assert Settings.from_env().max_sessions_per_credential == 2
    monkeypatch.setenv("PAU_MCP_MAX_SESSIONS_PER_CREDENTIAL", "0")
    with pytest.raises(ValueError, match="--max-sessions-per-credential / PAU_MCP_MAX_SESSIONS_PER_CREDENTIAL"):
        Settings.from_env()
