"""Reports and leaderboards as library calls (``reports.requests.make_report``, ``reports.leaderboard.make_board``):
what cannot be reported comes back as data with a status and a message that says what to do."""

from __future__ import annotations

from pathlib import Path

from pau_mcp.config import Settings
from pau_mcp.manifests import ManifestStore
from pau_mcp.reports.leaderboard import make_board
from pau_mcp.reports.requests import ReportRequest, make_report
from pau_mcp.runstore import RunStore


def _settings(tmp_path: Path, **values: object) -> Settings:
    return Settings.from_options(data_dir=tmp_path, db=tmp_path / "runs.db", **values)


def test_a_run_not_in_the_store_is_an_error(tmp_path: Path) -> None:
    made = make_report(ReportRequest(names=("nope",)), _settings(tmp_path), RunStore(tmp_path / "runs.db"))
    assert made.status == "error" and made.report is None
    assert "nope" in made.message


def test_classifying_failures_without_a_judge_model_is_a_usage_refusal(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    store.ensure_run("quiet", "eval")
    made = make_report(ReportRequest(names=("quiet",), classify_failures=True), _settings(tmp_path), store)
    assert made.status == "usage"
    assert "--judge-model" in made.message


def test_a_suite_asked_for_that_is_not_installed_points_at_the_list(tmp_path: Path) -> None:
    made = make_report(ReportRequest(suites=("no-such-suite",)), _settings(tmp_path), None)
    assert made.status == "error"
    assert made.message.endswith("`pau-mcp manifests list` shows the suites")


def test_a_suite_alone_is_reported_with_its_profile(tmp_path: Path) -> None:
    made = make_report(ReportRequest(suites=("builtin",)), _settings(tmp_path), None)
    assert made.status == "made" and made.report is not None
    assert [profile.name for profile in made.report.suites] == ["builtin"]


def test_a_leaderboard_of_runs_without_episodes_is_an_error_saying_what_it_ranks(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    store.ensure_run("served", "serve")
    made = make_board(store, ["served"], manifests=ManifestStore())
    assert made.status == "error" and made.board is None
    assert "pau-mcp eval" in made.message
