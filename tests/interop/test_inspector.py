"""The MCP Inspector's CLI (2.x, on the Node 22 that .ci/run installs under .ci/node) against a real `pau-mcp serve`:
the commands docs/clients.md gives, over stdio and over HTTP with a session token and with the main token and a label.
Each command is a new connection (over stdio a new server process, whose budget starts again)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from interop_support import (
    INSPECTOR,
    NODE_BIN,
    ROOT,
    TOOL,
    clients,
    counted_calls,
    http_server,
    issue_token,
    node22,
    submissions,
)

pytestmark = pytest.mark.interop


def _inspector(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {**node22(), "HOME": str(home)}  # the Inspector writes under $HOME/.mcp-inspector
    return subprocess.run(
        [str(NODE_BIN / "node"), str(INSPECTOR), "--cli", "--connect-timeout", "120000", *args],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=environment,
    )  # fmt: skip


def _stdio(data_dir: Path, *serve: str) -> list[str]:
    """The server command as docs/clients.md writes it; -e passes what the Inspector does not (its child gets a
    minimal environment)."""
    import os

    from wasm_runtime import default_cache_dir

    keep = {
        "PAU_MCP_TOOL_KEY": os.environ["PAU_MCP_TOOL_KEY"],
        "PAU_MCP_DATA_DIR": str(data_dir),
        # The built sandbox, found again although the Inspector runs with another HOME.
        "PAU_MCP_CACHE_DIR": os.environ.get("PAU_MCP_CACHE_DIR") or str(default_cache_dir()),
    }
    passed = [arg for name, value in keep.items() for arg in ("-e", f"{name}={value}")]
    return [*passed, sys.executable, "-m", "pau_mcp", "serve", "--methods", "builtin/b001", *serve]


def test_the_inspector_lists_portable_schemas_and_sends_typed_arguments_over_stdio(
    data_dir: Path, tmp_path: Path
) -> None:
    listed = _inspector(tmp_path, *_stdio(data_dir), "--method", "tools/list")
    assert listed.returncode == 0, listed.stderr
    assert "portability" not in listed.stderr.lower(), listed.stderr
    tools = {t["name"]: t for t in json.loads(listed.stdout)["tools"]}
    assert TOOL in tools and "submit" in tools
    strict = _inspector(tmp_path, *_stdio(data_dir), "--method", "tools/list", "--strict")
    assert strict.returncode == 0 and "Warning" not in strict.stderr, strict.stderr
    called = _inspector(
        tmp_path, *_stdio(data_dir), "--method", "tools/call", "--tool-name", TOOL, "--tool-arg", "arg0=234"
    )
    assert called.returncode == 0, called.stderr
    result = json.loads(called.stdout)
    assert result["structuredContent"]["status"] == "ok" and result["structuredContent"]["value"] == "24"
    assert "test_func(234) returned 24" in result["content"][0]["text"]


@pytest.mark.parametrize("credential", ["session-token", "main-token"])
def test_the_inspector_over_http_calls_runs_into_the_budget_and_submits(
    data_dir: Path, tmp_path: Path, credential: str
) -> None:
    if credential == "session-token":
        label, bearer = "inspector", issue_token(data_dir, "inspector", "--run", "interop")
        header = ["--transport", "http", "--header", f"Authorization: Bearer {bearer}"]
    else:
        label, bearer = "inspector-main", "main-token-0123456789"
        header = ["--transport", "http", "--header", f"Authorization: Bearer {bearer}", "--header",
                  f"X-PAU-Session: {label}"]  # fmt: skip
    with http_server(data_dir, "--token", "main-token-0123456789", "--budget", "2") as url:
        listed = _inspector(tmp_path, url, *header, "--method", "tools/list")
        calls = [
            _inspector(tmp_path, url, *header, "--method", "tools/call", "--tool-name", TOOL, "--tool-arg", f"arg0={v}")
            for v in (234, 57, 105)
        ]
        submitted = _inspector(
            tmp_path, url, *header, "--method", "tools/call", "--tool-name", "submit",
            "--tool-arg", f"method={TOOL}", "--tool-arg", "description=the product of the digits",
        )  # fmt: skip
        unauthorised = _inspector(tmp_path, url, "--transport", "http", "--method", "tools/list")
    assert listed.returncode == 0 and "portability" not in listed.stderr.lower(), listed.stderr
    assert all(c.returncode == 0 for c in calls), [c.stderr for c in calls]
    statuses = [json.loads(c.stdout)["structuredContent"]["status"] for c in calls]
    assert statuses == ["ok", "ok", "over_budget"]
    assert json.loads(submitted.stdout)["structuredContent"]["status"] == "recorded"
    assert unauthorised.returncode != 0
    assert counted_calls(data_dir) == [(label, 2, 3)]
    assert submissions(data_dir) == [("builtin/b001", "the product of the digits")]
    assert [c.split("; ")[-1] for c in clients(data_dir)] == [
        "MCP 2025-11-25"
    ]  # the Inspector 2.12 speaks the handshake


def test_the_docs_mark_the_inspector_recipes_that_need_inspector_2_and_say_how_to_run_them_on_node_20() -> None:
    """On Node 20 npx picks Inspector 0.15.0, which has no --strict and no --header: a user must be told which
    recipes need 2.x, and how to get it there."""
    text = (ROOT / "docs" / "clients.md").read_text(encoding="utf-8")
    section = text.split("## MCP Inspector (CLI mode)", 1)[1].split("\n## ", 1)[0]
    marked = []
    for block in section.split("```bash")[1:]:
        lines = block.split("```", 1)[0].replace("\\\n", " ").splitlines()
        for before, line in zip(["", *lines], lines, strict=False):
            if line.startswith("npx "):
                needs_2 = "--strict" in line or "--header" in line
                assert ("Inspector 2.x only" in before) == needs_2, line
                marked.append(needs_2)
    assert marked.count(True) == 2 and marked.count(False) == 2
    assert "0.15.0" in section
    assert "npx -y -p node@22 -p @modelcontextprotocol/inspector@2.12.0 -- mcp-inspector" in section
