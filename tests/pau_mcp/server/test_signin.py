"""`pau-mcp serve --auth oauth` against a real authorization server the tests start (npm oidc-provider 9.x on Node 22,
tests/authserver.py): tokens it issues are accepted for exactly their scopes and audience, every bad one is refused
with the right status and one line, and a subject's budget is one budget whatever host, client or token carries it.
"""

from __future__ import annotations

import contextlib
import socket
import sqlite3
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, cast

import anyio
import httpx2
import pytest
from authserver import ALL_SCOPES, AuthServer, authorization_server, client, confidential, signing_key
from conftest import TEST_KEY, memory_http_server, tool_of
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import RequestParamsMeta
from postgres_server import PostgresServer
from replicas import replicas

from pau_mcp.runstore import RunStore
from pau_mcp.server import TokenSigner
from pau_mcp.tls import shared_context

RESOURCE = "https://contest.example/mcp"
OTHER = "https://other.example/mcp"
INTROSPECTED = "https://introspected.example/mcp"
EXPIRING = "https://expiring.example/mcp"
CALLBACK = "http://127.0.0.1:9/callback"
B001 = "builtin/b001"
TOOL = tool_of(B001)
MAIN = "main-token-0123456789"

BOT_A = confidential("team-a-bot", "client_credentials")
BOT_B = confidential("team-b-bot", "client_credentials")
INTROSPECTOR = confidential("pau-introspector", "client_credentials")
#: Two hosts (say Claude and VS Code) a person signs in with.
HOST_ONE = confidential("host-one", "authorization_code", "refresh_token", redirect_uris=[CALLBACK])
HOST_TWO = confidential("host-two", "authorization_code", "refresh_token", redirect_uris=[CALLBACK])


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthServer]:
    resources: dict[str, dict[str, Any]] = {
        RESOURCE: {"scope": ALL_SCOPES},
        OTHER: {"scope": ALL_SCOPES},
        INTROSPECTED: {"scope": ALL_SCOPES, "format": "opaque"},
        EXPIRING: {"scope": ALL_SCOPES, "ttl": 2},
    }
    clients = [BOT_A, BOT_B, INTROSPECTOR, HOST_ONE, HOST_TWO]
    with authorization_server(tmp_path_factory.mktemp("issuer"), resources, clients) as server:
        yield server


def _serve(issuer: AuthServer, db: Path, *args: str, resource: str = RESOURCE) -> AbstractContextManager[str]:
    return memory_http_server(
        "--auth", "oauth", "--issuer", issuer.issuer, "--resource", resource, "--db", str(db), "--run", "contest",
        "--methods", B001, "--budget", "3", *args,
    )  # fmt: skip


def _post(url: str, token: str | None, **headers: str) -> httpx2.Response:
    """A raw tools/list of the 2026-07-28 era; the refusals come before the body is read."""
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    return httpx2.post(
        url,
        json=body,
        headers={"accept": "application/json, text/event-stream", **headers},
        timeout=60,
        verify=shared_context(),
    )


async def _call(
    url: str, token: str, values: list[int], mode: str = "2026-07-28", label: str | None = None
) -> list[dict[str, Any]]:
    """The official client with the token, calling b001 with each value (naming ``label`` on the URL); the
    structured results."""
    target = url + (f"?session={label}" if label else "")
    with anyio.fail_after(120):
        async with httpx2.AsyncClient(
            verify=shared_context(), headers={"Authorization": f"Bearer {token}"}, timeout=60
        ) as http:
            async with Client(streamable_http_client(target, http_client=http), mode=mode) as mcp:
                return [(await mcp.call_tool(TOOL, {"arg0": v})).structured_content or {} for v in values]


def _sessions(db: Path) -> list[tuple[str, str, str, int]]:
    """``(key, credential, client, counted calls)`` of every session of the contest run."""
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT s.key, s.credential, s.client, (SELECT COUNT(*) FROM calls c WHERE c.session_id = s.id AND c.counted)"
            " FROM sessions s ORDER BY s.id"
        ).fetchall()


