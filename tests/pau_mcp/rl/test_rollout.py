"""`pau-mcp rl rollout`: a policy and a critic served by a loopback OpenAI-compatible server, through the CLI.

The command group runs in the test's process (`run_pau`), except in the test of a rollout killed with SIGKILL
and resumed: that one is a process, killed, and a fresh process resuming its run."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from fakellm import FakeLLM, Reply
from pau_command import run_pau, run_pau_process
from rlscript import brain

from pau_mcp.manifests import ManifestStore, call_text
from pau_mcp.server.examples import deployment_examples
from wasm_runtime import Sandbox

ROOT = Path(__file__).resolve().parents[3]
METHODS = ("builtin/b001", "builtin/b002", "builtin/b003", "builtin/b004", "builtin/b005", "builtin/b006")


def _args(data: Path, run: str = "r", *extra: str, methods: tuple[str, ...] = METHODS) -> list[str]:
    """The command line after ``pau-mcp``."""
    return [
        "rl", "rollout", "--model", "openai/fake-policy", "--critic-model", "openai/fake-critic", "--run", run,
        "--data-dir", str(data), "--out", str(data / "out"), "--concurrency", "2", "--budget", "6",
        *[item for m in methods for item in ("--methods", m)], *extra,
    ]  # fmt: skip


def _command(data: Path, run: str = "r", *extra: str) -> list[str]:
    """The rollout as a process: ``python -m pau_mcp ...``."""
    return [sys.executable, "-m", "pau_mcp", *_args(data, run, *extra)]


def _env(fake: FakeLLM) -> dict[str, str]:
    return {**os.environ, "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "test"}


def _episodes(data: Path) -> list[tuple[str, float, int, int]]:
    lines = (data / "out" / "trajectories.jsonl").read_text().splitlines()
    return sorted(
        (r["method_id"], round(r["return"], 6), r["queries"], len(r["steps"])) for r in map(json.loads, lines)
    )


def test_a_rollout_writes_trajectories_with_per_step_rewards_as_jsonl_and_parquet(tmp_path: Path) -> None:
    with FakeLLM(responder=brain) as fake:
        done = run_pau(*_args(tmp_path), env=_env(fake), cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "6 episodes finished now" in done.stdout and "tokens, $" in done.stdout
    records = [json.loads(line) for line in (tmp_path / "out" / "trajectories.jsonl").read_text().splitlines()]
    assert sorted(r["method_id"] for r in records) == sorted(METHODS)
    for record in records:
        rewards = [step["reward"] for step in record["steps"]]
        assert abs(sum(rewards) - record["return"]) < 1e-9
        assert [step["phase"] for step in record["steps"][:3]] == ["reason", "propose", "reflect"]
        assert record["input_tokens"] > 0
    table = pq.read_table(tmp_path / "out" / "steps.parquet").to_pylist()
    assert len(table) == sum(len(r["steps"]) for r in records)
    assert {"reward", "phase", "observation", "action", "components", "call_status", "critic_score"} <= set(table[0])


def test_a_rollout_killed_with_sigkill_resumes_to_the_result_of_an_uninterrupted_one(tmp_path: Path) -> None:
    def slow(body: dict[str, Any]) -> Reply:
        reply = brain(body)
        return Reply(text=reply, delay_s=0.03) if isinstance(reply, str) else reply

    with FakeLLM(responder=slow) as fake:
        straight, killed = tmp_path / "straight", tmp_path / "killed"
        done = run_pau(*_args(straight), env=_env(fake), cwd=ROOT)  # the uninterrupted reference
        assert done.returncode == 0, done.stderr[-3000:]
        process = subprocess.Popen(
            _command(killed), env=_env(fake), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        db = killed / "runs.db"
        deadline = time.monotonic() + 200
        finished = 0
        while time.monotonic() < deadline and finished < 2:
            time.sleep(0.1)
            try:
                finished = (
                    sqlite3.connect(db).execute("SELECT COUNT(*) FROM episodes WHERE state = 'done'").fetchone()[0]
                )
            except sqlite3.Error:
                finished = 0
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        states = dict(sqlite3.connect(db).execute("SELECT state, COUNT(*) FROM episodes GROUP BY state").fetchall())
        assert 2 <= states.get("done", 0) < 6
        resumed = run_pau_process(*_args(killed), env=_env(fake), cwd=ROOT)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "earlier" in resumed.stdout
    assert _episodes(killed) == _episodes(straight)
    attempts = sqlite3.connect(db).execute("SELECT attempts FROM episodes").fetchall()
    assert sum(a for (a,) in attempts) <= 6 + 2  # episodes finished before the kill never ran again


def test_running_a_finished_rollout_again_gives_its_mean_return_and_names_the_models_without_a_price(
    tmp_path: Path,
) -> None:
    with FakeLLM(responder=brain) as fake:
        first = run_pau(*_args(tmp_path, methods=METHODS[:2]), env=_env(fake), cwd=ROOT)
        again = run_pau(*_args(tmp_path, methods=METHODS[:2]), env=_env(fake), cwd=ROOT)
    assert first.returncode == 0 and again.returncode == 0, first.stderr[-3000:] + again.stderr[-3000:]
    returns = [
        json.loads(line)["return"] for line in (tmp_path / "out" / "trajectories.jsonl").read_text().splitlines()
    ]
    mean = f"mean return {sum(returns) / len(returns):.3f} over 2 finished episodes"
    assert "2 episodes finished now, 0 earlier" in first.stdout and mean in first.stdout
    assert "0 episodes finished now, 2 earlier" in again.stdout and mean in again.stdout
    assert "no price for openai/fake-critic, openai/fake-policy" in again.stdout


def test_resuming_with_other_options_is_refused(tmp_path: Path) -> None:
    with FakeLLM(responder=brain) as fake:
        first = run_pau(*_args(tmp_path, "r", "--limit", "1"), env=_env(fake), cwd=ROOT)
        assert first.returncode == 0, first.stderr[-2000:]
        other = run_pau(*_args(tmp_path, "r", "--critic-mode", "symmetric"), env=_env(fake), cwd=ROOT)
    assert other.returncode == 1 and "exists with another configuration" in other.stderr


def test_a_rejected_key_ends_the_rollout_in_one_line_and_records_the_failed_episode(tmp_path: Path) -> None:
    with FakeLLM(responder=brain) as fake:
        fake.fail(401, message="invalid api key")
        done = run_pau(*_args(tmp_path, "r", "--concurrency", "1"), env=_env(fake), cwd=ROOT)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "invalid api key" in done.stderr and "Traceback" not in done.stderr
    failed = sqlite3.connect(tmp_path / "runs.db").execute("SELECT error FROM episodes WHERE state = 'failed'")
    assert ["invalid api key" in error for (error,) in failed.fetchall()] == [True]


def _policy_requests(fake: FakeLLM) -> list[dict[str, Any]]:
    return [body for body in fake.requests if body.get("temperature") == 1.0]


def test_a_second_rollout_samples_its_policy_afresh_and_a_resumed_one_replays_its_own_steps(tmp_path: Path) -> None:
    few = ("--limit", "2")
    with FakeLLM(responder=brain) as fake:
        first = run_pau(*_args(tmp_path, "a", *few), env=_env(fake), cwd=ROOT)
        assert first.returncode == 0, first.stderr[-3000:]
        sampled = len(_policy_requests(fake))
        second = run_pau(*_args(tmp_path, "b", *few), env=_env(fake), cwd=ROOT)
        assert second.returncode == 0, second.stderr[-3000:]
        assert len(_policy_requests(fake)) == 2 * sampled  # run b drew its own samples, none copied from run a
        # The same run played again (as after a kill) replays its own steps from the cache.
        sqlite3.connect(tmp_path / "runs.db").execute(
            "UPDATE episodes SET state = 'running' WHERE run_id = (SELECT id FROM runs WHERE name = 'a')"
        ).connection.commit()
        again = run_pau(*_args(tmp_path, "a", *few), env=_env(fake), cwd=ROOT)
        assert again.returncode == 0, again.stderr[-3000:]
        assert len(_policy_requests(fake)) == 2 * sampled
    steps = [
        step for line in (tmp_path / "out" / "trajectories.jsonl").read_text().splitlines()
        for step in json.loads(line)["steps"]
    ]  # fmt: skip
    assert steps and all(step["policy"]["cached"] and step["policy"]["output_tokens"] > 0 for step in steps)


def test_a_policy_server_answering_pages_fails_its_episode_in_one_line_and_the_run_goes_on(tmp_path: Path) -> None:
    with FakeLLM(responder=brain) as fake:
        fake.answer_bytes(b"<html><body>upstream connect error</body></html>", content_type="text/html", times=2)
        done = run_pau(
            *_args(tmp_path, "r", "--limit", "2", "--concurrency", "1", "--llm-retries", "1"), env=_env(fake), cwd=ROOT
        )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "1 episodes finished now, 0 earlier, 1 failed now; whole run: 2 episodes, 1 done, 1 failed" in done.stdout
    assert "retrying in" in done.stderr and "upstream connect error" in done.stderr
    states = sqlite3.connect(tmp_path / "runs.db").execute("SELECT state, error FROM episodes ORDER BY id").fetchall()
    assert [state for state, _ in states] == ["failed", "done"]
    assert "not JSON" in states[0][1] and "upstream connect error" in states[0][1]
    # Run again against a healthy server: the failed episode is not played without --retry-failed, and said so.
    with FakeLLM(responder=brain) as fake:
        again = run_pau(*_args(tmp_path, "r", "--limit", "2", "--concurrency", "1"), env=_env(fake), cwd=ROOT)
        assert again.returncode == 1, again.stdout + again.stderr
        assert (
            "0 episodes finished now, 2 earlier, 0 failed now; whole run: 2 episodes, 1 done, 1 failed" in again.stdout
        )
        assert "1 episode(s) of this run failed earlier" in again.stderr and "--retry-failed" in again.stderr
        retried = run_pau(
            *_args(tmp_path, "r", "--limit", "2", "--concurrency", "1", "--retry-failed"), env=_env(fake), cwd=ROOT
        )
    assert retried.returncode == 0, retried.stdout + retried.stderr
    assert "1 episodes finished now, 1 earlier, 0 failed now; whole run: 2 episodes, 2 done, 0 failed" in retried.stdout


def test_with_deployment_examples_the_policy_sees_the_examples_a_server_of_the_deployment_serves(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    key = "rollout-deployment-key-0123456789"
    with FakeLLM(responder=brain) as fake:
        done = run_pau(
            *_args(tmp_path, "drawn", "--examples", "deployment", "--tool-key", key), env=_env(fake), cwd=ROOT
        )
        prompts = "\n".join(fake.prompts())
    assert done.returncode == 0, done.stderr[-3000:]
    methods = [ManifestStore().method(m) for m in METHODS]
    served = deployment_examples(methods, sandbox, key)
    for method in methods:
        assert served[method.id].origin == "deployment"
        for case in served[method.id].cases:
            assert f"{call_text(method.entry, case.input)} -> {case.frozen_outcome().shown()}" in prompts, method.id
        for case in method.examples:
            assert f"{call_text(method.entry, case.input)} -> {case.frozen_outcome().shown()}" not in prompts, method.id


def _return_of(data: Path, method_id: str) -> float:
    lines = (data / "out" / "trajectories.jsonl").read_text().splitlines()
    returned: float = next(r["return"] for r in map(json.loads, lines) if r["method_id"] == method_id)
    return returned


def test_the_rewards_option_selects_the_papers_schedule_by_name(tmp_path: Path) -> None:
    # The scripted explorer states the right hypothesis from its first reflection and goes on to four calls. Told to
    # stop paying exploration once the *stated* hypothesis is rated (the rule before the evidence rule), the default
    # schedule pays its first cycle only; the paper's pays every step whatever that field says.
    returns = {}
    for schedule in ("pau-mcp", "paper"):
        data = tmp_path / schedule
        with FakeLLM(responder=brain) as fake:
            extra = ("--rewards", schedule, "--reward", "concludable_from=hypothesis")
            done = run_pau(*_args(data, schedule, *extra, methods=("builtin/b005",)), env=_env(fake), cwd=ROOT)
        assert done.returncode == 0, done.stderr[-3000:]
        returns[schedule] = _return_of(data, "builtin/b005")
    assert returns["paper"] == pytest.approx(6.77, abs=0.005)
    assert returns["pau-mcp"] == pytest.approx(4.69, abs=0.005)


def test_an_unknown_schedule_is_a_usage_error_naming_the_schedules(tmp_path: Path) -> None:
    done = run_pau(*_args(tmp_path, "r", "--rewards", "generous"), cwd=ROOT)
    assert done.returncode == 2 and "pau-mcp, paper" in done.stderr and "Traceback" not in done.stderr
