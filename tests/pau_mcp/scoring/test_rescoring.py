"""Scoring saved submissions again as a library call (``pau_mcp.scoring.rescoring``): what cannot be scored comes back
as data with a status and a message that says what to do, before any sandbox is made."""

from __future__ import annotations

import json
from pathlib import Path
from typing import NoReturn

import pytest

from pau_mcp.config import Settings
from pau_mcp.manifests import ManifestStore
from pau_mcp.runstore import RunStore
from pau_mcp.scoring.predictions import record_gold, record_predictions
from pau_mcp.scoring.rescoring import RescoreRequest, rescore


def _no_sandbox() -> NoReturn:
    raise AssertionError("a refused request must not make a sandbox")


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    return RunStore(tmp_path / "runs.db")


def _settings(tmp_path: Path, **values: object) -> Settings:
    return Settings.from_options(data_dir=tmp_path, db=tmp_path / "runs.db", **values)


def test_nothing_named_to_score_is_a_usage_refusal(tmp_path: Path, store: RunStore) -> None:
    scored = rescore(RescoreRequest(), _settings(tmp_path), store, sandbox=_no_sandbox)
    assert scored.status == "usage"
    assert "--gold --suite" in scored.message


def test_a_run_not_in_the_store_is_an_error_naming_it(tmp_path: Path, store: RunStore) -> None:
    scored = rescore(RescoreRequest(source="no-such-run"), _settings(tmp_path), store, sandbox=_no_sandbox)
    assert scored.status == "error"
    assert scored.message.startswith("no-such-run is neither a file nor a run")


def test_a_task_run_is_refused_with_the_report_command(tmp_path: Path, store: RunStore) -> None:
    store.ensure_run("tasks-run", "eval", {"mode": "tasks"})
    scored = rescore(RescoreRequest(source="tasks-run"), _settings(tmp_path), store, sandbox=_no_sandbox)
    assert scored.status == "usage"
    assert "pau-mcp report tasks-run" in scored.message


def test_a_run_of_another_protocol_is_refused_only_when_the_protocol_was_asked_for(
    tmp_path: Path, store: RunStore
) -> None:
    store.ensure_run("empty", "eval", {"protocol": "reference"})
    notes: list[tuple[str, str]] = []
    asked = RescoreRequest(source="empty", protocol_given=True)
    refused = rescore(asked, _settings(tmp_path), store, sandbox=_no_sandbox, notify=lambda *n: notes.append(n))
    assert refused.status == "usage" and "followed the reference protocol" in refused.message
    kept = rescore(RescoreRequest(source="empty"), _settings(tmp_path), store, sandbox=_no_sandbox,
                   notify=lambda *n: notes.append(n))  # fmt: skip
    assert ("note", "run empty followed the reference protocol: scored under it") in notes
    # The run's own protocol is kept: its prompts, which this data directory has not imported, are what is missing.
    assert kept.status == "error" and "pau-mcp prompts import-reference" in kept.message


def test_a_predictions_file_without_ids_needs_its_suite(tmp_path: Path, store: RunStore) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"predicted_description": "adds", "description": "gold"}) + "\n", encoding="utf-8")
    found = record_predictions(store, path, run_name=None, protocol="pau-mcp", manifests=ManifestStore())
    assert found.status == "usage"
    assert "--suite" in found.message
    assert not store.runs()


def test_a_bad_line_of_a_predictions_file_is_named_by_its_number(tmp_path: Path, store: RunStore) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "builtin/b001"}\n\n{"id": "builtin/b002", "all_examples": "[1"}\n', encoding="utf-8")
    found = record_predictions(store, path, run_name=None, protocol="pau-mcp", manifests=ManifestStore())
    assert found.status == "error"
    assert found.message.startswith(f"{path}:3: all_examples: all_examples is text but not JSON")


def test_a_file_is_recorded_once_then_scored_again(tmp_path: Path, store: RunStore) -> None:
    path = tmp_path / "preds.jsonl"
    path.write_text(json.dumps({"id": "builtin/b001", "predicted_description": "adds"}) + "\n", encoding="utf-8")
    first = record_predictions(store, path, run_name="mine", protocol="pau-mcp", manifests=ManifestStore())
    again = record_predictions(store, path, run_name="mine", protocol="pau-mcp", manifests=ManifestStore())
    assert (first.status, again.status) == ("recorded", "again")
    assert first.run_id == again.run_id and first.name == "mine"


def test_a_gold_run_of_a_missing_suite_is_an_error(tmp_path: Path, store: RunStore) -> None:
    found = record_gold(store, ("no-such-suite",), run_name=None, protocol="pau-mcp", manifests=ManifestStore())
    assert found.status == "error"
    assert "no-such-suite" in found.message
