"""`pau-mcp eval`: whole runs against a real `pau-mcp serve`, the model played by a scripted loopback server."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fakellm import FakeLLM, Reply

from pau_mcp.config import Settings
from pau_mcp.harness import EvalConfig, RunProgress, run_eval
from pau_mcp.manifests import ManifestStore
from pau_mcp.protocol import Protocol
from pau_mcp.runstore import EpisodeRow, RunStore
from pau_mcp.scoring import Scorer

ROOT = Path(__file__).resolve().parents[3]
METHODS = ("builtin/b001", "builtin/b002", "builtin/b003")
MODEL = "openai/fake-agent"


def brain(body: dict[str, Any]) -> Reply | str:
    """A deterministic scripted model: plays the agents, the judge and the code writer."""
    messages = body["messages"]
    last = messages[-1]
    text = str(last.get("content") or "")
    if body.get("tools"):
        names = [t["function"]["name"] for t in body["tools"]]
        method_tools = [n for n in names if n.startswith("fn_")]
        tool_results = sum(1 for m in messages if m.get("role") == "tool")
        spent = any(m.get("role") == "tool" and "budget" in str(m.get("content")) for m in messages)
        if method_tools and tool_results < 25 and not spent:
            return Reply(
                tool_calls=[(method_tools[0], {"args": f"({tool_results},)"})], input_tokens=30, output_tokens=5
            )
        return Reply(
            tool_calls=[
                (
                    "submit",
                    {
                        "method": method_tools[0] if method_tools else _tool_in(messages),
                        "description": "scripted tools description",
                    },
                )
            ]
        )
    if "Rating:" in text and "<reference-" in text:
        return Reply(text="They agree on most cases.\nRating: 4", input_tokens=50, output_tokens=9)
    if "Write the Python function described below" in text:
        header = re.search(r"Header: (def test_func\((.*)\):)", text)
        params = header.group(2) if header else "arg0"
        return f"```python\ndef test_func({params}):\n    return 0\n```"
    if "Propose ONE input" in text:
        return "I will try a small number."
    if "INPUT:" in text and "Give the exact input" in text:
        count = len(
            re.findall(r"^  test_func", text.split("Your latest experiments:")[1].split("Current hypothesis")[0], re.M)
        )
        return f"INPUT: ({count + 1},)"
    if "Update your hypothesis" in text:
        done = "YES" if len(re.findall(r"^  test_func", text.split("Your latest experiments:")[1], re.M)) >= 3 else "NO"
        return f"HYPOTHESIS: returns something about its argument\nCONCLUDED: {done}"
    if "Write your final answer" in text:
        return "DESCRIPTION: scripted paper description"
    return "I do not know."


def _tool_in(messages: list[dict[str, Any]]) -> str:
    for m in messages:
        found = re.search(r"fn_[0-9a-f]{10}", str(m.get("content")))
        if found:
            return found.group(0)
    return "fn_unknown"


def _settings(tmp_path: Path, **extra: Any) -> Settings:
    return Settings.from_options(
        data_dir=tmp_path, db=tmp_path / "runs.db", judge_model=MODEL, coder_model=MODEL, **extra
    )


def _run(settings: Settings, **config: Any) -> RunProgress:
    config.setdefault("concurrency", 2)
    eval_config = EvalConfig(run=config.pop("run", "t"), model=MODEL, suite="builtin", methods=METHODS, **config)
    return anyio.run(_with_scorer, settings, eval_config)


async def _with_scorer(settings: Settings, config: EvalConfig) -> RunProgress:
    scorer = Scorer.from_settings(settings)
    try:
        return await run_eval(settings, config, scorer, None)
    finally:
        await scorer.aclose()


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    with FakeLLM(responder=brain) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        yield server


def _episodes(settings: Settings, run: str) -> list[EpisodeRow]:
    store = RunStore(settings.db_path)
    return store.episodes(store.run_id(run), with_trajectories=True)


@pytest.mark.server_process  # the run's own server as a process, as users get it (the others serve it here)
def test_the_paper_agent_explores_reflects_on_each_output_submits_and_is_scored(tmp_path: Path, fake: FakeLLM) -> None:
    settings = _settings(tmp_path)
    progress = _run(settings, agent="paper", run="paper")
    assert (progress.done, progress.failed) == (3, 0)
    episodes = _episodes(settings, "paper")
    for episode in episodes:
        assert episode.state == "done" and episode.concluded == 1
        assert episode.queries == 3
        assert episode.scores["judge"].value == 4.0
        codematch = episode.scores["codematch"].value
        assert codematch is not None and 0.0 <= codematch < 1.0
        assert episode.trajectory is not None
        kinds = [step["kind"] for step in episode.trajectory]
        assert kinds.count("tool_call") == 3 and "submit" in kinds
    reflections = [p for p in fake.prompts() if "Update your hypothesis" in p]
    assert reflections
    # Unlike the reference, the reflection sees the output of the query just made.
    b001 = ManifestStore().method("builtin/b001")
    assert any(
        "You just ran test_func(1,) and it returned" in p or "You just ran test_func(1,) and it raised" in p
        for p in reflections
    )
    db = sqlite3.connect(settings.db_path)
    submissions = db.execute("SELECT description FROM submissions").fetchall()
    assert [s[0] for s in submissions] == ["scripted paper description"] * 3
    assert b001.description not in "\n".join(p for p in fake.prompts() if "Update your hypothesis" in p)


@pytest.fixture
def protocol_loads() -> Iterator[list[tuple[Any, ...]]]:
    """Every call of the real ``load_protocol`` in this process, whichever module calls it (each module that imported
    it by name, and any imported while the test runs, gets a counting wrapper round the real loader)."""
    import pau_mcp.protocol

    real = pau_mcp.protocol.load_protocol
    loads: list[tuple[Any, ...]] = []

    def counted(*args: Any, **kwargs: Any) -> Protocol:
        loads.append(args)
        return real(*args, **kwargs)

    def swap(old: object, new: object) -> None:
        for module in list(sys.modules.values()):
            if getattr(module, "__name__", "").startswith("pau_mcp") and getattr(module, "load_protocol", None) is old:
                setattr(module, "load_protocol", new)  # noqa: B010 - any module's name, not one known to the checker

    swap(real, counted)
    try:
        yield loads
    finally:
        swap(counted, real)


def test_one_eval_loads_its_protocol_once(tmp_path: Path, fake: FakeLLM, protocol_loads: list[tuple[Any, ...]]) -> None:
    from click.testing import CliRunner

    from pau_mcp.cli import main

    env = {
        "PAU_MCP_TOOL_KEY": "", "PAU_JUDGE_MODEL": MODEL, "PAU_CODER_MODEL": MODEL, "OPENAI_BASE_URL": fake.base_url,
        "OPENAI_API_KEY": "test",
    }  # fmt: skip
    result = CliRunner().invoke(
        main,
        ["eval", "--model", MODEL, "--data-dir", str(tmp_path), "--db", str(tmp_path / "runs.db"), "--run", "once",
         "--methods", METHODS[0], "--budget", "2"],
        env=env, catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    store = RunStore(tmp_path / "runs.db")
    (episode,) = store.episodes(store.run_id("once"))
    assert episode.state == "done" and {"judge", "codematch"} <= set(episode.scores)  # the scorer ran too
    assert len(protocol_loads) == 1


def test_a_run_whose_replies_come_from_the_cache_reports_its_agent_tokens_and_no_cost(
    tmp_path: Path, fake: FakeLLM
) -> None:
    settings = _settings(tmp_path)
    _run(settings, agent="paper", run="first", kinds=("direct",))
    asked = len(fake.requests)
    _run(settings, agent="paper", run="replayed", kinds=("direct",))
    assert len(fake.requests) == asked  # every reply of the second run came from the cache
    first, replayed = (
        {e.method_id: (e.input_tokens, e.output_tokens) for e in _episodes(settings, run)}
        for run in ("first", "replayed")
    )
    assert replayed == first and all(tokens > (0, 0) for tokens in replayed.values())
    assert all(e.cost_usd == 0 for e in _episodes(settings, "replayed"))


def test_the_tools_agent_calls_the_mcp_tool_itself_within_the_budget(tmp_path: Path, fake: FakeLLM) -> None:
    settings = _settings(tmp_path, budget=5)
    progress = _run(settings, agent="tools", run="tools", budget=5)
    assert progress.done == 3
    for episode in _episodes(settings, "tools"):
        assert episode.queries == 5 and episode.trajectory is not None
        results = [s for s in episode.trajectory if s["kind"] == "tool_result"]
        assert sum(1 for r in results if (r["structured"] or {}).get("status") == "over_budget") >= 1
        assert episode.concluded == 1
    calls = sqlite3.connect(settings.db_path).execute("SELECT SUM(counted), COUNT(*) FROM calls").fetchone()
    assert calls[0] == 15 and calls[1] > 15


def test_a_run_on_a_postgresql_store_is_recorded_and_budgeted_there(
    tmp_path: Path, fake: FakeLLM, postgres_url: str
) -> None:
    """The harness's store and its private server's (which gets the URL by environment) are one PostgreSQL database."""
    settings = Settings.from_options(data_dir=tmp_path, db=postgres_url, judge_model=MODEL, coder_model=MODEL, budget=5)
    progress = _run(settings, agent="tools", run="on-postgres", budget=5)
    assert (progress.done, progress.failed) == (3, 0)
    store = RunStore(postgres_url)
    run_id = store.run_id("on-postgres")
    assert all(e.queries == 5 and e.scores["judge"].value == 4.0 for e in store.episodes(run_id))
    assert sum(c.counted for c in store.calls(run_id)) == 15
    assert not (tmp_path / "runs.db").exists()


@pytest.mark.parametrize("agent", ["paper", "tools"])
def test_in_context_mode_never_queries_the_function(tmp_path: Path, fake: FakeLLM, agent: str) -> None:
    settings = _settings(tmp_path)
    progress = _run(settings, agent=agent, mode="incontext", run=f"ic-{agent}")
    assert progress.done == 3
    assert all(e.queries == 0 for e in _episodes(settings, f"ic-{agent}"))
    assert sqlite3.connect(settings.db_path).execute("SELECT COUNT(*) FROM calls").fetchone()[0] == 0


def test_a_permanent_provider_error_fails_only_that_episode_and_is_recorded(tmp_path: Path, fake: FakeLLM) -> None:
    fake.fail(401, message="invalid api key")
    settings = _settings(tmp_path)
    progress = _run(settings, agent="paper", run="broken", concurrency=1)
    assert progress.failed == 1 and progress.done == 2
    failed = [e for e in _episodes(settings, "broken") if e.state == "failed"]
    assert len(failed) == 1 and "invalid api key" in (failed[0].error or "")


def test_the_probe_agent_needs_no_model_and_its_code_is_scored_directly(tmp_path: Path) -> None:
    settings = Settings.from_options(data_dir=tmp_path, db=tmp_path / "runs.db")
    config = EvalConfig(run="probe", model="", suite="builtin", agent="probe", methods=METHODS, kinds=("direct",))
    progress = anyio.run(_with_scorer, settings, config)
    assert progress.done == 3
    for episode in _episodes(settings, "probe"):
        assert episode.queries is not None and 0 < episode.queries <= 20
        assert episode.scores["direct"].status == "scored"


def _eval_command(db: Path, run: str, data: Path) -> list[str]:
    return [
        sys.executable, "-m", "pau_mcp", "eval", "--model", MODEL, "--agent", "paper", "--run", run, "--db", str(db),
        "--data-dir", str(data), "--judge-model", MODEL, "--coder-model", MODEL, "--concurrency", "2",
        *[item for m in ("builtin/b001", "builtin/b002", "builtin/b003", "builtin/b004", "builtin/b005", "builtin/b006") for item in ("--methods", m)],
    ]  # fmt: skip


def _summary(db: Path, run: str) -> list[tuple[str, str, int | None, bool | None, float | None, float | None]]:
    store = RunStore(db)
    rows = store.episodes(store.run_id(run))
    return sorted(
        (
            e.method_id,
            e.state,
            e.queries,
            e.concluded,
            e.scores["judge"].value,
            e.scores["codematch"].value,
        )
        for e in rows
    )


def test_a_run_killed_with_sigkill_resumes_to_the_same_result_as_an_uninterrupted_run(tmp_path: Path) -> None:
    def slow_brain(body: dict[str, Any]) -> Reply | str:
        reply = brain(body)
        reply = reply if isinstance(reply, Reply) else Reply(text=reply)
        reply.delay_s = 0.05
        return reply

    with FakeLLM(responder=slow_brain) as fake:
        env = {**os.environ, "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "test"}
        straight = tmp_path / "straight"
        straight.mkdir()
        done = subprocess.run(
            _eval_command(straight / "runs.db", "r", straight),
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-2000:]

        killed = tmp_path / "killed"
        killed.mkdir()
        db = killed / "runs.db"
        process = subprocess.Popen(
            _eval_command(db, "r", killed),
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            time.sleep(0.2)
            if db.exists():
                finished = (
                    sqlite3.connect(db).execute("SELECT COUNT(*) FROM episodes WHERE state = 'done'").fetchone()[0]
                    if _has_episodes(db)
                    else 0
                )
                if finished >= 2:
                    break
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        states = dict(sqlite3.connect(db).execute("SELECT state, COUNT(*) FROM episodes GROUP BY state").fetchall())
        assert states.get("done", 0) >= 2 and states.get("done", 0) < 6
        resumed = subprocess.run(
            _eval_command(db, "r", killed), env=env, cwd=ROOT, capture_output=True, text=True, timeout=600
        )
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        assert "earlier" in resumed.stdout

    assert _summary(db, "r") == _summary(straight / "runs.db", "r")
    attempts = sqlite3.connect(db).execute("SELECT method_id, attempts FROM episodes WHERE state = 'done'").fetchall()
    submissions = (
        sqlite3.connect(db)
        .execute("SELECT COUNT(*) FROM episodes e JOIN submissions s ON s.id = e.submission_id")
        .fetchone()[0]
    )
    assert submissions == 6 and all(a >= 1 for _, a in attempts)


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def test_when_the_runs_own_server_dies_the_run_stops_says_so_and_a_rerun_finishes_it(tmp_path: Path) -> None:
    def slow_brain(body: dict[str, Any]) -> Reply | str:
        reply = brain(body)
        reply = reply if isinstance(reply, Reply) else Reply(text=reply)
        reply.delay_s = 0.05
        return reply

    db = tmp_path / "runs.db"
    command = [
        sys.executable, "-m", "pau_mcp", "eval", "--model", MODEL, "--run", "r", "--db", str(db), "--data-dir",
        str(tmp_path), "--concurrency", "2", "--no-score", "--limit", "8",
    ]  # fmt: skip
    with FakeLLM(responder=slow_brain) as fake:
        env = {**os.environ, "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "test"}
        process = subprocess.Popen(
            command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 300
        while (
            time.monotonic() < deadline
            and process.poll() is None
            and not (
                _has_episodes(db)
                and sqlite3.connect(db).execute("SELECT COUNT(*) FROM episodes WHERE state = 'done'").fetchone()[0]
            )
        ):
            time.sleep(0.2)
        servers = [pid for pid in _children(process.pid) if b"serve" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        assert len(servers) == 1
        os.kill(servers[0], signal.SIGKILL)
        out, err = process.communicate(timeout=120)

        assert process.returncode == 1
        (error,) = [line for line in err.splitlines() if line.startswith("Error")]
        assert "the MCP server this run started has stopped (killed by SIGKILL" in error
        assert "Run the same command again to resume the run" in error
        rows = sqlite3.connect(db).execute("SELECT state, error FROM episodes").fetchall()
        states = [state for state, _ in rows]
        assert "failed" not in states and 1 <= states.count("done") < 8, rows

        resumed = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    states = [row[0] for row in sqlite3.connect(db).execute("SELECT state FROM episodes")]
    assert states == ["done"] * 8


def _has_episodes(db: Path) -> bool:
    try:
        return bool(sqlite3.connect(db).execute("SELECT name FROM sqlite_master WHERE name = 'episodes'").fetchone())
    except sqlite3.Error:
        return False


def _probe(settings: Settings, run: str, server: str | None = None) -> RunProgress:
    config = EvalConfig(
        run=run, model="", suite="builtin", agent="probe", methods=METHODS[:2], kinds=("direct",), server=server
    )
    return anyio.run(_with_scorer, settings, config)


def test_a_run_against_a_running_server_with_the_same_data_directory_finds_its_tools(tmp_path: Path) -> None:
    from pau_mcp.server.launch import http_server

    env = {k: v for k, v in os.environ.items() if k != "PAU_MCP_TOOL_KEY"}
    with http_server(["--data-dir", str(tmp_path), "--db", str(tmp_path / "runs.db")], env=env) as url:
        settings = Settings.from_options(data_dir=tmp_path, db=tmp_path / "runs.db")
        progress = _probe(settings, "shared-key", server=url)
    assert (progress.done, progress.failed) == (2, 0)


def test_a_run_against_a_server_with_another_tool_key_says_how_to_give_the_key(tmp_path: Path) -> None:
    from pau_mcp.harness import EvalError
    from pau_mcp.server.launch import http_server

    with http_server(["--tool-key", "the-servers-own-key-0123", "--db", str(tmp_path / "server.db")]) as url:
        settings = Settings.from_options(data_dir=tmp_path, db=tmp_path / "runs.db")
        with pytest.raises(EvalError) as refused:
            _probe(settings, "other-key", server=url)
    assert "--tool-key" in str(refused.value) and "PAU_MCP_TOOL_KEY" in str(refused.value)
    assert not Path(settings.db_path).exists()  # checked before the run was created


def test_a_run_name_that_cannot_label_a_session_is_refused_before_anything_starts(tmp_path: Path) -> None:
    from pau_mcp.harness import EvalError

    settings = Settings.from_options(data_dir=tmp_path, db=tmp_path / "runs.db")
    with pytest.raises(EvalError, match="letters"):
        _probe(settings, "my run")
    assert not Path(settings.db_path).exists()


def _episode_sessions(db: Path, run: str) -> list[tuple[str, str, str]]:
    """``(key, credential, client)`` of each session of a run, as the server recorded it."""
    return (
        sqlite3.connect(db)
        .execute(
            "SELECT s.key, s.credential, s.client FROM sessions s JOIN runs r ON s.run_id = r.id WHERE r.name = ?"
            " ORDER BY s.key",
            (run,),
        )
        .fetchall()
    )


@pytest.mark.parametrize(("era", "spoken"), [(None, "MCP 2026-07-28"), ("legacy", "MCP 2025-11-25")])
def test_each_episode_speaks_the_new_revision_by_default_under_a_session_token_of_its_own(
    tmp_path: Path, era: str | None, spoken: str
) -> None:
    settings = Settings.from_options(data_dir=tmp_path, db=tmp_path / "runs.db", mcp_era=era)
    progress = _probe(settings, "eras")
    assert (progress.done, progress.failed) == (2, 0)
    sessions = _episode_sessions(tmp_path / "runs.db", "eras")
    assert [key for key, _, _ in sessions] == [f"eras/{m}/1" for m in METHODS[:2]]
    assert all(credential == "token" and client.endswith(spoken) for _, credential, client in sessions), sessions


def test_a_run_against_a_running_server_gives_each_episode_a_session_token_too(tmp_path: Path) -> None:
    from pau_mcp.server.launch import http_server

    db = tmp_path / "runs.db"
    env = {k: v for k, v in os.environ.items() if k != "PAU_MCP_TOOL_KEY"}
    args = ["--data-dir", str(tmp_path), "--db", str(db), "--token", "operator-token-0123", "--stateless"]
    with http_server(args, env=env) as url:
        settings = Settings.from_options(data_dir=tmp_path, db=db, token="operator-token-0123")
        progress = _probe(settings, "remote", server=url)
    assert (progress.done, progress.failed) == (2, 0)
    assert [credential for _, credential, _ in _episode_sessions(db, "remote")] == ["token", "token"]
