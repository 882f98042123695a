"""Episodes recorded exactly once: attempts, and sessions imported from the store of the process that ran them.

Each test runs on both databases (``store_at``: SQLite files, then PostgreSQL databases), and the imports between
stores on different databases too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pau_mcp.contract import ToolStatus
from pau_mcp.runstore import CallRecord, EpisodeResult, RunStore, StoreError


def _worker_episode(store: RunStore, run: str, key: str, method: str) -> int:
    """Record a session the way a worker's server and scorer do; returns the submission's id."""
    run_id = store.ensure_run(run, kind="eval")
    session = store.ensure_session(run_id, key, "http", "pau-mcp-harness 1")
    for n in range(3):
        store.record_call(session, CallRecord(method, "fn_x", f"({n},)", True, ToolStatus.OK, value=str(n * 2)))
    store.record_call(
        session, CallRecord(method, "fn_x", "(", False, ToolStatus.INVALID_INPUT, error_message="not a literal")
    )
    submission = store.record_submission(session, method, "doubles its argument", "def test_func(x): return 2*x")
    store.record_score(submission, "direct", "scored", 1.0, None, {"matches": [True]})
    store.record_score(submission, "judge", "scored", 4.0, "openai/j", {"reason": "close"})
    return submission


def _driver(store_at: Callable[[str], Path | str]) -> tuple[RunStore, int]:
    store = RunStore(store_at("driver"))
    # Rows of another run first, so the imported rows cannot keep the worker's ids by chance.
    other = store.ensure_run("other", kind="eval")
    session = store.ensure_session(other, "k", "http")
    for _ in range(5):
        store.record_submission(session, "builtin/b009", "x", None)
    run_id = store.ensure_run("r", kind="eval")
    store.plan_episodes(run_id, ["builtin/b001", "builtin/b002"])
    return store, run_id


def _result(submission: int, key: str) -> EpisodeResult:
    return EpisodeResult(state="done", session_key=key, submission_id=submission, concluded=True, queries=3)


def test_an_imported_session_keeps_its_calls_submission_and_scores_under_the_drivers_own_ids(
    store_at: Callable[[str], Path | str],
) -> None:
    worker = RunStore(store_at("worker"))
    submission = _worker_episode(worker, "r", "r/builtin/b001/1", "builtin/b001")
    record = worker.export_session("r", "r/builtin/b001/1")
    assert record is not None
    store, run_id = _driver(store_at)
    attempt = store.start_episode(run_id, "builtin/b001")
    assert attempt == 1

    assert store.import_episode(run_id, "builtin/b001", attempt, _result(submission, record.key), record)

    episode = next(e for e in store.episodes(run_id) if e.method_id == "builtin/b001")
    assert episode.state == "done" and episode.session_key == "r/builtin/b001/1"
    assert {k: v.value for k, v in episode.scores.items()} == {"direct": 1.0, "judge": 4.0}
    [prediction] = list(store.predictions(run_id))
    assert prediction == next(iter(worker.predictions(worker.run_id("r"))))
    copied = [(c.arguments, c.status, c.value, c.counted) for c in store.calls(run_id)]
    original = [(c.arguments, c.status, c.value, c.counted) for c in worker.calls(worker.run_id("r"))]
    assert copied == original and len(copied) == 4


def test_an_attempt_cut_short_by_a_kill_is_no_prediction_of_the_run_once_it_is_resumed(
    store_at: Callable[[str], Path | str],
) -> None:
    from pau_command import run_pau

    store, run_id = _driver(store_at)
    store.start_episode(run_id, "builtin/b001")
    _worker_episode(store, "r", "r/builtin/b001/1", "builtin/b001")  # submitted, then kill -9: no ending recorded
    store.start_episode(run_id, "builtin/b001")  # the resumed run plays it again
    again = _worker_episode(store, "r", "r/builtin/b001/2", "builtin/b001")
    store.finish_episode(run_id, "builtin/b001", _result(again, "r/builtin/b001/2"))
    store.start_episode(run_id, "builtin/b002")
    other = _worker_episode(store, "r", "r/builtin/b002/1", "builtin/b002")
    store.finish_episode(run_id, "builtin/b002", _result(other, "r/builtin/b002/1"))

    exported = run_pau("runs", "export", "r", "--db", str(store_at("driver")))

    assert exported.returncode == 0, exported.stderr
    rows = [json.loads(line) for line in exported.stdout.splitlines()]
    assert [(row["id"], row["session"]) for row in rows] == [
        ("builtin/b001", "r/builtin/b001/2"),
        ("builtin/b002", "r/builtin/b002/1"),
    ]


def test_a_second_delivery_of_the_same_attempt_records_nothing(store_at: Callable[[str], Path | str]) -> None:
    worker = RunStore(store_at("worker"))
    submission = _worker_episode(worker, "r", "r/builtin/b001/1", "builtin/b001")
    record = worker.export_session("r", "r/builtin/b001/1")
    assert record is not None
    store, run_id = _driver(store_at)
    attempt = store.start_episode(run_id, "builtin/b001")

    assert store.import_episode(run_id, "builtin/b001", attempt, _result(submission, record.key), record)
    assert not store.import_episode(run_id, "builtin/b001", attempt, _result(submission, record.key), record)

    [run] = [row for row in store.runs() if row.id == run_id]
    assert (run.sessions, run.calls, run.submissions) == (1, 4, 1)
    [imported] = store.submissions(run_id)
    assert len(store.scores(imported.id)) == 2


def test_a_stale_attempt_is_not_recorded_once_the_episode_started_again(store_at: Callable[[str], Path | str]) -> None:
    worker = RunStore(store_at("worker"))
    submission = _worker_episode(worker, "r", "r/builtin/b001/1", "builtin/b001")
    record = worker.export_session("r", "r/builtin/b001/1")
    assert record is not None
    store, run_id = _driver(store_at)
    first = store.start_episode(run_id, "builtin/b001")
    second = store.start_episode(run_id, "builtin/b001")  # the driver restarted and ran it again

    assert second == first + 1
    assert not store.import_episode(run_id, "builtin/b001", first, _result(submission, record.key), record)
    assert store.calls(run_id) == [] and store.open_episodes(run_id) == ["builtin/b001", "builtin/b002"]


def test_an_episode_that_is_not_running_takes_no_import(store_at: Callable[[str], Path | str]) -> None:
    store, run_id = _driver(store_at)
    assert not store.import_episode(run_id, "builtin/b002", 0, EpisodeResult(state="done"))
    assert not store.import_episode(run_id, "builtin/unplanned", 1, EpisodeResult(state="done"))
    assert store.open_episodes(run_id) == ["builtin/b001", "builtin/b002"]


def test_an_import_that_fails_halfway_leaves_nothing_behind(store_at: Callable[[str], Path | str]) -> None:
    worker = RunStore(store_at("worker"))
    submission = _worker_episode(worker, "r", "r/builtin/b001/1", "builtin/b001")
    record = worker.export_session("r", "r/builtin/b001/1")
    assert record is not None
    broken = record.__class__(**{**record.__dict__, "scores": [{**record.scores[0], "submission_id": 999}]})
    store, run_id = _driver(store_at)
    attempt = store.start_episode(run_id, "builtin/b001")

    with pytest.raises(KeyError):
        store.import_episode(run_id, "builtin/b001", attempt, _result(submission, record.key), broken)

    assert store.calls(run_id) == [] and store.submissions(run_id) == []
    assert store.import_episode(run_id, "builtin/b001", attempt, _result(submission, record.key), record)


def test_rows_from_a_store_with_unknown_columns_are_refused_with_what_to_do(
    store_at: Callable[[str], Path | str],
) -> None:
    worker = RunStore(store_at("worker"))
    submission = _worker_episode(worker, "r", "r/builtin/b001/1", "builtin/b001")
    record = worker.export_session("r", "r/builtin/b001/1")
    assert record is not None
    newer = record.__class__(**{**record.__dict__, "calls": [{**record.calls[0], "cpu_ms": 3.0}]})
    store, run_id = _driver(store_at)
    attempt = store.start_episode(run_id, "builtin/b001")

    with pytest.raises(StoreError, match="same pau-mcp version"):
        store.import_episode(run_id, "builtin/b001", attempt, _result(submission, record.key), newer)
    assert store.calls(run_id) == []


def test_exporting_a_session_that_does_not_exist_gives_none(store_at: Callable[[str], Path | str]) -> None:
    worker = RunStore(store_at("worker"))
    _worker_episode(worker, "r", "r/builtin/b001/1", "builtin/b001")
    assert worker.export_session("r", "r/builtin/b001/2") is None
    assert worker.export_session("nope", "r/builtin/b001/1") is None


@pytest.mark.parametrize("worker_on", ["sqlite", "postgres"])
def test_a_session_moves_between_stores_on_different_databases(
    store_at: Callable[[str], Path | str], tmp_path: Path, worker_on: str, request: pytest.FixtureRequest
) -> None:
    """A Ray worker's store is a SQLite file while the driver's may be PostgreSQL (and the other way round)."""
    worker_at = tmp_path / "worker.db" if worker_on == "sqlite" else request.getfixturevalue("postgres_url")
    worker = RunStore(worker_at)
    submission = _worker_episode(worker, "r", "r/builtin/b001/1", "builtin/b001")
    record = worker.export_session("r", "r/builtin/b001/1")
    assert record is not None
    store, run_id = _driver(store_at)
    attempt = store.start_episode(run_id, "builtin/b001")

    assert store.import_episode(run_id, "builtin/b001", attempt, _result(submission, record.key), record)

    again = store.export_session("r", "r/builtin/b001/1")
    assert again is not None
    assert again.calls == record.calls  # every value and type as recorded, on either database

    def without_ids(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in row.items() if k not in ("id", "submission_id")} for row in rows]

    assert without_ids(again.submissions) == without_ids(record.submissions)
    assert without_ids(again.scores) == without_ids(record.scores)
    assert list(store.predictions(run_id)) == list(worker.predictions(worker.run_id("r")))


def test_rescoring_a_resumed_run_scores_its_answers_not_an_attempt_a_kill_cut_short(
    store_at: Callable[[str], Path | str],
) -> None:
    from pau_command import run_pau

    store, run_id = _driver(store_at)
    store.start_episode(run_id, "builtin/b001")
    cut_short = _worker_episode(store, "r", "r/builtin/b001/1", "builtin/b001")  # submitted, then kill -9
    store.start_episode(run_id, "builtin/b001")
    again = _worker_episode(store, "r", "r/builtin/b001/2", "builtin/b001")
    store.finish_episode(run_id, "builtin/b001", _result(again, "r/builtin/b001/2"))
    before = {s.id: len(store.scores(s.id)) for s in store.submissions(run_id)}

    scored = run_pau("score", "r", "--scores", "direct", "--db", str(store_at("driver")))

    assert scored.returncode == 0, scored.stdout + scored.stderr
    after = {s.id: len(store.scores(s.id)) for s in store.submissions(run_id)}
    assert after[again] == before[again] + 1  # the resumed attempt's answer is scored again
    assert after[cut_short] == before[cut_short]  # the killed attempt's submission is no answer of the run
