"""`pau-mcp demo` and the probe floor, run as a user runs them: no network, no LLM. The demo runs in a process of its
own (it speaks to its `pau-mcp serve` child over stdio, whose stderr is the demo's); the rest runs the command group
in the test's process (`run_pau`)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from pau_command import Ran, run_pau, run_pau_process

from pau_mcp.manifests import ManifestStore, tool_name

ROOT = Path(__file__).resolve().parents[3]


def pau(*args: str, env: dict[str, str] | None = None, process: bool = False) -> Ran:
    """``pau-mcp ARGS`` in this process (or in a process of its own), with no LLM settings."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "PAU_"))}
    return (run_pau_process if process else run_pau)(*args, env={**clean, **(env or {})}, cwd=ROOT)


def test_the_demo_explores_a_method_through_mcp_submits_and_prints_its_code_match(tmp_path: Path) -> None:
    method = ManifestStore().method("builtin/b005")
    result = pau("demo", "--data-dir", str(tmp_path), process=True)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    key = (tmp_path / "tool.key").read_text().strip()  # created by the demo in its data directory
    assert tool_name(key, method.id) in out and method.header in out
    calls = re.findall(r"^  test_func\(.*\) (?:returned|raised) .*$", out, re.M)
    assert 5 <= len(calls) <= 20
    found = re.search(r"Code match of the memorising baseline: ([0-9.]+)", out)
    assert found is not None, out
    score = float(found.group(1))
    assert 0.0 <= score < 1.0
    assert "PAU_JUDGE_MODEL" in out and "claude_desktop_config.json" in out
    assert method.description not in out
    listed = json.loads(pau("runs", "show", "demo", "--json", "--data-dir", str(tmp_path)).stdout)
    assert len(listed["submissions"]) == 1 and "_TABLE" in listed["submissions"][0]["code"]
    assert sum(c["counted"] for c in listed["calls"]) == len(calls)


def test_the_demo_refuses_an_unknown_method_clearly(tmp_path: Path) -> None:
    result = pau("demo", "--method", "builtin/nope", "--data-dir", str(tmp_path))
    assert result.returncode == 1 and "no method" in result.stderr


def test_the_demo_with_a_run_store_it_cannot_write_says_so_in_one_line_and_starts_no_server(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    result = pau("demo", "--data-dir", str(tmp_path), "--db", str(tmp_path / "a-file" / "runs.db"), process=True)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "ExceptionGroup" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error")]
    assert len(errors) == 1 and "cannot use the run store" in errors[0] and "--db" in errors[0]
    assert "starting `pau-mcp serve" not in result.stderr


def test_a_demo_whose_server_stops_at_once_ends_in_a_line_after_the_servers_own_error(tmp_path: Path) -> None:
    result = pau("demo", "--data-dir", str(tmp_path), env={"PAU_MCP_WORKERS": "lots"}, process=True)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "ExceptionGroup" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error")]
    assert len(errors) == 2 and "PAU_MCP_WORKERS" in errors[0]
    assert errors[1].startswith("Error: the demo's server stopped") and "printed above" in errors[1]


def test_episodes_export_with_their_trajectories(tmp_path: Path) -> None:
    ran = pau(
        "eval",
        "--agent",
        "probe",
        "--methods",
        "builtin/b001",
        "--methods",
        "builtin/b002",
        "--run",
        "floor",
        "--data-dir",
        str(tmp_path),
    )
    assert ran.returncode == 0, ran.stderr
    out = tmp_path / "episodes.jsonl"
    assert pau("runs", "export", "floor", "--episodes", "-o", str(out), "--data-dir", str(tmp_path)).returncode == 0
    episodes = [json.loads(line) for line in out.read_text().splitlines()]
    assert [e["method_id"] for e in episodes] == ["builtin/b001", "builtin/b002"]
    for episode in episodes:
        kinds = [step["kind"] for step in episode["trajectory"]]
        assert kinds.count("tool_call") == episode["queries"] and "submit" in kinds
        assert episode["scores"]["direct"]["status"] == "scored"
