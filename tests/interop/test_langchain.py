"""langchain-mcp-adapters against a real `pau-mcp serve`, from a virtual environment of its own (0.3.2 pins
``mcp<2``, so it speaks the handshake era): its default tools open a new MCP session for every call, so over HTTP a
session token, or a label in the URL with the main token, keeps one budget; over stdio one `client.session(...)`
keeps one server, and a server per call says so in every result."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from interop_support import (
    CLIENT_VENVS,
    ROOT,
    TOOL,
    client_venv,
    clients,
    counted_calls,
    env,
    http_server,
    issue_token,
    submissions,
)

pytestmark = pytest.mark.interop

SCRIPT = Path(__file__).with_name("langchain_client.py")
CALLS = [{"arg0": 234}, {"arg0": 57}, {"args": "(105,)"}, {"arg0": 106}]


def _langchain(spec: dict[str, Any]) -> dict[str, Any]:
    python = client_venv("langchain", CLIENT_VENVS["langchain"])
    done = subprocess.run(
        [str(python), str(SCRIPT), json.dumps(spec)], capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen: dict[str, Any] = json.loads(done.stdout)
    return seen


def _stdio(data_dir: Path) -> dict[str, Any]:
    return {
        "transport": "stdio",
        "command": sys.executable,
        "args": ["-m", "pau_mcp", "serve", "--db", str(data_dir / "runs.db"), "--methods", "builtin/b001",
                 "--budget", "3", "--run", "langchain"],
        "env": env(data_dir),
        "cwd": str(ROOT),
    }  # fmt: skip


def test_langchain_default_tools_over_http_with_a_session_token_share_one_budget(data_dir: Path) -> None:
    token = issue_token(data_dir, "langchain-agent", "--run", "interop")
    with http_server(data_dir, "--token", "main-token-0123456789", "--budget", "3") as url:
        connection = {"transport": "streamable_http", "url": url, "headers": {"Authorization": f"Bearer {token}"}}
        seen = _langchain({"connection": connection, "tool": TOOL, "calls": CALLS, "mode": "default"})
    assert seen["tools"] == sorted([TOOL, "submit", "open"])
    assert seen["schema"]["properties"]["arg0"]["type"] == "integer"
    statuses = [r["structured"]["status"] for r in seen["results"]]
    assert statuses == ["ok", "ok", "ok", "over_budget"]
    assert [r["structured"]["queries_used"] for r in seen["results"]] == [1, 2, 3, 3]
    assert all(r["structured"]["budget_scope"] == "token" for r in seen["results"])
    assert "test_func(234) returned 24" in seen["results"][0]["text"]
    assert seen["results"][3]["status"] == "success" and "spent" in seen["results"][3]["text"]
    assert seen["submit"]["structured"]["status"] == "recorded"
    assert counted_calls(data_dir) == [("langchain-agent", 3, 4)]
    assert submissions(data_dir) == [("builtin/b001", "the product of the digits")]
    assert {c.split("; ")[-1] for c in clients(data_dir)} == {"MCP 2025-11-25"}


def test_langchain_default_tools_over_http_with_the_main_token_and_a_label_share_one_budget(data_dir: Path) -> None:
    main = "main-token-0123456789"
    with http_server(data_dir, "--token", main, "--budget", "3") as url:
        connection = {
            "transport": "streamable_http", "url": f"{url}?session=langchain-main",
            "headers": {"Authorization": f"Bearer {main}"},
        }  # fmt: skip
        seen = _langchain({"connection": connection, "tool": TOOL, "calls": CALLS, "mode": "default"})
    assert [r["structured"]["status"] for r in seen["results"]] == ["ok", "ok", "ok", "over_budget"]
    assert all(r["structured"]["budget_scope"] == "label" for r in seen["results"])
    assert seen["results"][3]["status"] == "success" and "spent" in seen["results"][3]["text"]
    assert seen["submit"]["structured"]["status"] == "recorded"
    assert counted_calls(data_dir) == [("langchain-main", 3, 4)]


def test_langchain_with_one_session_over_stdio_keeps_one_budget(data_dir: Path) -> None:
    seen = _langchain({"connection": _stdio(data_dir), "tool": TOOL, "calls": CALLS, "mode": "session"})
    assert [r["structured"]["status"] for r in seen["results"]] == ["ok", "ok", "ok", "over_budget"]
    assert "new server" in seen["results"][0]["text"] and "new server" not in seen["results"][1]["text"]
    assert seen["submit"]["structured"]["status"] == "recorded"
    assert [(counted, total) for _, counted, total in counted_calls(data_dir)] == [(3, 4)]


def test_langchain_default_tools_over_stdio_see_a_new_server_in_every_result(data_dir: Path) -> None:
    """The set-up to avoid, made visible: each call starts a server whose first reply says its count starts again."""
    seen = _langchain({"connection": _stdio(data_dir), "tool": TOOL, "calls": CALLS[:2], "mode": "default"})
    for result in seen["results"]:
        assert result["structured"]["status"] == "ok" and result["structured"]["queries_used"] == 1
        assert "1 of 3 in this server process" in result["text"] and "new server" in result["text"]
