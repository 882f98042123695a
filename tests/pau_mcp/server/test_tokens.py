"""Session tokens (`pau-mcp token issue`): a budget identity that no new MCP session, connection or label resets.

Tokens are issued by the command run in the test's process (`run_pau`); the servers run in it too
(`memory_http_server`), but for one process end to end (a token check over HTTP of a real `pau-mcp serve`).
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from conftest import ROOT, RawSession, http_server, memory_http_server, ran, served, tool_of
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult
from pau_command import Ran, run_pau

from pau_mcp.tls import shared_context

MAIN = "main-token-0123456789"
B001, B002 = "builtin/b001", "builtin/b002"


def _issue(*args: str, env: dict[str, str] | None = None) -> Ran:
    """``pau-mcp token issue ARGS``, run in this process."""
    return run_pau("token", "issue", *args, env=env if env is not None else dict(os.environ), cwd=ROOT)


def _token(*args: str) -> str:
    issued = _issue(*args)
    assert issued.returncode == 0, issued.stderr
    return issued.stdout.strip()


def _payload(token: str) -> dict[str, Any]:
    body = token.split(".")[1]
    claims: dict[str, Any] = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    return claims


async def _one_call_per_session(url: str, token: str, tool: str, calls: int) -> list[CallToolResult]:
    """Like langchain-mcp-adapters: a new MCP session (and connection) for every tool call."""
    out: list[CallToolResult] = []
    for i in range(calls):
        async with httpx2.AsyncClient(
            verify=shared_context(), headers={"Authorization": f"Bearer {token}"}, timeout=60
        ) as client:
            async with streamable_http_client(url, http_client=client) as (read, write, *_):
                async with ClientSession(read, write) as session:
                    with anyio.fail_after(60):
                        await session.initialize()
                        out.append(await session.call_tool(tool, {"arg0": i}))
    return out


def test_a_session_token_keeps_one_budget_across_new_mcp_sessions(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    token = _token("--label", "agent-7", "--run", "tokens")
    with memory_http_server("--db", str(db), "--token", MAIN, "--budget", "4") as url:
        results = anyio.run(_one_call_per_session, url, token, tool_of(B001), 6)
    assert [ran(r) for r in results] == [True] * 4 + [False] * 2
    assert [r.structured_content["queries_used"] for r in results[:4]] == [1, 2, 3, 4]
    rows = (
        sqlite3.connect(db)
        .execute(
            "SELECT s.key, r.name, SUM(c.counted) FROM calls c JOIN sessions s ON c.session_id = s.id"
            " JOIN runs r ON s.run_id = r.id GROUP BY s.id"
        )
        .fetchall()
    )
    assert rows == [("agent-7", "tokens", 4)]


def test_a_session_token_works_on_a_loopback_server_without_a_main_token(tmp_path: Path) -> None:
    token = _token("--label", "local-agent")
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--budget", "2") as url:
        results = anyio.run(_one_call_per_session, url, token, tool_of(B001), 3)
    assert [ran(r) for r in results] == [True, True, False]


def test_a_session_token_keeps_its_budget_across_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    token = _token("--label", "patient", "--run", "r")
    with memory_http_server("--db", str(db), "--token", MAIN, "--budget", "3") as url:
        first = anyio.run(_one_call_per_session, url, token, tool_of(B001), 2)
    with memory_http_server("--db", str(db), "--token", MAIN, "--budget", "3") as url:
        second = anyio.run(_one_call_per_session, url, token, tool_of(B001), 2)
    assert [ran(r) for r in first + second] == [True, True, True, False]


@pytest.mark.parametrize("stateless", [False, True])
def test_a_session_token_cannot_name_another_label_or_run(tmp_path: Path, stateless: bool) -> None:
    token = _token("--label", "mine", "--run", "r")
    args = ["--db", str(tmp_path / "runs.db"), "--token", MAIN] + (["--stateless"] if stateless else [])
    bearer = {"Authorization": f"Bearer {token}"}
    with memory_http_server(*args) as url:
        attempts = []
        for query, headers in (
            ({"session": "theirs"}, {}),
            ({"run": "other-run"}, {}),
            ({}, {"x-pau-session": "theirs"}),
        ):
            raw = RawSession(url, query=query, headers={**bearer, **headers})
            attempts.append(raw.call(tool_of(B001), {"arg0": 1}, query=query))
            raw.close()
        raw = RawSession(url, query={"session": "mine", "run": "r"}, headers=bearer)
        same = raw.call(tool_of(B001), {"arg0": 1}, query={"session": "mine", "run": "r"})
        raw.close()
    assert not any(served(a) for a in attempts)
    assert all("session token" in a["error"]["message"] for a in attempts)
    assert served(same)


def test_a_label_used_by_a_session_token_is_refused_to_everyone_else(tmp_path: Path) -> None:
    token = _token("--label", "reserved", "--run", "r")
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--token", MAIN) as url:
        owner = RawSession(url, headers={"Authorization": f"Bearer {token}"})
        assert served(owner.call(tool_of(B001), {"arg0": 1}))
        query = {"session": "reserved", "run": "r"}
        squatter = RawSession(url, query=query, headers={"Authorization": f"Bearer {MAIN}"})
        refused = squatter.call(tool_of(B001), {"arg0": 1}, query=query)
        owner.close()
        squatter.close()
    assert not served(refused) and "reserved" in refused["error"]["message"]


def test_stateless_labels_bind_to_the_first_credential_that_used_them(tmp_path: Path) -> None:
    alice, bob = _token("--label", "alice"), _token("--label", "bob")
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--token", MAIN, "--stateless", "--budget", "2") as url:
        as_alice = RawSession(url, headers={"Authorization": f"Bearer {alice}"})
        as_bob = RawSession(url, headers={"Authorization": f"Bearer {bob}"})
        as_main = RawSession(url, headers={"Authorization": f"Bearer {MAIN}"})
        alice_calls = [as_alice.call(tool_of(B001), {"arg0": i}) for i in range(3)]
        bob_calls = [as_bob.call(tool_of(B001), {"arg0": i}) for i in range(3)]
        main_named = as_main.call(tool_of(B001), {"arg0": 1}, query=None, **{"x-pau-session": "shared-label"})
        bob_on_it = as_bob.call(tool_of(B001), {"arg0": 1}, query=None, **{"x-pau-session": "shared-label"})
        main_on_alice = as_main.call(tool_of(B001), {"arg0": 1}, query=None, **{"x-pau-session": "alice"})
        for raw in (as_alice, as_bob, as_main):
            raw.close()
    assert [served(r) for r in alice_calls] == [True, True, False]
    assert [served(r) for r in bob_calls] == [True, True, False]
    assert served(main_named)
    assert not served(bob_on_it) and not served(main_on_alice)


def test_a_session_token_sees_only_the_methods_it_was_issued_for(tmp_path: Path) -> None:
    token = _token("--label", "narrow", "--methods", f"{B001},{tool_of(B002)}")
    assert _payload(token)["methods"] == sorted([tool_of(B001), tool_of(B002)])

    async def main(url: str) -> tuple[list[str], int | None, CallToolResult]:
        async with httpx2.AsyncClient(
            verify=shared_context(), headers={"Authorization": f"Bearer {token}"}, timeout=60
        ) as client:
            async with streamable_http_client(url, http_client=client) as (read, write, *_):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    names = [t.name for t in (await session.list_tools()).tools]
                    try:
                        await session.call_tool(tool_of("builtin/b003"), {"arg0": 1})
                        hidden = None
                    except MCPError as exc:  # as any unknown tool: the protocol's error
                        hidden = exc.error.code
                    opened = await session.call_tool("open", {"methods": [tool_of("builtin/b003")]})
                    return names, hidden, opened

    with memory_http_server("--db", str(tmp_path / "runs.db"), "--token", MAIN) as url:
        names, hidden, opened = anyio.run(main, url)
    assert sorted(names) == sorted(["submit", "open", tool_of(B001), tool_of(B002)])
    assert hidden == -32602 and opened.is_error


def test_forged_tampered_foreign_and_expired_tokens_are_refused_with_401(tmp_path: Path) -> None:
    good = _token("--label", "honest")
    head, body, signature = good.split(".")
    claims = _payload(good) | {"label": "someone-else"}
    forged_body = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    foreign = _issue("--label", "honest", env={**os.environ, "PAU_MCP_TOOL_KEY": "another-deployment-key-42"})
    expired = _token("--label", "late", "--expires-in", "1")
    anyio.run(anyio.sleep, 2.1)
    # A real process: the end-to-end check of token authentication over HTTP.
    with http_server("--db", str(tmp_path / "runs.db"), "--token", MAIN) as url:
        statuses = {}
        for name, token in {
            "tampered": f"{head}.{forged_body}.{signature}",
            "unsigned": f"{head}.{body}.",
            "foreign": foreign.stdout.strip(),
            "expired": expired,
            "not base64": f"{head}.{body}.!!{signature}",
            "huge": f"{head}.{body * 400}.{signature}",
            "no payload": f"{head}..{signature}",
            "good": good,
        }.items():
            reply = httpx2.post(
                url, headers={"Authorization": f"Bearer {token}", "accept": "application/json, text/event-stream"},
                json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}}, verify=shared_context(),
            )  # fmt: skip
            statuses[name] = reply.status_code
    assert statuses == {name: 200 if name == "good" else 401 for name in statuses}


def test_a_forged_token_on_a_server_without_a_main_token_is_refused_too(tmp_path: Path) -> None:
    good = _token("--label", "honest")
    head, body, signature = good.split(".")
    with memory_http_server("--db", str(tmp_path / "runs.db")) as url:
        # Its first character changed: ending it in "AA" instead left the token as it was whenever it already ended
        # so (one run in 4,096; CI met one).
        forged = ("B" if signature[0] == "A" else "A") + signature[1:]
        raw = RawSession(url, headers={"Authorization": f"Bearer {head}.{body}.{forged}"})
        reply = raw.call(tool_of(B001), {"arg0": 1})
        raw.close()
    assert not served(reply) and "session token" in reply["error"]["message"]


def test_the_token_holds_tool_names_and_labels_only_never_a_method_id() -> None:
    token = _token("--label", "reader", "--run", "r", "--methods", "builtin/b001")
    claims = _payload(token)
    assert claims["label"] == "reader" and claims["run"] == "r" and claims["methods"] == [tool_of(B001)]
    assert "builtin" not in json.dumps(claims)


@pytest.mark.parametrize(
    "args, complaint",
    [
        ([], "--label"),
        (["--label", "bad label"], "letters"),
        (["--label", "x", "--methods", "builtin/nope"], "pau-mcp methods"),
        (["--label", "x", "--expires-in", "0"], "--expires-in"),
    ],
)
def test_token_issue_refuses_bad_options_with_advice(args: list[str], complaint: str) -> None:
    result = _issue(*args)
    assert result.returncode != 0 and complaint in result.stderr and "Traceback" not in result.stderr


def test_one_client_cannot_take_over_a_session_opened_with_another_token(tmp_path: Path) -> None:
    alice, bob = _token("--label", "alice"), _token("--label", "bob")
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--token", MAIN) as url:
        owner = RawSession(url, headers={"Authorization": f"Bearer {alice}"})
        hijack = owner.client.post(
            url, headers={**owner.headers, "Authorization": f"Bearer {bob}"},
            json={"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {}},
        )  # fmt: skip
        owner.close()
    assert hijack.status_code == 404


# -- the signer itself, in process --------------------------------------------------------------------------------


def test_a_token_round_trips_and_every_altered_byte_voids_it() -> None:
    from pau_mcp.server import SessionToken, TokenSigner

    signer = TokenSigner("deployment-key-for-unit-tests")
    token = signer.issue("agent-1", run="r", methods=["fn_0000000002", "fn_0000000001"], now=1000, expires_in=60)
    assert signer.verify(token, now=1001) == SessionToken(
        label="agent-1", run="r", methods=("fn_0000000001", "fn_0000000002"), issued_at=1000, expires_at=1060
    )
    assert signer.verify(token, now=1060) is None  # expired
    assert TokenSigner("another-deployment-key-000").verify(token, now=1001) is None
    for i in range(len(token)):
        for replacement in ("A", "-", "."):
            altered = token[:i] + replacement + token[i + 1 :]
            if altered != token:
                assert signer.verify(altered, now=1001) is None, (i, replacement)


@pytest.mark.parametrize("label", ["", " x", "x" * 129, "a\nb", "[bold]", "ä"])
def test_the_signer_refuses_labels_outside_the_label_rule(label: str) -> None:
    from pau_mcp.server import TokenSigner

    with pytest.raises(ValueError, match="letters"):
        TokenSigner("deployment-key-for-unit-tests").issue(label)


def test_a_token_of_another_deployment_is_logged_as_signed_with_another_key_naming_the_key_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # It got a bare "Authentication required" and the log said nothing: an operator could not tell a stale token
    # from an attack or a misconfigured replica.
    from replicas import Replica

    from pau_mcp.server import TokenSigner

    monkeypatch.delenv("PAU_MCP_TOOL_KEY")  # the key file of the data directory, as a deployment has by default
    other = TokenSigner("another-deployment-key-0123456789").issue("agent")
    replica = Replica(["--token", "main-token-0123456789", "--data-dir", str(tmp_path), "--db", str(tmp_path / "r.db")])
    try:
        key = (tmp_path / "tool.key").read_text().strip()
        reply = httpx2.post(
            replica.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"authorization": f"Bearer {other}", "accept": "application/json, text/event-stream"}, verify=shared_context(),
        )  # fmt: skip
        assert reply.status_code == 401
        deadline = time.monotonic() + 30
        while not any("signature does not match" in line for line in replica.lines) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        replica.stop()
    [line] = [line for line in replica.lines if "a session token was refused" in line]
    assert "signature does not match this deployment's key" in line and str(tmp_path / "tool.key") in line
    assert key not in "".join(replica.lines)
