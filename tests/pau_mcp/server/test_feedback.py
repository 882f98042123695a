"""`pau-mcp serve --feedback score`: submit answers with scores (never gold material) and records them."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import ROOT, RawSession, http_server, memory_session, text_of, tool_of
from cpu_time import main_thread_cpu_seconds
from fakellm import FakeLLM
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult

from pau_mcp.contract import Feedback
from pau_mcp.manifests import ManifestStore

METHOD = ManifestStore().method("builtin/b002")


def _replies(body: dict[str, Any]) -> str:
    prompt = json.dumps(body["messages"])
    if "<reference-" in prompt:
        return f"The reference: {METHOD.description}\nRating: 3"
    return "```python\ndef test_func(arg0):\n    return None\n```"


def test_submit_with_feedback_returns_scores_records_them_and_reveals_no_gold(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with FakeLLM(responder=_replies) as fake:
        env = {**os.environ, "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "test"}
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "pau_mcp", "serve", "--feedback", "score", "--db", str(db), "--data-dir", str(tmp_path),
                  "--judge-model", "openai/judge", "--coder-model", "openai/coder", "--methods", METHOD.id],
            cwd=str(ROOT), env=env,
        )  # fmt: skip

        async def main() -> dict[str, Any]:
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                with anyio.fail_after(120):
                    await session.initialize()
                    result = await session.call_tool(
                        "submit",
                        {
                            "method": tool_of(METHOD.id),
                            "description": "counts things",
                            "code": "def test_func(arg0):\n    return 0",
                        },
                    )
                    assert not result.is_error
                    return {"structured": result.structured_content, "text": text_of(result.content[0])}

        shown = anyio.run(main)
    scores = shown["structured"]["scores"]
    assert scores["judge_rating"] == 3 and 0 <= scores["code_match"] < 1 and "direct_code_match" in scores
    # The scorer's agent view, key for key (the server once dropped the failure counts the scorer documents as shown).
    assert sum(scores["direct_code_failures"].values()) > 0 and set(scores) <= set(Feedback.model_fields)
    text = json.dumps(shown)
    assert METHOD.description not in text
    assert not [
        case.input
        for case in METHOD.tests
        if case.input in text and case.input != scores.get("counterexample", {}).get("input")
    ]
    rows = sqlite3.connect(db).execute("SELECT kind, status, value FROM scores ORDER BY kind").fetchall()
    assert [(k, s) for k, s, _ in rows] == [("codematch", "scored"), ("direct", "scored"), ("judge", "scored")]
    assert dict((k, v) for k, _, v in rows)["judge"] == 3.0


# -- what feedback may cost and reveal (direct-code scoring: no model needed) -------------------------------------


def _table_code(table: dict[str, str]) -> str:
    """A lookup table of inputs the agent was told about: the code a feedback-farming agent submits."""
    entries = ", ".join(f"{key}: {value}" for key, value in table.items())
    return f"TABLE = {{{entries}}}\n\ndef test_func(*args):\n    return TABLE.get(args)\n"


def _feedback_server(db: Path, *extra: str) -> AbstractAsyncContextManager[ClientSession]:
    return memory_session("--feedback", "score", "--db", str(db), "--methods", METHOD.id, *extra)


def test_twenty_two_feedback_submits_reveal_no_more_counterexamples_than_the_limit(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    tool = tool_of(METHOD.id)

    async def main() -> list[CallToolResult]:
        table: dict[str, str] = {}
        replies: list[CallToolResult] = []
        # Submissions past --max-submissions (10 by default) would not be recorded: allowed here, so that only the
        # feedback limit stands between this agent and more counterexamples.
        async with _feedback_server(db, "--budget", "20", "--max-submissions", "30") as session:
            for _ in range(22):
                reply = await session.call_tool(
                    "submit", {"method": tool, "description": "runs of characters", "code": _table_code(table)}
                )
                assert not reply.is_error
                replies.append(reply)
                example = (reply.structured_content.get("scores") or {}).get("counterexample")
                if example:
                    table[example["input"]] = example["expected"]
        return replies

    replies = anyio.run(main)
    scored = [r for r in replies if r.structured_content.get("scores")]
    examples = [r for r in scored if "counterexample" in r.structured_content["scores"]]
    assert len(scored) == 3 and len(examples) == 3
    assert all(r.structured_content["scores"]["direct_code_match"] < 1 for r in scored)
    later = replies[3]
    assert "feedback" in text_of(later.content[0]) and "used" in text_of(later.content[0])
    assert later.structured_content["feedback_left"] == 0 and "scores" not in later.structured_content
    assert later.structured_content["status"] == "feedback_used"
    assert all(r.structured_content["status"] == "scored" for r in scored)
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM submissions").fetchone() == (22,)


def test_each_counterexample_costs_one_query_and_none_is_given_without_a_query_left(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    tool = tool_of(METHOD.id)
    wrong = "def test_func(arg0):\n    return []\n"

    async def main() -> dict[str, CallToolResult]:
        async with _feedback_server(db, "--budget", "3", "--feedback-limit", "5", "--run", "costs") as session:
            first = await session.call_tool(tool, {"arg0": "aab"})
            with_example = await session.call_tool("submit", {"method": tool, "description": "d", "code": wrong})
            last = await session.call_tool(tool, {"arg0": "abb"})
            over = await session.call_tool(tool, {"arg0": "b"})
            without = await session.call_tool("submit", {"method": tool, "description": "d", "code": wrong})
            return {"first": first, "with": with_example, "last": last, "over": over, "without": without}

    got = anyio.run(main)
    assert got["first"].structured_content["queries_left"] == 2
    assert "counterexample" in got["with"].structured_content["scores"]
    assert got["with"].structured_content["queries_left"] == 1
    assert got["last"].structured_content["queries_used"] == 3 and got["last"].structured_content["queries_left"] == 0
    assert got["over"].structured_content["status"] == "over_budget" and "budget" in text_of(got["over"].content[0])
    assert "direct_code_match" in got["without"].structured_content["scores"]
    assert "counterexample" not in got["without"].structured_content["scores"]
    rows = sqlite3.connect(db).execute("SELECT status, counted, arguments, value FROM calls ORDER BY id").fetchall()
    assert [(status, counted) for status, counted, *_ in rows] == [
        ("ok", 1), ("counterexample", 1), ("ok", 1), ("over_budget", 0)
    ]  # fmt: skip
    example = got["with"].structured_content["scores"]["counterexample"]
    assert rows[1][2:] == (example["input"], example["expected"])
    exported = [json.loads(line) for line in _export(db, "costs")]
    assert exported[0]["num_queries"] == 3


def _export(db: Path, run: str) -> list[str]:
    import subprocess

    result = subprocess.run(
        [sys.executable, "-m", "pau_mcp", "runs", "export", run, "--db", str(db)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_feedback_never_echoes_what_the_submitted_code_returned(tmp_path: Path) -> None:
    marker = "ECHO-MARKER-5521"
    code = f"def test_func(arg0):\n    return '{marker}' + str(len(arg0))\n"

    async def main() -> CallToolResult:
        async with _feedback_server(tmp_path / "runs.db") as session:
            return await session.call_tool("submit", {"method": tool_of(METHOD.id), "description": "d", "code": code})

    reply = anyio.run(main)
    assert "counterexample" in reply.structured_content["scores"]
    assert set(reply.structured_content["scores"]["counterexample"]) == {"input", "expected"}
    assert marker not in reply.model_dump_json()


def test_a_negative_feedback_limit_is_a_usage_error(tmp_path: Path) -> None:
    import subprocess

    result = subprocess.run(
        [sys.executable, "-m", "pau_mcp", "serve", "--feedback", "score", "--feedback-limit", "-1",
         "--db", str(tmp_path / "r.db")],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 2 and "PAU_MCP_FEEDBACK_LIMIT" in result.stderr


def test_spent_feedback_and_counterexample_queries_survive_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    tool = tool_of(METHOD.id)
    query = {"session": "farmer", "run": "feedback-restarts"}
    wrong = {"method": tool, "description": "d", "code": "def test_func(arg0):\n    return None\n"}
    args = ("--db", str(db), "--feedback", "score", "--feedback-limit", "2", "--budget", "5", "--methods", METHOD.id)
    with http_server(*args) as url:
        raw = RawSession(url, query=query)
        before = [raw.call("submit", wrong, query=query) for _ in range(2)]
        raw.close()
    with http_server(*args) as url:
        raw = RawSession(url, query=query)
        after = raw.call("submit", wrong, query=query)
        call = raw.call(tool, {"arg0": "x"}, query=query)
        raw.close()
    assert all("counterexample" in r["result"]["structuredContent"]["scores"] for r in before)
    assert "scores" not in after["result"]["structuredContent"]
    assert call["result"]["structuredContent"]["queries_used"] == 3


def test_concurrent_submits_never_get_more_feedback_than_the_limit(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    tool = tool_of(METHOD.id)
    wrong = {"method": tool, "description": "d", "code": "def test_func(arg0):\n    return 0\n"}

    async def main() -> list[CallToolResult]:
        replies: list[CallToolResult] = []
        async with _feedback_server(db, "--feedback-limit", "2", "--budget", "20") as session:

            async def one() -> None:
                replies.append(await session.call_tool("submit", wrong))

            with anyio.fail_after(120):
                async with anyio.create_task_group() as group:
                    for _ in range(8):
                        group.start_soon(one)
        return replies

    replies = anyio.run(main)
    assert len(replies) == 8 and sum("scores" in r.structured_content for r in replies) == 2
    rows = sqlite3.connect(db).execute("SELECT SUM(feedback), COUNT(*) FROM submissions").fetchone()
    counted = sqlite3.connect(db).execute("SELECT COUNT(*) FROM calls WHERE status = 'counterexample'").fetchone()
    assert rows == (2, 8) and counted == (2,)


def test_without_a_budget_counterexamples_are_still_counted_and_limited(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    tool = tool_of(METHOD.id)
    wrong = {"method": tool, "description": "d", "code": "def test_func(arg0):\n    return 0\n"}

    async def main() -> list[CallToolResult]:
        async with _feedback_server(db, "--budget", "0", "--feedback-limit", "2") as session:
            return [await session.call_tool("submit", wrong) for _ in range(3)]

    replies = anyio.run(main)
    assert [("counterexample" in (r.structured_content.get("scores") or {})) for r in replies] == [True, True, False]
    assert replies[1].structured_content["queries_used"] == 2 and replies[1].structured_content["queries_left"] is None


def test_a_submit_without_code_gets_no_counterexample_and_keeps_its_query(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    tool = tool_of(METHOD.id)

    async def main() -> tuple[CallToolResult, CallToolResult]:
        async with _feedback_server(db, "--budget", "2") as session:
            submitted = await session.call_tool("submit", {"method": tool, "description": "runs of characters"})
            call = await session.call_tool(tool, {"arg0": "aa"})
            return submitted, call

    submitted, call = anyio.run(main)
    assert "counterexample" not in submitted.structured_content["scores"]
    assert submitted.structured_content["queries_left"] == 2 and call.structured_content["queries_used"] == 1


# -- a hostile submission and everyone else ------------------------------------------------------------------------

#: Submissions whose code once took seconds of the server's event loop to read (a fence that never closes, as
#: long as a submission may be), and code that is slow to compile and hands back large outcomes to compare:
#: every other session's requests waited behind them.
_SLOW = "def test_func(arg0):\n    return [i for i in range(100)]\n"
HOSTILE_CODE = (
    "```" + "a" * 99_990, "`" * 99_999, "```" + " " * 99_990 + "x", "\n" * 99_990 + "(",
    _SLOW + "x = 1\n" * ((99_990 - len(_SLOW)) // 6),
)  # fmt: skip


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_another_sessions_ping_stays_fast_while_hostile_submissions_are_scored(tmp_path: Path) -> None:
    from replicas import Replica

    tool = tool_of(METHOD.id)
    db = tmp_path / "runs.db"
    server = Replica(["--feedback", "score", "--feedback-limit", "10", "--db", str(db), "--methods", METHOD.id])
    try:
        url = server.url
        bystander = RawSession(url)
        hostile = [RawSession(url) for _ in HOSTILE_CODE]
        try:
            bystander.request("ping", {})  # a warm connection: the first request's set-up is not measured
            loop_before = main_thread_cpu_seconds(server.process.pid)

            def submit(session: RawSession, code: str) -> list[dict[str, Any]]:
                arguments = {"method": tool, "description": "d", "code": code}
                return [session.call("submit", arguments) for _ in range(2)]

            with ThreadPoolExecutor(len(hostile)) as pool:
                replies = [pool.submit(submit, s, code) for s, code in zip(hostile, HOSTILE_CODE, strict=True)]
                waits = []
                while not all(reply.done() for reply in replies):
                    started = time.monotonic()
                    assert "result" in bystander.request("ping", {})
                    waits.append(time.monotonic() - started)
                    time.sleep(0.02)  # paced: the loop's CPU is for the hostile code, not for a flood of pings
            loop_spent = main_thread_cpu_seconds(server.process.pid) - loop_before
            scored = [r.result() for r in replies]
        finally:
            for session in (bystander, *hostile):
                session.close()
    finally:
        server.stop()
    for pair in scored:
        for reply in pair:
            scores = reply["result"]["structuredContent"]["scores"]
            assert scores["direct_code_match"] == 0, scores
    assert waits, "no ping was sent while the submissions were scored"
    # What stalled every session (25 s) was scoring's CPU work on the event loop, which runs in the server's main
    # thread: its CPU is bounded, not the pings' wall time, which a busy machine stretches with the loop free.
    allowed = 0.5 + 0.003 * len(waits)  # measured: 0.65 ms a ping, 0.8-1.1 s for 1,300-1,600 pings unpaced
    assert loop_spent < allowed, (
        f"the event loop spent {loop_spent:.2f} s of CPU (allowed {allowed:.2f} s) while hostile code was scored; "
        f"the longest of {len(waits)} pings waited {max(waits):.2f} s"
    )


_SPIN = "def test_func(arg0):\n    while True:\n        pass\n"


def test_another_agents_feedback_is_scored_at_once_while_spinning_submissions_hold_the_scorer(tmp_path: Path) -> None:
    # Issue 32: four spinning submits of one credential made another agent's feedback submit take 417 s, not 0.8 s.
    tool = tool_of(METHOD.id)
    args = ("--feedback", "score", "--feedback-limit", "10", "--db", str(tmp_path / "runs.db"), "--methods", METHOD.id,
            "--timeout", "0.5", "--budget", "0", "--score-seconds", "2.5")  # fmt: skip
    with http_server(*args) as url:
        # The label travels on every request (a header), as a client's configured URL or headers carry it.
        hogs = [RawSession(url, headers={"x-pau-session": "hog"}) for _ in range(4)]
        victim = RawSession(url, headers={"x-pau-session": "victim"})
        try:

            def submit(session: RawSession, code: str) -> float:
                started = time.monotonic()
                reply = session.call("submit", {"method": tool, "description": "d", "code": code})
                assert "scores" in reply["result"]["structuredContent"], reply
                return time.monotonic() - started

            submit(victim, "def test_func(arg0):\n    return 0\n")  # the scorer is built; the victim's session claimed
            with ThreadPoolExecutor(len(hogs)) as pool:
                hog_times = [pool.submit(submit, hog, _SPIN) for hog in hogs]
                time.sleep(1.5)  # the hog's submissions are being scored
                victim_times = [submit(victim, METHOD.source) for _ in range(3)]
                hog_seconds = [future.result() for future in hog_times]
        finally:
            for session in (victim, *hogs):
                session.close()
    # Before, the victim's scoring queued behind the hog's whole suites; now it takes a turn reserved for a credential
    # holding none, and each spinning submission stops once its time in the sandbox is spent (2.5 s here, so the
    # four hogs cost 10 s of CPU rather than the default's 40).
    # Every one of the victim's submits counts: one scored after the hog's had ended would prove nothing (the first
    # queued behind them for their whole 3.8 s when no turn was kept for it, the two after it then ran alone). The
    # first may start a worker process of its own, hence a third of a hog's time rather than less.
    assert max(victim_times) < min(hog_seconds) / 3, (victim_times, hog_seconds)
