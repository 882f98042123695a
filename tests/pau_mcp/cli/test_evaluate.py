"""`pau-mcp eval` as a user meets it: re-runs, whole-run summaries, configuration and --server errors in one line."""

from __future__ import annotations

import csv
import os
import sqlite3
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from fakellm import Failure, FakeLLM

from pau_mcp.cli import main
from pau_mcp.runstore import RunStore
from wasm_runtime import Sandbox

METHODS = ("--methods", "builtin/b001", "--methods", "builtin/b002")


def _eval(tmp_path: Path, *args: str) -> Result:
    env = {"PAU_MCP_TOOL_KEY": "", "PAU_JUDGE_MODEL": "", "PAU_CODER_MODEL": ""}
    return CliRunner().invoke(
        main,
        ["eval", "--data-dir", str(tmp_path), "--db", str(tmp_path / "runs.db"), *args],
        env=env,
        catch_exceptions=False,
    )


def _runs(tmp_path: Path) -> list[str]:
    db = tmp_path / "runs.db"
    return [r.name for r in RunStore(db).runs()] if db.exists() else []


def test_rerunning_a_run_plays_its_failed_episodes_again_and_sums_up_the_whole_run(tmp_path: Path) -> None:
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
    attempts = {e.method_id: e.attempts for e in store.episodes(store.run_id("r"))}
    assert attempts == {"builtin/b001": 1, "builtin/b002": 2}


