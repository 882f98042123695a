"""The Tasks extension (SEP-2663): a long call answered with a task, for a client that negotiated it, with the task's
state in the run store (any replica answers for it) and owned by the credential that made it."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from conftest import TASKS, TEST_KEY, ModernSession, memory_http_server

from pau_mcp.manifests import tool_name
from pau_mcp.server import TokenSigner
from pau_mcp.tls import shared_context

SLOW = tool_name(TEST_KEY, "secret/m2")  # loops until the CPU limit on a truthy argument
FAST = tool_name(TEST_KEY, "secret/m1")


def _terminal(session: ModernSession, task_id: str, timeout_s: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        task = session.request("tasks/get", {"taskId": task_id})
        if task["status"] in ("completed", "failed", "cancelled"):
            return task
        time.sleep(0.1)
    raise AssertionError(f"task {task_id} did not end within {timeout_s} s: {task}")


def _status(session: ModernSession, task_id: str, wanted: str, timeout_s: float = 10) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        task = session.request("tasks/get", {"taskId": task_id})
        if task["status"] == wanted:
            return task
        time.sleep(0.05)
    raise AssertionError(f"task {task_id} is not {wanted} within {timeout_s} s: {task}")


@contextlib.contextmanager
def _sessions(url: str, tasks: bool = False, headers: dict[str, str] | None = None) -> Iterator[ModernSession]:
    session = ModernSession(url, tasks=tasks, headers=headers)
    try:
        yield session
    finally:
        session.close()


def test_a_call_near_the_cpu_limit_becomes_a_task_for_a_client_that_negotiated_tasks(
    tmp_path: Path, secret_manifests: Path
) -> None:
    db = tmp_path / "runs.db"
    args = ("--manifests", str(secret_manifests), "--suite", "secret", "--db", str(db), "--tool-key", TEST_KEY)
    with memory_http_server(*args) as url, _sessions(url, tasks=True) as client:
        fast = client.request("tools/call", {"name": FAST, "arguments": {"arg0": 2}})
        assert fast["resultType"] == "complete" and fast["structuredContent"]["value"] == "30"

        created = client.request("tools/call", {"name": SLOW, "arguments": {"arg0": 1}})
        assert created["resultType"] == "task" and created["status"] == "working"
        assert {"taskId", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"} <= set(created)
        assert "result" not in created and "requestState" not in created
        task = _terminal(client, created["taskId"])
        assert task["status"] == "completed" and task["resultType"] == "complete"
        outcome = task["result"]["structuredContent"]
        assert outcome["status"] == "timeout" and outcome["queries_used"] == 1
    # The call counted and is recorded like any other.
    counted = sqlite3.connect(db).execute("SELECT status FROM calls WHERE counted = 1 AND tool = ?", (SLOW,)).fetchall()
    assert counted == [("timeout",)]


def test_a_client_that_does_not_negotiate_tasks_gets_the_result_as_before(
    tmp_path: Path, secret_manifests: Path
) -> None:
    args = ("--manifests", str(secret_manifests), "--suite", "secret", "--db", str(tmp_path / "runs.db"))
    with memory_http_server(*args, "--tool-key", TEST_KEY) as url, _sessions(url) as client:
        result = client.request("tools/call", {"name": SLOW, "arguments": {"arg0": 1}})
        assert result["resultType"] == "complete" and result["structuredContent"]["status"] == "timeout"
        # The extension's methods are refused to it, naming the extension.
        status, reply = client.send("tasks/get", {"taskId": "any"})
        assert status == 400 and reply["error"]["code"] == -32021
        assert TASKS in reply["error"]["data"]["requiredCapabilities"]["extensions"]


def test_a_task_is_its_credentials_alone(tmp_path: Path) -> None:
    signer = TokenSigner(TEST_KEY)
    args = ("--suite", "conformance", "--db", str(tmp_path / "runs.db"), "--tool-key", TEST_KEY, "--token", "main-1234")
    owner_headers = {"authorization": f"Bearer {signer.issue('owner')}"}
    other_headers = {"authorization": f"Bearer {signer.issue('other')}"}
    with (
        memory_http_server(*args) as url,
        _sessions(url, tasks=True, headers=owner_headers) as owner,
        _sessions(url, tasks=True, headers=other_headers) as other,
    ):
        created = owner.request("tools/call", {"name": "slow_compute", "arguments": {"seconds": 30}})
        task_id = created["taskId"]
        replies = [other.send(method, {"taskId": task_id}) for method in ("tasks/get", "tasks/cancel")]
        unknown = other.send("tasks/get", {"taskId": "0" * 32})
        for status, reply in [*replies, unknown]:
            assert status == 400 and reply["error"]["code"] == -32602
        # Another credential's task is answered exactly as none at all.
        assert replies[0][1]["error"]["message"].replace(task_id, "X") == unknown[1]["error"]["message"].replace(
            "0" * 32, "X"
        )
        assert owner.request("tasks/get", {"taskId": task_id})["status"] == "working"
        assert owner.request("tasks/cancel", {"taskId": task_id}) == {"resultType": "complete", **_meta(owner)}
        assert _terminal(owner, task_id)["status"] == "cancelled"


def _meta(session: ModernSession) -> dict[str, Any]:
    """The ``_meta`` a result of this server carries (its identity), for comparing whole results."""
    status, reply = session.send("server/discover", {})
    return {"_meta": reply["result"]["_meta"]}


def test_a_task_lives_in_the_store_so_another_replica_answers_for_it(tmp_path: Path) -> None:
    args = ("--suite", "conformance", "--db", str(tmp_path / "runs.db"), "--tool-key", TEST_KEY, "--run", "shared")
    with (
        memory_http_server(*args) as first,
        memory_http_server(*args) as second,
        _sessions(first, tasks=True) as here,
        _sessions(second, tasks=True) as there,
    ):
        created = here.request("tools/call", {"name": "confirm_delete", "arguments": {"filename": "a.txt"}})
        task = _status(there, created["taskId"], "input_required")
        (key,) = task["inputRequests"]
        assert task["inputRequests"][key]["method"] == "elicitation/create"
        there.request("tasks/update", {"taskId": created["taskId"], "inputResponses": {
            key: {"action": "accept", "content": {"confirm": True}}}})  # fmt: skip
        done = _terminal(there, created["taskId"])
        assert done["status"] == "completed"
        assert done["result"]["content"][0]["text"] == "a.txt: delete accept (confirm: true)"

        # Cancelled on the other replica, the running task stops on its own.
        slow = here.request("tools/call", {"name": "slow_compute", "arguments": {"seconds": 60}})
        there.request("tasks/cancel", {"taskId": slow["taskId"]})
        assert _terminal(there, slow["taskId"], timeout_s=10)["status"] == "cancelled"


def test_task_status_notifications_reach_a_listen_stream_that_asked_for_them(tmp_path: Path) -> None:
    args = ("--suite", "conformance", "--db", str(tmp_path / "runs.db"), "--tool-key", TEST_KEY)
    with memory_http_server(*args) as url, _sessions(url, tasks=True) as client:
        created = client.request("tools/call", {"name": "slow_compute", "arguments": {"seconds": 1}})
        frames: list[dict[str, Any]] = []
        ended = threading.Event()

        def listen() -> None:
            meta = {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
            }
            body = {"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen",
                    "params": {"notifications": {"taskIds": [created["taskId"], "not-mine"]}, "_meta": meta}}  # fmt: skip
            headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
                       "mcp-method": "subscriptions/listen"}  # fmt: skip
            with (
                httpx2.Client(verify=shared_context(), timeout=30) as http,
                http.stream("POST", url, json=body, headers=headers) as stream,
            ):
                for line in stream.iter_lines():
                    if line.startswith("data:"):
                        frames.append(json.loads(line[5:]))
                        if frames[-1].get("params", {}).get("status") == "completed":
                            break
            ended.set()

        threading.Thread(target=listen, daemon=True).start()
        assert ended.wait(30), frames
    acknowledged, *notes = frames
    assert acknowledged["method"] == "notifications/subscriptions/acknowledged"
    assert acknowledged["params"]["notifications"]["taskIds"] == [created["taskId"]]  # not another's, nor unknown
    assert notes and all(n["method"] == "notifications/tasks" for n in notes)
    assert all(n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen-1" for n in notes)
    assert notes[-1]["params"]["result"]["content"][0]["text"].startswith("Computed")


def test_a_tool_that_only_runs_as_a_task_is_refused_to_a_client_without_the_extension(tmp_path: Path) -> None:
    args = ("--suite", "conformance", "--db", str(tmp_path / "runs.db"))
    with memory_http_server(*args) as url, _sessions(url) as client:
        status, reply = client.send("tools/call", {"name": "failing_job", "arguments": {}})
        assert status == 400 and reply["error"]["code"] == -32021
        assert reply["error"]["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}


@pytest.mark.parametrize("header", ["sep-2663-wrong", None])
def test_a_tasks_request_whose_name_header_disagrees_with_its_task_is_refused(
    tmp_path: Path, header: str | None
) -> None:
    with memory_http_server("--suite", "conformance", "--db", str(tmp_path / "runs.db")) as url:
        with _sessions(url, tasks=True) as client:
            created = client.request("tools/call", {"name": "slow_compute", "arguments": {"seconds": 30}})
            extra = {"mcp-name": header} if header else {}
            status, reply = client.send(
                "tasks/get", {"taskId": created["taskId"]}, capabilities=None, meta=None, **extra
            )
            if header:
                assert status == 400 and reply["error"]["code"] == -32020
            else:
                assert status == 200 and reply["result"]["taskId"] == created["taskId"]
            client.request("tasks/cancel", {"taskId": created["taskId"]})


def test_a_submit_that_scores_slowly_becomes_a_task_whose_result_holds_the_scores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fakellm import FakeLLM

    def slow_replies(body: dict[str, Any]) -> str:
        # A judge and a code writer taking their time. They are asked at once, so each alone must outlive the
        # second after which a call becomes a task (0.8 s each finished in 0.95 s on a quiet machine).
        time.sleep(1.6)
        if "<reference-" in json.dumps(body["messages"]):
            return "Rating: 4"
        return "```python\ndef test_func(arg0):\n    return 0\n```"

    with FakeLLM(responder=slow_replies) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        args = (
            "--db", str(tmp_path / "runs.db"), "--tool-key", TEST_KEY, "--methods", "builtin/b002", "--feedback",
            "score", "--judge-model", "openai/judge", "--coder-model", "openai/coder",
        )  # fmt: skip
        with memory_http_server(*args) as url, _sessions(url, tasks=True) as client:
            tool = tool_name(TEST_KEY, "builtin/b002")
            created = client.request("tools/call", {"name": "submit", "arguments": {
                "method": tool, "description": "returns zero", "code": "def test_func(arg0):\n    return 0"}},
                meta=None, **{"mcp-param-method": tool})  # fmt: skip
            assert created["resultType"] == "task"
            task = _terminal(client, created["taskId"], timeout_s=60)
    scored = task["result"]["structuredContent"]
    assert task["status"] == "completed" and scored["status"] == "scored"
    assert scored["scores"]["judge_rating"] == 4
