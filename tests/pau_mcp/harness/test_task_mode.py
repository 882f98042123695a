"""`pau-mcp eval --mode tasks --docs SOURCE`: an agent answers a suite's tasks with its hidden tools, documented as
the run says, through a real `pau-mcp serve`; answers are checked by exact match and by re-executing the calls in
the real sandbox; the report shows accuracy by hops and by documentation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakellm import FakeLLM, Reply
from pau_command import Ran, run_pau
from tasksuite import make_task_suite

from pau_mcp.harness.tasks import _plain_answer
from pau_mcp.manifests import ManifestStore, tool_name
from pau_mcp.runstore import RunStore

KEY = "task-test-key-0123456789abcdef"
MODEL = "openai/fake-answerer"


def tool(name: str) -> str:
    return tool_name(KEY, f"mini/{name}")


def brain(body: dict[str, Any]) -> Reply | str:
    """Answers the three tasks: t1 and t2 rightly (t2 with its calls), t3 with the right value but no calls."""
    messages = body["messages"]
    question = str(messages[1]["content"])
    done = sum(1 for m in messages if m["role"] == "tool")
    plan: list[tuple[str, dict[str, Any]]]
    if "2045" in question:
        plan = [(tool("b001"), {"args": "(2045,)"}), ("answer", {"answer": "40"})]
    elif "234" in question:
        calls = [{"tool": tool("b001"), "args": "(234,)"}, {"tool": tool("b023"), "args": "($1,)"}]
        plan = [
            (tool("b001"), {"arg0": 234}),
            (tool("b023"), {"arg0": 24}),
            ("answer", {"answer": "'220'", "calls": calls}),
        ]
    else:
        plan = [("answer", {"answer": "'12'", "calls": []})]
    name, arguments = plan[min(done, len(plan) - 1)]
    return Reply(tool_calls=[(name, arguments)])


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    monkeypatch.setenv("PAU_MCP_TOOL_KEY", KEY)
    with FakeLLM(responder=brain) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        yield server


def _tasks_run(tmp_path: Path, docs: str) -> None:
    done = run_pau(
        "eval", "--mode", "tasks", "--docs", docs, "--suite", "mini", "--model", MODEL, "--run", f"tasks-{docs}",
        "--manifests", str(tmp_path / "manifests"), "--db", str(tmp_path / "runs.db"), "--data-dir", str(tmp_path),
        "--budget", "3", "--concurrency", "1",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "task accuracy 0.667 (2 of 3 correct)" in done.stdout


def test_a_two_hop_task_is_answered_through_the_tools_and_verified_by_re_executing_its_calls(
    tmp_path: Path, fake: FakeLLM
) -> None:
    make_task_suite(tmp_path / "manifests")
    assert run_pau("manifests", "freeze", "--manifests", str(tmp_path / "manifests"), "--suite", "mini").returncode == 0
    _tasks_run(tmp_path, "none")
    store = RunStore(tmp_path / "runs.db")
    episodes = {e.method_id: e for e in store.episodes(store.run_id("tasks-none"), with_trajectories=True)}
    t2 = episodes["mini/t2"]
    assert t2.state == "done" and t2.queries == 2 and t2.concluded == 1
    score = t2.scores["task"]
    assert score.value == 1.0
    assert (score.detail["verified"], score.detail["same_methods"], score.detail["hops"]) == (True, True, 2)
    assert [c["args"] for c in score.detail["calls"]] == ["(234,)", "(24,)"]
    t3 = episodes["mini/t3"].scores["task"]
    assert t3.value == 0.0 and t3.detail["answer_matched"] and t3.detail["verified"] is False
    assert episodes["mini/t1"].scores["task"].value == 1.0
    # The agent sees the question, never the task's steps or answer; the tools are documented with nothing.
    first = next(body for body in fake.requests if "234" in str(body["messages"][1]["content"]))
    assert "($1,)" not in json.dumps(first) and "220" not in json.dumps(first)
    described = {t["function"]["name"]: t["function"]["description"] for t in first["tools"]}
    assert "answer" in described and len(described) == 6  # the five hidden functions and the answer
    assert all("It has no documentation" in text for name, text in described.items() if name.startswith("fn_"))


def test_accuracy_is_reported_by_hops_and_by_documentation_and_gold_is_served_only_when_asked(
    tmp_path: Path, fake: FakeLLM
) -> None:
    make_task_suite(tmp_path / "manifests")
    assert run_pau("manifests", "freeze", "--manifests", str(tmp_path / "manifests"), "--suite", "mini").returncode == 0
    _tasks_run(tmp_path, "examples")
    gold = ManifestStore([tmp_path / "manifests"]).method("mini/b023").description
    assert not any(gold in json.dumps(body) for body in fake.requests)
    _tasks_run(tmp_path, "gold")
    assert any(gold in json.dumps(body) for body in fake.requests)
    markdown = tmp_path / "report.md"
    reported = run_pau(
        "report", "tasks-examples", "tasks-gold", "--db", str(tmp_path / "runs.db"), "--markdown", str(markdown)
    )
    assert reported.returncode == 0, reported.stderr
    text = markdown.read_text()
    by_docs = text.split("Tasks by documentation")[1].split("\n\n##")[0]
    assert "| tasks-examples | openai/fake-answerer | examples | 3 | 66.7% | 3 (100.0%) | 1 of 2 | 0 | 1.0 |" in by_docs
    assert "| tasks-gold | openai/fake-answerer | gold | 3 |" in by_docs
    hops = text.split("Task accuracy by hops")[1]
    assert "| tasks-gold | gold | 100.0% (1/1) | 100.0% (1/1) | 0.0% (0/1) | 66.7% |" in hops


def test_task_mode_refuses_another_agent_and_docs_without_tasks(tmp_path: Path) -> None:
    agent = run_pau("eval", "--mode", "tasks", "--agent", "paper", "--model", MODEL, "--db", str(tmp_path / "r.db"))
    assert agent.returncode == 2 and "leave --agent out" in agent.stderr
    docs = run_pau("eval", "--docs", "gold", "--model", MODEL, "--db", str(tmp_path / "r.db"))
    assert docs.returncode == 2 and "add --mode tasks" in docs.stderr
    make_task_suite(tmp_path / "manifests", tasks=[])
    none = run_pau(
        "eval", "--mode", "tasks", "--model", MODEL, "--suite", "mini", "--manifests", str(tmp_path / "manifests"),
        "--db", str(tmp_path / "r.db"), "--data-dir", str(tmp_path),
    )  # fmt: skip
    assert none.returncode == 1 and "suite 'mini' has no tasks" in none.stderr


def test_the_built_in_suites_tasks_are_answered_and_checked_through_its_own_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A model that knows every answer and the calls that make it: each of the nine shipped tasks (one, two and three
    # hops) reaches the real server's tools, and its answer and calls check out against the frozen answers.
    tasks = {task.question: task for task in ManifestStore().suite("builtin").tasks.values()}
    assert sorted(len(task.steps) for task in tasks.values()) == [1, 1, 1, 2, 2, 2, 3, 3, 3]

    def knows(body: dict[str, Any]) -> Reply:
        (task,) = [task for question, task in tasks.items() if question in str(body["messages"][1]["content"])]
        calls = [{"tool": tool_name(KEY, step.method), "args": step.input} for step in task.steps]
        assert task.answer is not None
        answer = {"answer": task.answer.value} | ({"calls": calls} if task.asks_calls else {})
        return Reply(tool_calls=[("answer", answer)])

    monkeypatch.setenv("PAU_MCP_TOOL_KEY", KEY)
    with FakeLLM(responder=knows) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        done = run_pau(
            "eval", "--mode", "tasks", "--model", MODEL, "--db", str(tmp_path / "runs.db"), "--data-dir", str(tmp_path)
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "task accuracy 1.000 (9 of 9 correct)" in done.stdout


def test_an_answer_written_as_text_is_read_after_its_last_marker_within_a_capped_tail() -> None:
    assert _plain_answer("I think so.\nANSWER: '220'\nThat is all.") == "'220'"
    assert _plain_answer("answer: 1\nAnswer:  [2, 3]") == "[2, 3]"
    assert _plain_answer("42") == "42"
    flood = "answer:" * (300 * 1024)  # a megabyte of markers: only the last 64 KiB are searched, once
    assert _plain_answer(flood) == ""


def _first_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reply: Reply | None = None
) -> tuple[dict[str, Any], Ran]:
    """The first request of a task run on the built-in suite (its first task only), and the finished command."""
    monkeypatch.setenv("PAU_MCP_TOOL_KEY", KEY)
    with FakeLLM(responder=lambda body: reply or Reply(tool_calls=[("answer", {"answer": "0", "calls": []})])) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        done = run_pau(
            "eval", "--mode", "tasks", "--model", MODEL, "--limit", "1", "--db", str(tmp_path / "runs.db"),
            "--data-dir", str(tmp_path),
        )  # fmt: skip
        return fake.requests[0], done


def test_the_first_request_states_what_every_tool_says_once_and_each_tool_keeps_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, done = _first_request(tmp_path, monkeypatch)
    assert done.returncode in (0, 1), done.stderr
    text = json.dumps(first)
    hidden = [tool["function"] for tool in first["tools"] if tool["function"]["name"].startswith("fn_")]
    assert len(hidden) == 65  # and `answer`
    # Said once for all 66 tools, where each description used to say it: how to call, what the budget is.
    assert text.count("You cannot read its code; call it to find out what it does.") == 1
    assert text.count("each result says how many calls you have left") == 1
    assert "call `submit`" not in text  # the task offers no submit: that sentence is left out, not stated
    assert "one parameter, `args`" in first["messages"][1]["content"]
    # Each tool keeps its header and its examples, with a bare schema (its one parameter is said once).
    for function in hidden:
        assert function["description"].startswith("`def test_func(") and "test_func(" in function["description"]
        assert function["parameters"] == {"type": "object"}
    # 98,430 characters (22-28 thousand tokens) before; an 8k-context model reads this one (docs/harness.md).
    assert len(text) < 20_000


def test_a_first_task_request_too_long_for_the_model_says_to_serve_a_longer_context_not_a_lower_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    too_long = {"error": {"code": 400, "message": "request (9216 tokens) exceeds the available context size (4096 "
                "tokens)", "type": "exceed_context_size_error", "n_prompt_tokens": 9216, "n_ctx": 4096}}  # fmt: skip
    monkeypatch.setenv("PAU_MCP_TOOL_KEY", KEY)
    with FakeLLM() as fake:
        fake.answer_bytes(json.dumps(too_long).encode(), status=400)
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        done = run_pau(
            "eval", "--mode", "tasks", "--model", MODEL, "--limit", "1", "--db", str(tmp_path / "runs.db"),
            "--data-dir", str(tmp_path),
        )  # fmt: skip
    assert done.returncode == 1 and len(fake.requests) == 1  # not retried: it would fail the same way
    said = " ".join(done.stderr.split())
    assert "task mode's first request" in said and "(65 tools)" in said, said
    assert "9,216 tokens; the model's context is 4,096" in said and "of at least 10,240 tokens" in said
    assert "llama-server -c" in said and "--budget and --max-tokens do not shorten it" in said