def test_the_progress_bar_keeps_its_count_when_the_run_name_is_longer_than_the_terminal_has_room_for(
    tmp_path: Path,
) -> None:
    from pau_command import run_pau_process

    run = "builtin-paper-interactive-openai-gpt-4o-mini-2024-07-18-temperature-0.7-seed-1"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAU_")} | {"COLUMNS": "100"}
    ran = run_pau_process(
        "eval", "--agent", "probe", "--run", run, "--no-score", "--methods", "builtin/b001", "--data-dir", tmp_path,
        env=env,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    (shown,) = [line for line in ran.stderr.splitlines() if "tokens" in line]
    assert "1/1" in shown and "failed 0" in shown and len(shown) <= 100


def test_a_relative_data_dir_keeps_the_run_and_its_servers_records_in_that_directory(tmp_path: Path) -> None:
    # The run's own server runs in another directory; given "." it once opened a store of its own there, and the
    # first score, referring to a submission the run's store did not have, ended the command with a traceback.
    from pau_command import run_pau_process

    env = {k: v for k, v in os.environ.items() if not k.startswith("PAU_")}
    ran = run_pau_process(
        "eval", "--agent", "probe", "--run", "here", "--methods", "builtin/b001", "--data-dir", ".", env=env, cwd=tmp_path
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    store = RunStore(tmp_path / "runs.db")
    (episode,) = store.episodes(store.run_id("here"))
    assert episode.state == "done" and episode.queries is not None and episode.queries > 0
    assert episode.scores["direct"].value is not None
    assert [s.method_id for s in store.submissions(store.run_id("here"))] == ["builtin/b001"]


def test_a_missing_or_unknown_model_is_refused_in_one_line_before_a_run_exists(tmp_path: Path) -> None:
    missing = _eval(tmp_path, "--agent", "paper", *METHODS)
    assert missing.exit_code == 1
    assert missing.output.strip().splitlines() == ["Error: the paper agent needs --model (e.g. openai/gpt-4o-mini)"]
    unknown = _eval(tmp_path, "--model", "nope/x", *METHODS)
    assert unknown.exit_code == 1 and "must be written provider/model" in unknown.output
    assert len(unknown.output.strip().splitlines()) == 1
    assert _runs(tmp_path) == []


def test_a_server_url_without_its_token_or_its_path_is_named_in_one_line_before_a_run_exists(tmp_path: Path) -> None:
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


def test_an_unknown_suite_is_one_line_naming_the_known_ones_not_a_traceback(tmp_path: Path) -> None:
    result = _eval(tmp_path, "--agent", "probe", "--suite", "nope")
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1].startswith("Error: no suite named 'nope' (known: builtin")
    assert _runs(tmp_path) == []


# -- against model servers that misbehave ------------------------------------------------------------------------

ONE = ("--methods", "builtin/b001", "--budget", "1")


def _paper(body: dict[str, Any]) -> str:
    """The paper agent's model: one input, concluded at once."""
    text = str(body["messages"][-1].get("content") or "")
    if "Give the exact input" in text:
        return "INPUT: (1,)"
    if "Update your hypothesis" in text:
        return "HYPOTHESIS: returns its argument\nCONCLUDED: YES"
    if "Write your final answer" in text:
        return "DESCRIPTION: returns its argument"
    return "I will try one."


def _served(fake: FakeLLM, tmp_path: Path, *args: str) -> Result:
    env = {
        "PAU_MCP_TOOL_KEY": "", "PAU_JUDGE_MODEL": "", "PAU_CODER_MODEL": "", "OPENAI_BASE_URL": fake.base_url,
        "OPENAI_API_KEY": "test",
    }  # fmt: skip
    return CliRunner().invoke(
        main, ["eval", "--data-dir", str(tmp_path), "--db", str(tmp_path / "runs.db"), *args], env=env,
        catch_exceptions=False,
    )  # fmt: skip


def _states(tmp_path: Path, run: str) -> list[str]:
    store = RunStore(tmp_path / "runs.db")
    return [e.state for e in store.episodes(store.run_id(run))]


def test_a_model_server_answering_pages_fails_the_episode_in_one_line_after_announced_retries(tmp_path: Path) -> None:
    with FakeLLM() as fake:
        fake.answer_bytes(b"<html><title>502 Bad Gateway</title></html>", content_type="text/html", times=2)
        result = _served(fake, tmp_path, "--model", "openai/m", "--run", "r", "--llm-retries", "1", *ONE)
    assert result.exit_code == 1
    assert "Traceback" not in result.output and "ExceptionGroup" not in result.output
    retries = [line for line in result.output.splitlines() if "retrying in" in line]
    assert len(retries) == 1 and "not JSON" in retries[0] and "502 Bad Gateway" in retries[0]
    (failed,) = [line for line in result.output.splitlines() if line.startswith("failed ")]
    assert "builtin/b001" in failed and "not JSON" in failed and "after 2 attempts" in failed
    assert _states(tmp_path, "r") == ["failed"]  # recorded, not left running


def test_a_score_that_could_not_be_made_is_counted_named_and_sets_the_exit_code(tmp_path: Path) -> None:
    def judge_refuses(body: dict[str, Any]) -> Failure | str:
        return Failure(400, "the judge model refused: content policy")

    with FakeLLM(responder=judge_refuses) as fake:
        result = _served(fake, tmp_path, "--agent", "probe", "--run", "r", "--judge-model", "openai/judge", *METHODS)
    assert result.exit_code == 1
    assert "whole run: 2 episodes, 2 done, 0 failed, 2 scores could not be made" in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("score error ")]
    assert sorted(errors) == [
        f"score error builtin/{m} judge: openai/judge: 400: the judge model refused: content policy (the provider "
        "refused this request)"
        for m in ("b001", "b002")
    ]
    assert "pau-mcp score r" in result.output


def test_more_than_ten_failed_episodes_are_shown_as_ten_and_how_many_more(tmp_path: Path) -> None:
    def refuses(body: dict[str, Any]) -> Failure:
        return Failure(400, "the model refused: content policy")

    with FakeLLM(responder=refuses) as fake:
        result = _served(fake, tmp_path, "--model", "openai/m", "--run", "r", "--limit", "12", "--no-score")
    assert result.exit_code == 1
    shown = [line for line in result.output.splitlines() if line.startswith("failed builtin/")]
    assert len(shown) == 10
    assert "failed ... and 2 more (`pau-mcp report r`)" in result.output


def test_no_cache_is_honoured_by_the_agents_model_too(tmp_path: Path) -> None:
    with FakeLLM(responder=_paper) as fake:
        assert _served(fake, tmp_path, "--model", "openai/m", "--run", "a", "--no-score", *ONE).exit_code == 0
        asked = len(fake.requests)
        assert _served(fake, tmp_path, "--model", "openai/m", "--run", "b", "--no-score", *ONE).exit_code == 0
        assert len(fake.requests) == asked  # greedy replies: the second run replays the first from the cache
        result = _served(fake, tmp_path, "--model", "openai/m", "--run", "c", "--no-score", "--no-cache", *ONE)
        assert result.exit_code == 0, result.output
        assert len(fake.requests) == 2 * asked


