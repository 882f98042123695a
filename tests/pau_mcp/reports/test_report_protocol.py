"""Reports count each run by its own protocol: the reference's failed rows and sample deviation, and say so."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_report_fixtures import CONFIG, INCONTEXT, add_run

from pau_mcp.reports import Report, build_report, load_runs
from pau_mcp.reports.render import method_rows, report_tables, run_rows
from pau_mcp.reports.report import RunSummary
from pau_mcp.runstore import RunStore


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[RunStore]:
    store = RunStore(tmp_path / "runs.db")
    add_run(store, "ours", CONFIG | {"mode": "incontext"}, INCONTEXT)
    add_run(store, "theirs", CONFIG | {"mode": "incontext", "protocol": "reference"}, INCONTEXT)
    yield store
    store.close()


def _summaries(store: RunStore) -> tuple[Report, dict[str, RunSummary]]:
    report = build_report(load_runs(store, ["ours", "theirs"]), resamples=100)
    return report, {s.name: s for s in report.summaries}


def test_under_the_reference_protocol_failed_rows_count_as_the_worst_score_and_deviations_are_the_samples(
    store: RunStore,
) -> None:
    _, summaries = _summaries(store)
    ours, theirs = summaries["ours"], summaries["theirs"]
    # Ours: judge 4, 4, 1 (the unscored reply and the failed episode left out), population deviation.
    assert ours.judge.n == 3 and ours.judge.mean == pytest.approx(3.0)
    assert ours.judge.std == pytest.approx(math.sqrt(2.0))
    # The reference's: 4, 4, 1, 1 (unscored), 1 (failed); code match 1.0, 0.6, 0.0, 0.4, 0 (failed).
    assert theirs.judge.n == 5 and theirs.judge.mean == pytest.approx(2.2)
    assert theirs.judge.std == pytest.approx(math.sqrt(10.8 / 4))
    assert theirs.codematch.n == 5 and theirs.codematch.mean == pytest.approx(0.4)
    assert theirs.judge.ddof == 1 and ours.judge.ddof == 0


def test_the_report_shows_each_runs_protocol_and_warns_when_they_differ(store: RunStore) -> None:
    report, _ = _summaries(store)
    runs = next(t for t in report_tables(report) if t.key == "runs")
    column = runs.columns.index("protocol")
    assert [row[column] for row in runs.rows] == ["pau-mcp", "reference"]
    assert any("followed the reference protocol" in note for note in report.notes)
    assert any("followed different protocols" in note for note in report.notes)
    assert [row["protocol"] for row in run_rows(report)] == ["pau-mcp", "reference"]
    failed = [row for row in method_rows(report) if row["run"] == "theirs" and row["state"] == "failed"]
    assert failed[0]["judge"] == 1.0 and failed[0]["codematch"] == 0.0
