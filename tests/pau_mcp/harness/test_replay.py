"""`pau-mcp eval --replay RUN`: a finished run played again from its record reproduces every score exactly, and a
changed recorded reply is named by episode and step."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from fakellm import FakeLLM, Reply
from scripted_runs import pau, scripted, scripted_run

from pau_mcp.cli import main


def _replay(tmp_path: Path, run: str) -> Result:
    # No model server at all: a replay asks no provider.
    env = {"PAU_MCP_TOOL_KEY": "", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "unused"}
    return CliRunner().invoke(
        main, ["eval", "--replay", run, "--data-dir", str(tmp_path), "--db", str(tmp_path / "runs.db")], env=env,
        catch_exceptions=False,
    )  # fmt: skip


def test_replaying_a_scored_run_of_the_paper_agent_reproduces_every_score(tmp_path: Path) -> None:
    scripted_run(tmp_path, "paper")
    result = _replay(tmp_path, "paper")
    assert result.exit_code == 0, result.output
    assert "replay of paper: identical: 2 episodes played again step for step, all 4 scores the same" in result.output


def test_replaying_a_run_of_the_tools_agent_reproduces_it(tmp_path: Path) -> None:
    def tools(body: dict[str, Any]) -> Reply | str:
        if body.get("tools"):
            names = [t["function"]["name"] for t in body["tools"]]
            fn = next(n for n in names if n.startswith("fn_"))
            asked = sum(1 for m in body["messages"] if m.get("role") == "tool")
            if asked < 2:
                return Reply(tool_calls=[(fn, {"args": f"({asked + 3},)"})])
            return Reply(tool_calls=[("submit", {"method": fn, "description": "adds up its digits"})])
        return scripted(body)

    with FakeLLM(responder=tools) as fake:
        ran = pau(fake, tmp_path, "eval", "--agent", "tools", "--model", "openai/agent", "--run", "t", "--budget", "3",
                  "--methods", "builtin/b001", "--judge-model", "openai/judge")  # fmt: skip
    assert ran.exit_code == 0, ran.output
    result = _replay(tmp_path, "t")
    assert result.exit_code == 0, result.output
    assert "identical: 1 episodes" in result.output


def test_a_changed_recorded_reply_is_named_by_its_episode_and_step(tmp_path: Path) -> None:
    scripted_run(tmp_path, "paper")
    with sqlite3.connect(tmp_path / "runs.db") as db:
        (trajectory,) = db.execute("SELECT trajectory FROM episodes WHERE method_id = 'builtin/b002'").fetchone()
        steps = json.loads(trajectory)
        index = next(i for i, s in enumerate(steps) if s["kind"] == "model" and s["reply"].startswith("INPUT:"))
        steps[index]["reply"] = "INPUT: (41,)"  # the agent now asks for another input than the one it called with
        db.execute("UPDATE episodes SET trajectory = ? WHERE method_id = 'builtin/b002'", (json.dumps(steps),))
    result = _replay(tmp_path, "paper")
    assert result.exit_code == 1
    (line,) = [line for line in result.output.splitlines() if line.startswith("replay of paper: differs")]
    assert f"differs in 1 of 2 episodes; first in builtin/b002 at step {index + 1}:" in line
    assert '"(41,)"' in line  # the call the replay made, beside the one recorded


def test_a_changed_recorded_judge_reply_is_named_as_a_score_difference(tmp_path: Path) -> None:
    scripted_run(tmp_path, "paper")
    with sqlite3.connect(tmp_path / "runs.db") as db:
        db.execute(
            "UPDATE scores SET detail = json_set(detail, '$.reply', 'Fine.\nRating: 5') WHERE kind = 'judge' AND "
            "submission_id = (SELECT submission_id FROM episodes WHERE method_id = 'builtin/b001')"
        )
    result = _replay(tmp_path, "paper")
    assert result.exit_code == 1
    assert "first in builtin/b001 at its scores: its judge score came out 5.0 (scored); the run recorded 3.0" in (
        result.output
    )