def _paper_scored(body: dict[str, Any]) -> str:
    """The paper agent's model, the judge and the code writer."""
    text = str(body["messages"][-1].get("content") or "")
    if "Rating:" in text and "<reference-" in text:
        return "Close enough.\nRating: 4"
    if "Write the Python function described below" in text:
        return "```python\ndef test_func(arg0):\n    return arg0\n```"
    return _paper(body)


def test_the_summary_gives_the_reports_means_and_agent_tokens_counts_scoring_apart_and_names_unpriced_models(
    tmp_path: Path,
) -> None:
    scored = ("--judge-model", "openai/m", "--coder-model", "openai/m")
    with FakeLLM(responder=_paper_scored) as fake:
        result = _served(fake, tmp_path, "--model", "openai/m", "--run", "r", *scored, *METHODS, "--budget", "1")
    assert result.exit_code == 0, result.output
    table = tmp_path / "report.csv"
    reported = CliRunner().invoke(
        main, ["report", "r", "--csv", str(table), "--db", str(tmp_path / "runs.db")], catch_exceptions=False
    )
    assert reported.exit_code == 0, reported.output
    with table.open(newline="") as handle:
        (row,) = list(csv.DictReader(handle))
    (line,) = [line for line in result.output.splitlines() if line.startswith("run r:")]

    assert int(row["judge_n"]) == 2 and int(row["codematch_n"]) == 2 and int(row["direct_n"]) == 0
    assert f"mean judge {float(row['judge_mean']):.2f}, mean code match {float(row['codematch_mean']):.3f}" in line
    assert "mean direct code n/a" in line
    tokens = int(row["input_tokens"]) + int(row["output_tokens"])
    assert f"; agent {tokens:,} tokens, ${float(row['cost_usd']):.4f}; scoring " in line
    assert "no price for openai/m" in result.output and "--pricing" in result.output


def test_a_second_run_sampling_at_a_temperature_above_zero_samples_afresh_unless_asked_to_share(tmp_path: Path) -> None:
    hot = ("--model", "openai/m", "--temperature", "0.8", "--no-score", *ONE)
    with FakeLLM(responder=_paper) as fake:
        assert _served(fake, tmp_path, "--run", "a", *hot).exit_code == 0
        asked = len(fake.requests)
        assert _served(fake, tmp_path, "--run", "b", *hot).exit_code == 0
        assert len(fake.requests) == 2 * asked  # run b drew its own samples
        assert all(body["temperature"] == 0.8 for body in fake.requests)
        assert _served(fake, tmp_path, "--run", "c", "--share-samples", *hot).exit_code == 0
        assert len(fake.requests) == 2 * asked  # asked for: run c replays the first samples drawn (run a's)


# -- the run's own server gets the run's settings ----------------------------------------------------------------


def _hungry_suite(sandbox: Sandbox, root: Path) -> Path:
    """A suite of two methods only generous limits let run: one takes 300 MiB, one returns 100 KiB."""
    from pau_mcp.manifests import Case, Method, Provenance, Suite, SuiteInfo, Tags
    from pau_mcp.manifests.checks import freeze_method

    suite = Suite.create(root, SuiteInfo(name="hungry"))
    for name, body in (("memory", "len(bytearray(300 * 1024 * 1024))"), ("output", "'a' * (100 * 1024)")):
        method = Method(
            id=f"hungry/{name}", header="def test_func(arg0):", params=["arg0"],
            source=f"def test_func(arg0):\n    return {body}\n", description=f"Needs {name}.",
            examples=[Case(input="(0,)")], tests=[Case(input="(1,)")], provenance=Provenance(dataset="test"),
            tags=Tags(arity=1),
        )  # fmt: skip
        suite.save(freeze_method(method, sandbox))
    return root


def test_the_limits_given_to_eval_are_the_limits_of_the_runs_own_server(tmp_path: Path, sandbox: Sandbox) -> None:
    manifests = _hungry_suite(sandbox, tmp_path / "suites")
    args = ("--agent", "probe", "--suite", "hungry", "--manifests", str(manifests), "--budget", "1", "--no-score")
    generous = ("--timeout", "7", "--memory-mb", "512", "--max-output-kb", "128")
    # (The probe's submission quotes the long output, which submit refuses: only the calls matter here.)
    _eval(tmp_path, *args, *generous, "--run", "generous")
    _eval(tmp_path, *args, "--run", "default")

    store = RunStore(tmp_path / "runs.db")
    ran = {run: {c.method_id: c.status for c in store.calls(store.run_id(run))} for run in ("generous", "default")}
    assert ran["generous"] == {"hungry/memory": "ok", "hungry/output": "ok"}
    assert ran["default"] == {"hungry/memory": "memory", "hungry/output": "output_limit"}


