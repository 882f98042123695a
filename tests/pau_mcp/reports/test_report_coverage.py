"""Exploration coverage in the report: measured per episode by `pau-mcp coverage` (real sandbox, real SQLite),
shown per run with its distribution and its relation to the scores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_report_fixtures import build_store

from pau_mcp.cli import main
from pau_mcp.contract import CallStatus, RecordStatus, ToolStatus
from pau_mcp.reports import build_report, load_runs
from pau_mcp.reports.plots import draw_plots
from pau_mcp.reports.render import method_rows, report_tables
from pau_mcp.runstore import CallRecord, EpisodeResult, RunStore


def _coverage(lines: float, branches: float | None = None) -> dict[str, Any]:
    def part(share: float | None) -> dict[str, Any]:
        return {"tests": 4, "agent": 4, "common": 4, "agent_of_tests": share}

    return {"status": "measured", "lines": part(lines), "branches": part(branches), "inputs": 3, "lost": 0}


def test_the_report_shows_each_runs_coverage_distribution_and_how_it_relates_to_the_scores(tmp_path: Path) -> None:
    store = build_store(tmp_path / "runs.db")
    run_id = store.run_id("alpha-int")
    # Code match of alpha-int: m1 1.0, m2 0.85, m3 0.5, m4 0.0, m5 0.2; judge 5, 4, 3, unscored, 2.
    shares = {"b/m1": 1.0, "b/m2": 0.8, "b/m3": 0.5, "b/m4": 0.25, "b/m5": 0.0}
    for method, share in shares.items():
        store.record_coverage(run_id, method, _coverage(share, 0.5 if method == "b/m1" else None))
    report = build_report(load_runs(store, ["alpha-int", "alpha-ctx"]), resamples=10)
    (summary,) = report.coverage  # alpha-ctx was not measured
    assert summary.run == "alpha-int" and summary.lines.n == 5
    assert summary.lines.mean == pytest.approx(0.51) and summary.lines_median == 0.5
    assert summary.branches.n == 1 and summary.branches.mean == 0.5  # episodes whose tests take no branch left out
    # Coverage ranks 5,4,3,2,1 against code match ranks 5,4,3,1,2: rho = 1 - 6*2/(5*24).
    assert summary.rho["codematch"] == (5, pytest.approx(0.9))
    assert summary.rho["judge"] == (4, pytest.approx(1.0))  # the unscored judge reply has no value
    whole, n_whole, partial, n_partial = summary.full["codematch"]
    assert (whole, n_whole, n_partial) == (1.0, 1, 4) and partial == pytest.approx((0.85 + 0.5 + 0.0 + 0.2) / 4)
    table = next(t for t in report_tables(report) if t.key == "coverage")
    row = dict(zip(table.columns, table.rows[0], strict=True))
    assert row["run"] == "alpha-int" and row["n"] == "5" and row["lines: median"] == "50.0%"
    assert row["rho with code match"] == "+0.90 (n=5)"
    shown = {(r["run"], r["method_id"]): r["coverage_lines"] for r in method_rows(report)}
    assert shown[("alpha-int", "b/m2")] == 0.8 and shown[("alpha-ctx", "b/m2")] == ""
    names = [name for name, _, _ in draw_plots(report)]
    assert "coverage_distribution.png" in names and "coverage_vs_code_match.png" in names
    assert any(note.startswith("Coverage:") for note in report.notes)


def test_a_report_without_measured_coverage_says_how_to_measure_it(tmp_path: Path) -> None:
    report = build_report(load_runs(build_store(tmp_path / "runs.db"), ["alpha-int"]), resamples=10)
    assert report.coverage == [] and "coverage" not in [t.key for t in report_tables(report)]
    assert any("pau-mcp coverage RUN" in note for note in report.notes)


def _run_with_calls(path: Path) -> RunStore:
    """Run `r`: one done episode of builtin/b001 (product of the non-zero digits) whose agent made two calls."""
    store = RunStore(path)
    run_id = store.ensure_run("r", "eval", {"model": "openai/alpha", "agent": "paper", "suite": "builtin"})
    store.plan_episodes(run_id, ["builtin/b001"])
    store.start_episode(run_id, "builtin/b001")
    session = store.ensure_session(run_id, "r/b001", "internal")
    calls: list[tuple[str, bool, CallStatus]] = [
        ("(234,)", True, ToolStatus.OK),
        ("(105,)", True, ToolStatus.OK),
        ("(0,)", False, ToolStatus.OVER_BUDGET),  # refused: it never ran
        ("(-7,)", True, RecordStatus.COUNTEREXAMPLE),  # the scorer's, shown as feedback: not the agent's own call
    ]
    for arguments, counted, status in calls:
        store.record_call(session, CallRecord("builtin/b001", "fn_x", arguments, counted, status))
    submission = store.record_submission(session, "builtin/b001", "multiplies the digits", None)
    store.record_score(submission, "codematch", "scored", 0.75, "openai/coder", {})
    store.finish_episode(
        run_id, "builtin/b001",
        EpisodeResult(state="done", session_key="r/b001", submission_id=submission, concluded=True, queries=3),
    )  # fmt: skip
    return store


def test_pau_mcp_coverage_measures_each_episodes_own_calls_and_the_report_shows_it(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    _run_with_calls(db).close()
    result = CliRunner().invoke(main, ["coverage", "r", "--db", str(db)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "run r: 1 episodes measured" in result.output
    store = RunStore(db)
    (episode,) = store.episodes(store.run_id("r"))
    found = episode.coverage
    assert found is not None
    # b001's nine statements all run under its tests; 234 and 105 never reach `return 0` nor `return -result`.
    assert found["lines"] == {
        "tests": 9,
        "agent": 7,
        "common": 7,
        "agent_of_tests": pytest.approx(7 / 9),
        "function": 9,
    }
    # Eight ways out of its if/for lines in the tests; the agent took six (105's zero skips the multiplication).
    assert found["branches"]["tests"] == 8 and found["branches"]["common"] == 6
    assert (found["inputs"], found["lost"]) == (2, 0)
    again = CliRunner().invoke(main, ["coverage", "r", "--db", str(db)], catch_exceptions=False)
    assert "nothing (more) to measure" in again.output
    report = build_report(load_runs(store, ["r"]), resamples=10)
    assert report.coverage[0].lines.mean == pytest.approx(7 / 9)
    assert "Exploration coverage" in [t.title for t in report_tables(report)]
