"""``feedback_for``: what the MCP server's submit tool shows an agent when it runs with --feedback score."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fakellm import FakeLLM

from pau_mcp.config import Settings
from pau_mcp.manifests import Case, ManifestStore
from pau_mcp.scoring import FAILURE_KINDS, Scorer, feedback_for
from wasm_runtime import Sandbox
from wasm_runtime.workers import WorkerSandbox

RUNS = ManifestStore().method("builtin/b002")
WRONG = "def test_func(arg0):\n    return [(c, 1) for c in arg0]\n"


def _replies(body: dict[str, Any]) -> str:
    prompt = json.dumps(body["messages"])
    if "Rating: X" in prompt:
        # A judge that quotes the gold description: the agent must never see this reply.
        return f"The reference says: {RUNS.description}\nRating: 4"
    return f"```python\n{WRONG}```"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, worker_sandbox: WorkerSandbox) -> Iterator[FakeLLM]:
    with FakeLLM(responder=_replies) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        _workers[:] = [worker_sandbox]
        yield server
        _workers.clear()


#: The test session's sandbox workers: feedback's scorer runs code in worker processes, as a server's does.
_workers: list[Any] = []


def _session_workers(settings: Settings, progress: Any = None, processes: bool = False) -> Any:
    assert processes, "the feedback scorer runs code in worker processes"
    return _workers[0]


def feedback(
    settings: Settings, description: str, code: str | None, *, method: str = "builtin/b002", **options: Any
) -> dict[str, Any]:
    send = feedback_for(settings, sandboxes=_session_workers)

    async def go() -> dict[str, Any]:
        with anyio.fail_after(120):
            return await send(method, description, code, **options)

    return anyio.run(go)


def test_feedback_holds_every_score_and_no_counterexample_unless_one_is_asked_for(
    fake: FakeLLM, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path, judge_model="openai/judge", coder_model="openai/coder")
    shown = feedback(settings, "Pairs every character with 1.", WRONG)
    assert set(shown) == {"judge_rating", "code_match", "direct_code_match", "direct_code_note", "direct_code_failures"}
    assert (
        shown["judge_rating"] == 4 and 0 < shown["code_match"] < 1 and shown["direct_code_match"] == shown["code_match"]
    )
    wrong = round((1 - shown["direct_code_match"]) * len(RUNS.tests))
    assert shown["direct_code_failures"] == {FAILURE_KINDS["value"]: wrong}
    text = json.dumps(shown)
    assert RUNS.description not in text and "runs.append" not in text
    assert not [case.input for case in RUNS.tests if case.input in text]
    assert len(fake.requests) == 2


def _expected(case: Case) -> str:
    """How the test input's frozen outcome reads (every test of a packaged method has its outcome frozen)."""
    assert case.outcome is not None
    return case.outcome.shown()


def test_a_counterexample_asked_for_holds_its_input_and_the_expected_outcome_only(
    fake: FakeLLM, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path, judge_model="openai/judge", coder_model="openai/coder")
    shown = feedback(settings, "Pairs every character with 1.", WRONG, counterexample=True)
    first_wrong = next(case for case in RUNS.tests if _expected(case) != repr([(c, 1) for c in eval(case.input)[0]]))
    assert shown["counterexample"] == {"input": first_wrong.input, "expected": _expected(first_wrong)}
    text = json.dumps(shown)
    others = [case.input for case in RUNS.tests if case.input != first_wrong.input]
    assert not [literal for literal in others if literal in text]


def test_right_code_gets_no_counterexample_even_when_one_is_asked_for(fake: FakeLLM, tmp_path: Path) -> None:
    shown = feedback(Settings(data_dir=tmp_path), "Run lengths.", RUNS.source, counterexample=True)
    assert shown == {"direct_code_match": 1.0}


def test_feedback_repeats_no_text_the_submitted_code_produced(fake: FakeLLM, tmp_path: Path) -> None:
    # Exception names, messages and printed text that spell the hidden inputs; the code writer writes the same.
    spelling = (
        "def test_func(arg0):\n"
        "    print('PRINTED_' + arg0.encode().hex())\n"
        "    if len(arg0) % 2:\n"
        "        raise type('NAMED_' + arg0.encode().hex(), (Exception,), {})('SAID_' + arg0.encode().hex())\n"
        "    return 'RETURNED_' + arg0.encode().hex()\n"
    )
    fake.responder = lambda body: _replies(body) if "Rating: X" in json.dumps(body["messages"]) else spelling
    settings = Settings(data_dir=tmp_path, judge_model="openai/judge", coder_model="openai/coder")
    for counterexample in (False, True):
        shown = feedback(settings, "Spells its input.", spelling, counterexample=counterexample)
        text = json.dumps(shown)
        assert shown["direct_code_match"] == 0.0 and shown["code_match"] == 0.0
        for marker in ("PRINTED_", "NAMED_", "SAID_", "RETURNED_", "got"):
            assert marker not in text
        odd = sum(len(eval(case.input)[0]) % 2 for case in RUNS.tests)
        assert shown["direct_code_failures"] == {
            FAILURE_KINDS["error"]: odd,
            FAILURE_KINDS["value"]: len(RUNS.tests) - odd,
        }


def test_a_scorer_failure_of_any_kind_answers_unavailable_without_its_message(fake: FakeLLM, tmp_path: Path) -> None:
    suite = tmp_path / "suites" / "broken"
    suite.mkdir(parents=True)
    (suite / "suite.json").write_text(json.dumps({"name": "broken", "description": "x"}))
    (suite / "m1.json").write_text("{ this is not json SECRET_DETAIL")
    settings = Settings(data_dir=tmp_path, manifests=(tmp_path / "suites",))
    shown = feedback(settings, "Anything.", "def test_func(arg0):\n    return 1\n", method="broken/m1")
    assert list(shown) == ["scores"] and "unavailable" in shown["scores"] and "SECRET_DETAIL" not in shown["scores"]


def test_the_feedback_callable_takes_the_agreed_keyword_arguments(sandbox: Sandbox, tmp_path: Path) -> None:
    send = feedback_for(Settings(data_dir=tmp_path), scorer=Scorer(ManifestStore(), sandbox, llm=None))
    with pytest.raises(TypeError):
        anyio.run(lambda: send("builtin/b002", "x", RUNS.source, 7))  # submission_id is keyword-only
    shown = anyio.run(lambda: send("builtin/b002", "x", WRONG, submission_id=None, counterexample=False))
    assert "counterexample" not in shown and shown["direct_code_match"] < 1


def test_without_models_feedback_scores_code_only_and_the_log_names_the_settings(
    fake: FakeLLM, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="pau_mcp.scoring"):
        settings = Settings(data_dir=tmp_path)
        shown = feedback(settings, "Pairs every character with 1.", RUNS.source)
    assert shown == {"direct_code_match": 1.0}
    assert "PAU_JUDGE_MODEL" in caplog.text and "PAU_CODER_MODEL" in caplog.text
    assert fake.requests == []


def test_a_failing_provider_leaves_the_submission_recorded_and_says_scores_are_unavailable(
    fake: FakeLLM, tmp_path: Path
) -> None:
    fake.fail(401, times=2, message="bad key")
    settings = Settings(data_dir=tmp_path, judge_model="openai/judge", coder_model="openai/coder")
    shown = feedback(settings, "Pairs every character with 1.", None)
    assert list(shown) == ["scores"] and "unavailable" in shown["scores"] and "bad key" not in shown["scores"]