def _store_text(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return "\n".join(
            str(row) for table in ("sessions", "calls", "runs") for row in conn.execute(f"SELECT * FROM {table}")
        )


def test_a_client_credentials_token_calls_tools_on_its_subjects_budget(issuer: AuthServer, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    token = issuer.token(client(BOT_A), RESOURCE, "explore")
    with _serve(issuer, db) as url:
        results = anyio.run(_call, url, token, [234, 57, 105, 11])
    assert [r["status"] for r in results] == ["ok", "ok", "ok", "over_budget"]
    assert results[0]["budget_scope"] == "subject"
    [(key, credential, who, counted)] = _sessions(db)
    assert (key, credential, counted) == ("team-a-bot", "subject", 3)
    assert "OAuth client team-a-bot" in who
    assert token not in _store_text(db)  # the subject is recorded, never the token


def test_a_person_signed_in_from_two_hosts_and_refreshing_spends_one_budget(issuer: AuthServer, tmp_path: Path) -> None:
    """Authorization code with PKCE, as a host does it: the same person from two OAuth clients, then a refreshed
    token, then a re-issued one: one budget of 3 in all."""
    db = tmp_path / "runs.db"
    first = issuer.authorization_code(client(HOST_ONE), CALLBACK, RESOURCE, f"offline_access {ALL_SCOPES}", "team-c")
    second = issuer.authorization_code(client(HOST_TWO), CALLBACK, RESOURCE, "explore", "team-c")
    refreshed = issuer.refresh(client(HOST_ONE), first["refresh_token"], RESOURCE)
    assert refreshed["access_token"] != first["access_token"]
    with _serve(issuer, db) as url:
        one = anyio.run(_call, url, first["access_token"], [234])
        two = anyio.run(_call, url, second["access_token"], [57], "legacy")
        three = anyio.run(_call, url, refreshed["access_token"], [105, 11])
    assert [r["queries_used"] for r in one + two + three[:1]] == [1, 2, 3]
    assert three[1]["status"] == "over_budget"
    [(key, credential, _, counted)] = _sessions(db)
    assert (key, credential, counted) == ("team-c", "subject", 3)


def test_two_subjects_have_two_budgets_and_the_main_and_session_tokens_keep_working(
    issuer: AuthServer, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    session_token = TokenSigner(TEST_KEY).issue("agent-7", run="contest")
    with _serve(issuer, db, "--token", MAIN) as url:
        a = anyio.run(_call, url, issuer.token(client(BOT_A), RESOURCE, "explore"), [1, 2])
        b = anyio.run(_call, url, issuer.token(client(BOT_B), RESOURCE, "explore"), [1])
        main = anyio.run(_call, url, MAIN, [1], "2026-07-28", "alice")
        session = anyio.run(_call, url, session_token, [1])
    assert [r["queries_used"] for r in a + b + main + session] == [1, 2, 1, 1, 1]
    assert {(key, credential) for key, credential, _, _ in _sessions(db)} == {
        ("team-a-bot", "subject"), ("team-b-bot", "subject"), ("alice", "label"), ("agent-7", "token"),
    }  # fmt: skip


def test_without_a_token_the_server_answers_401_naming_its_metadata_which_names_the_issuer(
    issuer: AuthServer, tmp_path: Path
) -> None:
    with _serve(issuer, tmp_path / "runs.db") as url:
        reply = _post(url, None)
        base = url.removesuffix("/mcp")
        metadata = [
            httpx2.get(base + path, timeout=30, verify=shared_context())
            for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource")
        ]
    assert reply.status_code == 401
    challenge = reply.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and 'scope="explore"' in challenge
    assert 'resource_metadata="https://contest.example/.well-known/oauth-protected-resource/mcp"' in challenge
    for answer in metadata:
        assert answer.status_code == 200
        assert answer.json()["resource"] == RESOURCE
        assert answer.json()["authorization_servers"] == [issuer.issuer]
        assert answer.json()["scopes_supported"] == ["explore", "score", "operate"]


def _refused(reply: httpx2.Response, status: int, words: str) -> str:
    assert reply.status_code == status, (reply.status_code, reply.text)
    line: str = reply.json()["error_description"]
    assert "\n" not in line and words in line, line
    assert words in reply.headers["www-authenticate"]
    return line


def test_bad_tokens_are_refused_with_401_and_one_line_each(issuer: AuthServer, tmp_path: Path) -> None:
    intruder = issuer.token(client(BOT_A), OTHER, "explore")
    id_token = issuer.id_token(client(HOST_ONE), CALLBACK, RESOURCE)
    with _serve(issuer, tmp_path / "runs.db") as url:
        _refused(_post(url, intruder), 401, "not this resource")  # a token for another resource
        _refused(_post(url, id_token), 401, "for the audience 'host-one'")  # an ID token: the wrong audience
        _refused(_post(url, "not-a-jwt"), 401, "not a JWT")
        reply = _post(url, "x" * 40_000)
        _refused(reply, 401, "at most 16,384")
    assert 'error="invalid_token"' in reply.headers["www-authenticate"]


def test_an_expired_token_is_refused(issuer: AuthServer, tmp_path: Path) -> None:
    token = issuer.token(client(BOT_A), EXPIRING, "explore")
    with _serve(issuer, tmp_path / "runs.db", "--clock-skew", "0", resource=EXPIRING) as url:
        assert anyio.run(_call, url, token, [1])[0]["status"] == "ok"
        deadline = time.monotonic() + 60  # the token lives 2 s
        while (reply := _post(url, token)).status_code != 401 and time.monotonic() < deadline:
            time.sleep(0.2)
    _refused(reply, 401, "the token expired")


def test_a_token_without_the_scope_gets_403_naming_the_scope_needed(issuer: AuthServer, tmp_path: Path) -> None:
    scorer_only = issuer.token(client(BOT_A), RESOURCE, "score")
    explorer = issuer.token(client(BOT_A), RESOURCE, "explore")
    with _serve(issuer, tmp_path / "runs.db") as url:
        reply = _post(url, scorer_only)
        named = _post(url + "?session=alice", explorer)
        by_header = _post(url, explorer, **{"X-PAU-Run": "other"})
    _refused(reply, 403, "needs the scope 'explore'")
    assert 'error="insufficient_scope"' in reply.headers["www-authenticate"]
    assert 'scope="explore"' in reply.headers["www-authenticate"]
    for refused in (named, by_header):
        _refused(refused, 403, "needs the scope 'operate'")
        assert 'scope="operate"' in refused.headers["www-authenticate"]


def test_an_operate_token_names_labels_as_the_main_token_does(issuer: AuthServer, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    operator = issuer.token(client(BOT_A), RESOURCE, "operate")
    with _serve(issuer, db) as url:
        alice = anyio.run(_call, url, operator, [1, 2], "2026-07-28", "alice")
        own = anyio.run(_call, url, operator, [1])
    assert [r["queries_used"] for r in alice + own] == [1, 2, 1]
    assert [r["budget_scope"] for r in alice + own] == ["label", "label", "subject"]


def test_an_explore_token_naming_a_label_in_meta_is_refused(issuer: AuthServer, tmp_path: Path) -> None:
    explorer = issuer.token(client(BOT_A), RESOURCE, "explore")

    async def named_in_meta(url: str) -> str:
        async with httpx2.AsyncClient(
            verify=shared_context(), headers={"Authorization": f"Bearer {explorer}"}, timeout=60
        ) as http:
            async with Client(streamable_http_client(url, http_client=http), mode="2026-07-28") as mcp:
                with pytest.raises(Exception) as refused:
                    # The SDK's _meta is an open map (a TypedDict with extra_items=Any), which mypy reads as closed.
                    meta = cast(RequestParamsMeta, {"dev.pau-mcp/session": "alice"})
                    await mcp.call_tool(TOOL, {"arg0": 1}, meta=meta)
                return str(refused.value)

    with _serve(issuer, tmp_path / "runs.db") as url:
        assert "needs the 'operate' scope" in anyio.run(named_in_meta, url)


def test_a_revoked_token_is_refused_by_introspection(issuer: AuthServer, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    token = issuer.token(client(BOT_A), INTROSPECTED, "explore")
    other = issuer.token(client(BOT_A), OTHER, "explore")
    assert token.count(".") == 0  # opaque: only introspection can check it
    args = (
        "--introspection-client",
        INTROSPECTOR["client_id"],
        "--introspection-secret",
        INTROSPECTOR["client_secret"],
    )
    with _serve(issuer, db, *args, resource=INTROSPECTED) as url:
        assert anyio.run(_call, url, token, [1])[0]["status"] == "ok"
        issuer.revoke(client(BOT_A), token)
        _refused(_post(url, token), 401, "not active")
        _refused(_post(url, other), 401, "introspection refused the token")  # a JWT for another resource
    [(key, credential, _, counted)] = _sessions(db)
    assert (key, credential, counted) == ("team-a-bot", "subject", 1)  # no sub: the client signed in as itself


def test_one_subject_signed_in_at_two_replicas_on_postgresql_spends_one_budget(
    issuer: AuthServer, postgres: PostgresServer
) -> None:
    """Two replicas on one PostgreSQL run store; the same team signs in from two hosts, each host talking to its own
    replica, 12 calls at once on a budget of 5: exactly 5 run, and the store has one session for the team."""
    store = str(postgres.create_database("signin_replicas"))
    one = issuer.authorization_code(client(HOST_ONE), CALLBACK, RESOURCE, "explore", "team-d")["access_token"]
    two = issuer.authorization_code(client(HOST_TWO), CALLBACK, RESOURCE, "explore", "team-d")["access_token"]
    args = ["--auth", "oauth", "--issuer", issuer.issuer, "--resource", RESOURCE, "--db", store, "--run", "contest",
            "--methods", B001, "--budget", "5", "--workers", "1"]  # fmt: skip

    async def spend(urls: list[str]) -> list[dict[str, Any]]:
        results: list[dict[str, Any]] = []

        async def host(url: str, token: str) -> None:
            async with httpx2.AsyncClient(
                verify=shared_context(), headers={"Authorization": f"Bearer {token}"}, timeout=120
            ) as http:
                async with Client(streamable_http_client(url, http_client=http), mode="2026-07-28") as mcp:
                    async with anyio.create_task_group() as group:
                        for value in range(6):
                            group.start_soon(_append, mcp, value)

        async def _append(mcp: Client, value: int) -> None:
            results.append((await mcp.call_tool(TOOL, {"arg0": value})).structured_content or {})

        with anyio.fail_after(240):
            async with anyio.create_task_group() as group:
                group.start_soon(host, urls[0], one)
                group.start_soon(host, urls[1], two)
        return results

    with replicas(2, args) as started:
        results = anyio.run(spend, [r.url for r in started])
    assert sorted(r["queries_used"] for r in results if r["status"] == "ok") == [1, 2, 3, 4, 5]
    assert [r["status"] for r in results].count("over_budget") == 7
    opened = RunStore(store)
    try:
        record = opened.export_session("contest", "team-d")
        assert record is not None and sum(1 for c in record.calls if c["counted"]) == 5
    finally:
        opened.close()
    import psycopg

    with psycopg.connect(store) as conn:
        assert conn.execute("SELECT key, credential FROM sessions").fetchall() == [("team-d", "subject")]


def test_with_the_authorization_server_down_cached_keys_keep_working_and_an_unknown_kid_is_refused(
    tmp_path: Path,
) -> None:
    """The issuer's keys are fetched at the first token and kept: with the authorization server gone, its tokens keep
    working; a token signed with a key the server never saw (the issuer came back with new keys, then went away
    again) is refused in one line."""
    resources = {RESOURCE: {"scope": ALL_SCOPES}}
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with contextlib.ExitStack() as running:
        first = running.enter_context(
            authorization_server(tmp_path, resources, [BOT_A], keys=[signing_key("old")], port=port)
        )
        old = first.token(client(BOT_A), RESOURCE, "explore")
        url = running.enter_context(_serve(first, tmp_path / "runs.db"))
        assert anyio.run(_call, url, old, [1])[0]["status"] == "ok"  # the keys are fetched and kept
        assert first.process.stdin is not None
        first.process.stdin.close()  # the authorization server goes away
        first.process.wait(30)
        assert anyio.run(_call, url, old, [2])[0]["status"] == "ok"
        with authorization_server(tmp_path, resources, [BOT_A], keys=[signing_key("new")], port=port) as second:
            new = second.token(client(BOT_A), RESOURCE, "explore")
        _refused(_post(url, new), 401, "key id 'new', which is not among the issuer's signing keys")
