"""The tool contract: one set of statuses, results, facts, feedback and one budget rule, whoever holds the count."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import get_args

import jsonschema
import pytest
from pydantic import ValidationError

from pau_mcp.contract import (
    OPEN_INPUT_SCHEMA,
    OPEN_OUTPUT_SCHEMA,
    OUTPUT_SCHEMA,
    RAN,
    REFUSED,
    SUBMIT_INPUT_SCHEMA,
    SUBMIT_OUTPUT_SCHEMA,
    Budget,
    EpisodeEnd,
    EpisodeState,
    Feedback,
    OpenResult,
    OpenStatus,
    QueryBudget,
    ScoreStatus,
    SubmitResult,
    SubmitStatus,
    ToolResult,
    ToolStatus,
)
from pau_mcp.runstore import RunStore
from pau_mcp.server.sessions import StoreBudget
from wasm_runtime import Status


def test_every_status_the_sandbox_gives_is_a_tool_status_and_the_refusals_are_the_servers_own() -> None:
    assert {s.value for s in Status} <= {s.value for s in ToolStatus}
    assert set(RAN) | set(REFUSED) == {s.value for s in ToolStatus} and not set(RAN) & set(REFUSED)
    assert {SubmitStatus.UNKNOWN_TOOL, SubmitStatus.INVALID_INPUT} <= set(REFUSED)
    assert {OpenStatus.UNKNOWN_TOOL, OpenStatus.INVALID_INPUT} <= set(REFUSED)


def test_every_result_the_tools_send_holds_to_the_schema_published_from_its_model() -> None:
    for status in ToolStatus:
        result = ToolResult(status=status, queries_used=1, queries_left=None, error_message="why")
        jsonschema.validate(result.model_dump(), OUTPUT_SCHEMA)
    receipt = SubmitResult(status=SubmitStatus.RECORDED, recorded=True, submission=7, method="fn_0123456789")
    scored = receipt.model_copy(update={"status": SubmitStatus.SCORED})
    scored.scores = Feedback(judge_rating=4, code_match=0.5, direct_code_failures={"a wrong value": 2})
    scored.queries_used, scored.queries_left = 3, None
    for sent in (
        receipt.sent(),
        scored.sent(),
        SubmitResult(status=SubmitStatus.INVALID_INPUT, error_message="x").sent(),
    ):
        jsonschema.validate(sent, SUBMIT_OUTPUT_SCHEMA)
    assert receipt.sent() == {"status": "recorded", "recorded": True, "submission": 7, "method": "fn_0123456789"}
    assert scored.sent()["queries_left"] is None  # set to null is sent as null; what was never set is not sent
    jsonschema.validate(OpenResult(status=OpenStatus.OK, methods=["fn_0123456789"]).sent(), OPEN_OUTPUT_SCHEMA)
    jsonschema.validate({"method": "fn_0123456789", "description": "d", "code": None}, SUBMIT_INPUT_SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"method": "fn_0123456789", "description": "d", "extra": 1}, SUBMIT_INPUT_SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"methods": []}, OPEN_INPUT_SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**scored.sent(), "scores": {"judge_rating": 9}}, SUBMIT_OUTPUT_SCHEMA)


def test_a_result_read_from_the_wire_holds_a_status_of_the_contract_and_an_unknown_one_is_refused() -> None:
    read = ToolResult.model_validate({"status": "timeout", "queries_used": 1, "queries_left": None})
    assert read.status is ToolStatus.TIMEOUT and not read.shown().startswith("ToolStatus")
    assert SubmitResult.model_validate({"status": "scored"}).status is SubmitStatus.SCORED
    assert OpenResult.model_validate({"status": "ok"}).status is OpenStatus.OK
    with pytest.raises(ValidationError):
        ToolResult.model_validate({"status": "timed_out", "queries_used": 1, "queries_left": None})
    with pytest.raises(ValidationError):
        SubmitResult.model_validate({"status": "score"})
    with pytest.raises(ValidationError):
        OpenResult.model_validate({"status": "opened"})
    # Sent as the plain strings the schemas list.
    assert read.model_dump(mode="json")["status"] == "timeout"
    jsonschema.validate(read.model_dump(mode="json"), OUTPUT_SCHEMA)


def test_the_score_and_episode_statuses_are_the_ones_the_store_and_the_scorers_write() -> None:
    assert get_args(ScoreStatus) == ("scored", "unscored", "error")
    assert set(get_args(EpisodeEnd)) < set(get_args(EpisodeState)) == {"pending", "running", "done", "failed"}
    store = RunStore(":memory:")
    run = store.ensure_run("statuses", "eval")
    store.plan_episodes(run, ["m1"])
    assert {e.state for e in store.episodes(run)} <= set(get_args(EpisodeState))


def test_feedback_shows_only_its_own_keys_and_a_counterexample_only_when_it_was_paid_for() -> None:
    scores = {
        "judge_rating": 4, "code_match": 0.25, "direct_code_match": "error", "gold": "the hidden description",
        "counterexample": {"input": "(3,)", "expected": "9"},
    }  # fmt: skip
    feedback = Feedback.model_validate(scores)
    assert feedback.shown(counterexample=False) == {"judge_rating": 4, "code_match": 0.25, "direct_code_match": "error"}
    assert feedback.shown(counterexample=True)["counterexample"] == {"input": "(3,)", "expected": "9"}
    with pytest.raises(ValueError):
        Feedback.model_validate({"counterexample": {"input": "(3,)", "expected": "9", "got": "the code's own text"}})


def _store_budget(tmp_path: Path, limit: int) -> StoreBudget:
    store = RunStore(tmp_path / "runs.db")
    session = store.ensure_session(store.ensure_run("r", kind="serve"), "k", "http")
    return StoreBudget(store, session, "builtin/b001", limit)


@pytest.fixture(params=["memory", "store"])
def budget_of(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[int], Budget]:
    """A budget of the given limit, kept in memory (the RL environment's) or in the run store (the server's)."""
    return (
        (lambda limit: QueryBudget(limit))
        if request.param == "memory"
        else (lambda limit: _store_budget(tmp_path, limit))
    )


def test_a_budget_takes_a_query_per_call_refuses_past_its_limit_and_takes_back_a_call_that_never_ran(
    budget_of: Callable[[int], Budget],
) -> None:
    budget = budget_of(2)
    assert (budget.reserve(), budget.reserve(), budget.reserve()) == (1, 2, None)
    assert budget.used() == 2
    budget.refund()
    assert budget.used() == 1 and budget.reserve() == 2


def test_a_budget_of_nothing_has_no_limit(budget_of: Callable[[int], Budget]) -> None:
    budget = budget_of(0)
    assert [budget.reserve() for _ in range(50)] == list(range(1, 51))


def test_of_many_reservations_at_once_on_a_budget_of_n_exactly_n_succeed(budget_of: Callable[[int], Budget]) -> None:
    budget = budget_of(7)
    with ThreadPoolExecutor(8) as pool:
        taken = [result for result in pool.map(lambda _: budget.reserve(), range(40)) if result is not None]
    assert sorted(taken) == list(range(1, 8)) and budget.used() == 7
