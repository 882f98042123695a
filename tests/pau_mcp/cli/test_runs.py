"""`pau-mcp runs show` and `runs export` read a run a page at a time, print what they printed before, and say in one
line when there is nothing to export."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pau_command import run_pau

from pau_mcp import runstore
from pau_mcp.cli.runs import _stored
from pau_mcp.contract import ToolStatus
from pau_mcp.runstore import CallRecord, RunStore


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages of three rows, so a run of a few calls crosses several pages."""
    monkeypatch.setattr(runstore, "PAGE_ROWS", 3)


def _record(db: Path, calls: int, submissions: int = 1, run: str = "big") -> RunStore:
    store = RunStore(db)
    run_id = store.ensure_run(run, "server")
    sessions = [store.ensure_session(run_id, f"session-{n}", "http") for n in range(2)]
    for i in range(calls):
        store.record_call(
            sessions[i % 2],
            CallRecord(method_id="builtin/b001", tool="fn_x", arguments=f"({i},)", counted=True, status=ToolStatus.OK,
                       value=str(i * 2), outcome={"status": "ok", "value": str(i * 2)}),
        )  # fmt: skip
    for n in range(submissions):
        store.record_submission(sessions[n % 2], "builtin/b001", f"doubles its argument ({n})", None)
    return store


def test_calls_are_read_a_page_at_a_time_in_order_across_pages(tmp_path: Path, small_pages: None) -> None:
    store = _record(tmp_path / "runs.db", calls=11, submissions=4)
    run_id = store.run_id("big")
    calls = list(store.iter_calls(run_id))
    assert [c.arguments for c in calls] == [f"({i},)" for i in range(11)]
    first_session = store.call_sessions(run_id)[0]
    assert first_session[1:] == ("session-0", 6)
    assert [c.arguments for c in store.iter_calls(run_id, first_session[0])] == [f"({i},)" for i in range(0, 11, 2)]
    assert [s.description for s in store.iter_submissions(run_id)] == [f"doubles its argument ({n})" for n in range(4)]
    assert store.submission_count(run_id) == 4


def test_runs_show_json_prints_the_document_it_printed_before_a_row_a_line(tmp_path: Path, small_pages: None) -> None:
    db = tmp_path / "runs.db"
    store = _record(db, calls=7, submissions=2)
    run_id = store.run_id("big")
    expected = {"calls": [_stored(c) for c in store.calls(run_id)],
                "submissions": [_stored(s) for s in store.submissions(run_id)]}  # fmt: skip
    shown = run_pau("runs", "show", "big", "--json", "--db", str(db), env=dict(os.environ))
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == expected
    assert len(shown.stdout.splitlines()) == 7 + 2 + 6  # a row a line, so it is written (and read) a row at a time
    empty = _record(tmp_path / "empty.db", calls=0, submissions=0, run="quiet")
    del empty
    nothing = run_pau("runs", "show", "quiet", "--json", "--db", str(tmp_path / "empty.db"), env=dict(os.environ))
    assert json.loads(nothing.stdout) == {"calls": [], "submissions": []}


def test_runs_show_prints_every_call_of_a_run_larger_than_one_printed_table(
    tmp_path: Path, small_pages: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pau_mcp.cli import runs as runs_command

    monkeypatch.setattr(runs_command, "_TABLE_ROWS", 4)
    db = tmp_path / "runs.db"
    _record(db, calls=13, submissions=1)
    shown = run_pau("runs", "show", "big", "--db", str(db), env={**os.environ, "COLUMNS": "200"})
    assert shown.returncode == 0, shown.stderr
    assert "session session-0 (7 calls)" in shown.stdout and "session session-1 (6 calls)" in shown.stdout
    for i in range(13):
        assert f"({i},)" in shown.stdout
    assert "doubles its argument (0)" in shown.stdout


def test_runs_export_of_a_run_without_submissions_says_so_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    _record(db, calls=5, submissions=0, run="no-answers")
    out = tmp_path / "predictions.jsonl"
    exported = run_pau("runs", "export", "no-answers", "-o", str(out), "--db", str(db), env=dict(os.environ))
    assert exported.returncode == 0
    assert exported.stdout == ""
    assert exported.stderr.strip().count("\n") == 0
    assert "has no submissions" in exported.stderr and "5 calls recorded" in exported.stderr
    assert "pau-mcp runs show no-answers" in exported.stderr
    assert not out.exists()


def test_runs_export_streams_predictions_with_each_submissions_own_calls(tmp_path: Path, small_pages: None) -> None:
    db = tmp_path / "runs.db"
    _record(db, calls=8, submissions=2)
    exported = run_pau("runs", "export", "big", "--db", str(db), env=dict(os.environ))
    records = [json.loads(line) for line in exported.stdout.splitlines()]
    assert [r["session"] for r in records] == ["session-0", "session-1"]
    assert records[0]["all_examples"] == [[f"({i},)", str(i * 2)] for i in range(0, 8, 2)]
    assert records[1]["num_queries"] == 4


def test_runs_export_writes_each_line_as_the_whole_record_would_be_written(tmp_path: Path, small_pages: None) -> None:
    db = tmp_path / "runs.db"
    store = _record(db, calls=9, submissions=2)
    exported = run_pau("runs", "export", "big", "--db", str(db), env=dict(os.environ))
    expected = [json.dumps(record, default=str) for record in store.predictions(store.run_id("big"))]
    assert exported.stdout.splitlines() == expected
