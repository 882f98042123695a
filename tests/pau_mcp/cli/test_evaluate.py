"""`pau-mcp eval` as a user meets it: re-runs, whole-run summaries, configuration and --server errors in one line."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from click.testing import CliRunner

from pau_mcp.cli import main
from pau_mcp.runstore import RunStore

METHODS = ("--methods", "builtin/b001", "--methods", "builtin/b002")


def _eval(tmp_path: Path, *args: str) -> object:
    env = {"PAU_MCP_TOOL_KEY": "", "PAU_JUDGE_MODEL": "", "PAU_CODER_MODEL": ""}
    return CliRunner().invoke(
        main,
        ["eval", "--data-dir", str(tmp_path), "--db", str(tmp_path / "runs.db"), *args],
        env=env,
        catch_exceptions=False,
    )


def _runs(tmp_path: Path) -> list[str]:
    db = tmp_path / "runs.db"
    return [r["name"] for r in RunStore(db).runs()] if db.exists() else []


def test_rerunning_a_run_plays_its_failed_episodes_again_and_sums_up_the_whole_run(tmp_path):
    first = _eval(tmp_path, "--agent", "probe", "--run", "r", "--no-score", *METHODS)
    assert first.exit_code == 0, first.output
    with sqlite3.connect(tmp_path / "runs.db") as db:
        db.execute("UPDATE episodes SET state = 'failed', error = 'EvalError: lost' WHERE method_id = 'builtin/b002'")

    kept = _eval(tmp_path, "--agent", "probe", "--run", "r", "--no-score", "--keep-failed", *METHODS)
    assert kept.exit_code == 1
    assert "whole run: 2 episodes, 1 done, 1 failed" in kept.output
    assert "without --keep-failed" in kept.output

    again = _eval(tmp_path, "--agent", "probe", "--run", "r", "--no-score", *METHODS)
    assert again.exit_code == 0, again.output
    assert "1 episodes finished now, 1 earlier, 0 failed now; whole run: 2 episodes, 2 done, 0 failed" in again.output
    store = RunStore(tmp_path / "runs.db")
    attempts = {e["method_id"]: e["attempts"] for e in store.episodes(store.run_id("r"))}
    assert attempts == {"builtin/b001": 1, "builtin/b002": 2}


def test_a_missing_or_unknown_model_is_refused_in_one_line_before_a_run_exists(tmp_path):
    missing = _eval(tmp_path, "--agent", "paper", *METHODS)
    assert missing.exit_code == 1
    assert missing.output.strip().splitlines() == ["Error: the paper agent needs --model (e.g. openai/gpt-4o-mini)"]
    unknown = _eval(tmp_path, "--model", "nope/x", *METHODS)
    assert unknown.exit_code == 1 and "must be written provider/model" in unknown.output
    assert len(unknown.output.strip().splitlines()) == 1
    assert _runs(tmp_path) == []


def test_a_server_url_without_its_token_or_its_path_is_named_in_one_line_before_a_run_exists(tmp_path):
    from pau_mcp.server.launch import http_server

    env = {k: v for k, v in os.environ.items() if k != "PAU_MCP_TOOL_KEY"}
    args = ["--data-dir", str(tmp_path), "--db", str(tmp_path / "server.db"), "--token", "the-token-123"]
    with http_server(args, env=env) as url:
        no_token = _eval(tmp_path, "--agent", "probe", "--server", url, *METHODS)
        root = url.removesuffix("/mcp")
        no_path = _eval(tmp_path, "--agent", "probe", "--server", root, "--token", "the-token-123", *METHODS)
    errors = [line for line in no_token.output.splitlines() if line.startswith("Error")]
    assert no_token.exit_code == 1 and len(errors) == 1
    assert "401" in errors[0] and "--token" in errors[0] and "no token" in errors[0]
    errors = [line for line in no_path.output.splitlines() if line.startswith("Error")]
    assert no_path.exit_code == 1 and len(errors) == 1
    assert "404" in errors[0] and "wrong path" in errors[0] and f"{root}/mcp" in errors[0]
    assert _runs(tmp_path) == []


def test_an_unknown_suite_is_one_line_naming_the_known_ones_not_a_traceback(tmp_path):
    result = _eval(tmp_path, "--agent", "probe", "--suite", "nope")
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1].startswith("Error: no suite named 'nope' (known: builtin")
    assert _runs(tmp_path) == []