def _never_acts(body: dict[str, Any]) -> str:
    """A paper agent's model that never gives an input: every action is malformed, so no call is ever made."""
    text = str(body["messages"][-1].get("content") or "")
    if "Write your final answer" in text:
        return "DESCRIPTION: a function"
    return "I would rather think about it some more."


def test_a_run_whose_agent_never_acts_counts_its_malformed_actions_and_says_no_episode_made_a_query(
    tmp_path: Path,
) -> None:
    with FakeLLM(responder=_never_acts) as fake:
        result = _served(fake, tmp_path, "--model", "openai/m", "--run", "r", "--no-score", *METHODS, "--budget", "3")
    assert result.exit_code == 0, result.output
    assert "whole run: 2 episodes, 2 done, 0 failed" in result.output  # done, as before: the lines below say the rest
    (conduct,) = [line for line in result.output.splitlines() if line.startswith("conduct: ")]
    assert conduct == (
        "conduct: 6 malformed actions, 0 calls with invalid arguments, 0 refused calls, 2 of 2 done episodes with zero "
        "queries"
    )
    assert "every episode of run r made zero queries" in result.output

    table = tmp_path / "report.csv"
    reported = CliRunner().invoke(
        main, ["report", "r", "--csv", str(table), "--db", str(tmp_path / "runs.db")], catch_exceptions=False
    )
    assert reported.exit_code == 0, reported.output
    # The notes are folded to the terminal's width: read them as one line.
    assert "Run r: every one of its 2 done episodes made zero queries (6 malformed actions)." in " ".join(
        reported.output.split()
    )
    with table.open(newline="") as handle:
        (row,) = list(csv.DictReader(handle))
    assert (row["malformed_actions"], row["zero_query_episodes"], row["refusals"]) == ("6", "2", "0")


def test_a_run_that_queried_says_nothing_of_zero_queries_and_counts_its_refusals(tmp_path: Path) -> None:
    with FakeLLM(responder=_paper) as fake:
        result = _served(fake, tmp_path, "--model", "openai/m", "--run", "r", "--no-score", *ONE)
    assert result.exit_code == 0, result.output
    assert "conduct: 0 malformed actions, 0 calls with invalid arguments, 0 refused calls, 0 of 1 done episodes" in (
        result.output
    )
    assert "made zero queries" not in result.output


def test_the_summary_says_whether_the_models_score_on_the_suite_is_fresh(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from pau_mcp.manifests import ManifestStore, Suite, SuiteInfo

    suites = tmp_path / "suites"
    made = Suite.create(suites, SuiteInfo(name="fresh", created=datetime(2026, 1, 5, tzinfo=UTC), models=["openai/w"]))
    made.save(ManifestStore().method("builtin/b001").model_copy(update={"id": "fresh/b001"}))
    later = tmp_path / "later.json"
    later.write_text('{"models": [{"match": ["gpt-4o-mini"], "released": "2026-02-01"}]}')
    args = ("--model", "openai/gpt-4o-mini", "--no-score", "--budget", "1", "--manifests", str(suites))
    with FakeLLM(responder=_paper) as fake:
        fresh = _served(fake, tmp_path, *args, "--suite", "fresh", "--run", "a")
        stale = _served(fake, tmp_path, *args, "--suite", "fresh", "--run", "b", "--model-capabilities", str(later))
        public = _served(fake, tmp_path, *args, "--run", "c", "--methods", "builtin/b001")
    assert fresh.exit_code == 0, fresh.output
    assert (
        "openai/gpt-4o-mini on suite fresh: fresh (suite fresh was created on 2026-01-05, after openai/gpt-4o-mini "
        "was released 2024-07-18)" in fresh.output
    )
    assert "openai/gpt-4o-mini on suite fresh: not fresh (" in stale.output and "released 2026-02-01" in stale.output
    assert "on suite builtin: freshness unknown (suite builtin records no creation date" in public.output
