"""What ``submit`` tells an agent about its submission: its own count, never the store's id, nor where the store is."""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
from conftest import ROOT, TEST_KEY, memory_http_server, text_of, tool_of
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from pau_mcp.runstore import RunStore
from pau_mcp.server import TokenSigner
from pau_mcp.tls import shared_context

B001 = tool_of("builtin/b001")
MAIN = "main-token-0123456789"


async def _submit(url: str, token: str, times: int) -> list[dict[str, Any]]:
    async with httpx2.AsyncClient(
        verify=shared_context(), headers={"Authorization": f"Bearer {token}"}, timeout=60
    ) as client:
        async with streamable_http_client(url, http_client=client) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                receipts: list[dict[str, Any]] = []
                for i in range(times):
                    done = await session.call_tool("submit", {"method": B001, "description": f"guess {i}"})
                    receipts.append({"text": text_of(done.content[0]), **(done.structured_content or {})})
                return receipts


def test_a_receipt_counts_the_credentials_own_submissions_not_everyone_elses(tmp_path: Path) -> None:
    # The receipt carried the store's id: the newcomer's first submission said 4, telling it that others had made 3.
    db = tmp_path / "runs.db"
    signer = TokenSigner(TEST_KEY)
    with memory_http_server("--db", str(db), "--token", MAIN, "--run", "contest") as url:
        first = anyio.run(_submit, url, signer.issue("alice", run="contest"), 3)
        newcomer = anyio.run(_submit, url, signer.issue("bob", run="contest"), 1)
    assert [r["submission"] for r in first] == [1, 2, 3]
    assert newcomer[0]["submission"] == 1 and "your submission 1 of it" in newcomer[0]["text"]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT MAX(id) FROM submissions").fetchone() == (4,)
    # The harness finds the store's submission from the receipt, in its own run store.
    store = RunStore(db)
    try:
        assert store.submission_by_receipt("contest", "bob", "builtin/b001", 1) == 4
        assert store.submission_by_receipt("contest", "alice", "builtin/b001", 2) == 2
        assert store.submission_by_receipt("contest", "alice", "builtin/b001", 4) is None
    finally:
        store.close()


def _limited_serve(db: Path, max_bytes: int) -> StdioServerParameters:
    """`pau-mcp serve` whose files may not grow past ``max_bytes`` (RLIMIT_FSIZE): a disk that fills up."""
    serve = [sys.executable, "-m", "pau_mcp", "serve", "--db", str(db), "--max-submissions", "0"]
    launcher = (
        "import os, resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({max_bytes}, {max_bytes})); os.execv(sys.argv[1], sys.argv[1:])"
    )
    return StdioServerParameters(
        command=sys.executable, args=["-c", launcher, *serve], cwd=str(ROOT), env=dict(os.environ)
    )


def test_a_submit_the_store_cannot_take_says_so_without_naming_the_store(tmp_path: Path) -> None:
    db = tmp_path / "private-store-location" / "runs.db"
    db.parent.mkdir()
    RunStore(db).close()
    replies: list[CallToolResult] = []

    async def main() -> None:
        params = _limited_serve(db, db.stat().st_size + 400_000)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            with anyio.fail_after(120):
                await session.initialize()
                for i in range(40):
                    code = f"# {i}\n" + "x = 1\n" * 16_000
                    replies.append(
                        await session.call_tool("submit", {"method": B001, "description": f"try {i}", "code": code})
                    )
                    if replies[-1].is_error:
                        break

    anyio.run(main)
    failed = [r for r in replies if r.is_error]
    assert failed, "the store never filled up"
    text = text_of(failed[0].content[0])
    assert "not recorded" in text and "did not count" in text, text
    assert "private-store-location" not in text and str(tmp_path) not in text, text
