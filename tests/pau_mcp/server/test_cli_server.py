"""`pau-mcp call`, `pau-mcp methods` and `pau-mcp runs`, run as a user runs them: the command group in the test's
process (`run_pau`), and a `pau-mcp call` in a process of its own."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import anyio
import pytest
from conftest import ROOT, memory_session, tool_of
from mcp.shared.exceptions import MCPError
from pau_command import Ran, run_pau, run_pau_process

from pau_mcp.contract import ToolStatus
from wasm_runtime import Sandbox


def pau(*args: str, db: Path | None = None, process: bool = False) -> Ran:
    """Run ``pau-mcp ARGS [--db DB]``: in this process, or in a process of its own."""
    extra = ["--db", str(db)] if db is not None else []
    return (run_pau_process if process else run_pau)(*args, *extra, env=dict(os.environ), cwd=ROOT)


def test_call_runs_the_same_path_as_a_tool_and_is_recorded(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    ok = pau("call", tool_of("builtin/b001"), "(-23,)", db=db, process=True)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("test_func(-23) returned -6")
    by_id = pau("call", "builtin/b001", "(105,)", db=db)
    assert "returned 5" in by_id.stdout
    refused = pau("call", "builtin/b001", "(__import__('os'),)", db=db)
    assert refused.returncode == 1 and "literal" in refused.stdout
    unknown = pau("call", "fn_nonexistent", "(1,)", db=db)
    assert unknown.returncode == 2 and "pau-mcp methods" in unknown.stderr
    shown = pau("runs", "show", "cli", "--json", db=db)
    calls = json.loads(shown.stdout)["calls"]
    assert [c["arguments"] for c in calls if c["counted"]] == ["(-23,)", "(105,)"]


def test_call_on_a_method_of_a_suite_it_does_not_serve_names_the_suite_option(tmp_path: Path, sandbox: Sandbox) -> None:
    from pau_mcp.manifests import Case, Method, Provenance, Suite, SuiteInfo, Tags
    from pau_mcp.manifests.checks import freeze_method

    suite = Suite.create(tmp_path / "suites", SuiteInfo(name="mine"))
    method = Method(
        id="mine/twice", header="def test_func(arg0):", params=["arg0"], source="def test_func(arg0):\n    return 2 * arg0\n",
        description="Doubles arg0.", provenance=Provenance(dataset="test"), tags=Tags(arity=1),
        examples=[Case(input="(2,)")], tests=[Case(input="(3,)")],
    )  # fmt: skip
    suite.save(freeze_method(method, sandbox))
    suites = ("--manifests", str(tmp_path / "suites"))

    unserved = pau("call", "mine/twice", "(4,)", *suites, db=tmp_path / "runs.db")

    assert unserved.returncode == 2
    assert "suite 'mine'" in unserved.stderr and "add --suite mine" in unserved.stderr
    served = pau("call", "mine/twice", "(4,)", *suites, "--suite", "mine", db=tmp_path / "runs.db")
    assert served.returncode == 0 and "returned 8" in served.stdout
    unknown = pau("call", "mine/thrice", "(4,)", *suites, db=tmp_path / "runs.db")
    assert unknown.returncode == 2 and "pau-mcp methods" in unknown.stderr and "--suite" in unknown.stderr


def test_call_stops_its_sandbox_when_it_returns(tmp_path: Path) -> None:
    """`call` also runs inside other programs (a notebook, a script, these tests): what it opened ends with it."""
    before = {thread.ident for thread in threading.enumerate()}
    for literal, code in (("(-23,)", 0), ("(__import__('os'),)", 1)):
        assert pau("call", "builtin/b001", literal, db=tmp_path / "runs.db").returncode == code
    left = [t.name for t in threading.enumerate() if t.ident not in before and t.name.startswith("pau-sandbox")]
    assert left == []


def test_methods_lists_what_a_server_would_expose() -> None:
    listed = pau("methods", "--json", "--methods", "builtin/b001,builtin/b002")
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [r["id"] for r in rows] == ["builtin/b001", "builtin/b002"]
    assert all(r["tool"].startswith("fn_") and r["header"].startswith("def test_func(") for r in rows)
    assert "description" not in rows[0] and "source" not in rows[0]


def test_runs_export_writes_the_reference_predictions_layout(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    tool = tool_of("builtin/b001")

    async def session() -> None:
        async with memory_session("--db", str(db), "--run", "export-me") as client:
            await client.call_tool(tool, {"arg0": 12})
            await client.call_tool(tool, {"args": "(-3,)"})
            await client.call_tool(tool, {"args": "bad("})
            await client.call_tool("submit", {"method": tool, "description": "product of nonzero digits"})

    anyio.run(session)
    listed = pau("runs", "list", "--json", db=db)
    runs = [json.loads(line) for line in listed.stdout.splitlines()]
    assert runs[0]["name"] == "export-me" and runs[0]["calls"] == 3 and runs[0]["submissions"] == 1
    out = tmp_path / "predictions.jsonl"
    exported = pau("runs", "export", "export-me", "-o", str(out), db=db)
    assert exported.returncode == 0
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["id"] == "builtin/b001"
    assert record["predicted_description"] == "product of nonzero digits"
    assert record["num_queries"] == 2
    assert record["all_examples"] == [["(12,)", "2"], ["(-3,)", "-3"]]
    missing = pau("runs", "export", "nope", db=db)
    assert missing.returncode == 1 and "export-me" in missing.stderr


def test_runs_show_prints_agents_text_literally_without_markup_or_terminal_escapes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # a wide table: no cell is wrapped, so each text is found whole
    db = tmp_path / "runs.db"
    tool = tool_of("builtin/b001")
    hostile = "[bold red]LOUD[/bold red] \x1b]0;pwned\x07 \x1b[2J\x9b31m \u202e reversed\nsecond line"

    async def session() -> None:
        async with memory_session("--db", str(db), "--run", "hostile") as client:
            await client.call_tool(tool_of("builtin/b002"), {"arg0": "[link=http://x]click[/link]\x1b[5m"})
            await client.call_tool(tool, {"args": "bad( [blink]x[/blink]"})
            await client.call_tool("submit", {"method": tool, "description": hostile, "code": "[red]x\x1b[0m"})

    anyio.run(session)
    shown = pau("runs", "show", "hostile", db=db)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "[bold red]LOUD[/bold red]" in out and "[blink]x[/blink]" in out and "[link=http://x]" in out
    assert not any(ch in out for ch in "\x1b\x07\x9b\u202e")
    assert "\\x1b]0;pwned\\x07" in out and "\\x1b[2J" in out and "\\u202e" in out
    assert "second line" in out
    as_json = json.loads(pau("runs", "show", "hostile", "--json", db=db).stdout)
    assert as_json["submissions"][0]["description"] == hostile  # the JSON keeps the text exactly


def test_runs_list_and_show_print_long_run_and_session_names_whole_in_a_100_column_terminal(tmp_path: Path) -> None:
    from pau_mcp.runstore import CallRecord, RunStore

    run = "builtin-paper-interactive-openai-gpt-4o-mini-2024-07-18-temperature-0.7"
    key = f"{run}/builtin/b001/1"
    store = RunStore(tmp_path / "runs.db")
    session = store.ensure_session(store.ensure_run(run, kind="eval"), key, "http")
    store.record_call(session, CallRecord("builtin/b001", "fn_x", "(1,)", True, ToolStatus.OK, value="1"))
    store.close()
    env = {**os.environ, "COLUMNS": "100"}

    listed = run_pau("runs", "list", "--db", tmp_path / "runs.db", env=env, cwd=ROOT)
    shown = run_pau("runs", "show", run, "--db", tmp_path / "runs.db", env=env, cwd=ROOT)

    assert listed.returncode == 0 and shown.returncode == 0, listed.stderr + shown.stderr
    assert "…" not in listed.stdout and "…" not in shown.stdout
    assert any(run in line.split() for line in listed.stdout.splitlines())
    assert any(key in line.split() for line in shown.stdout.splitlines())


def test_the_production_server_has_no_benchmark_only_tool(tmp_path: Path) -> None:
    result = pau("serve", "--benchmark-noop", db=tmp_path / "runs.db")
    assert result.returncode == 2 and "--benchmark-noop" in result.stderr

    async def main() -> None:
        async with memory_session("--db", str(tmp_path / "runs.db")) as session:
            names = [t.name for t in (await session.list_tools()).tools]
            assert "noop" not in names and {"submit", "open"} <= set(names)
            with pytest.raises(MCPError, match="Unknown tool 'noop'"):
                await session.call_tool("noop", {})

    anyio.run(main)
