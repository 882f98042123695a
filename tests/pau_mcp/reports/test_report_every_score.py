"""Every recorded score shows up in a report: run stores built by the real commands, reported by the real command.

The store holds what users make: a probe evaluation (direct code scores only, no LLM), the
demo (a serve run with one submission, scored afterwards with ``pau-mcp score demo``), a
predictions file scored for its code, and gold descriptions scored by a code writer (a fake
OpenAI-compatible server on loopback). The expected numbers are read from the scores table
with SQL, not through the report code. The commands run in the test's process (`run_pau`); the report in
every rendering runs in a process of its own.
"""

from __future__ import annotations

import csv
import json
import os
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakellm import FakeLLM
from pau_command import Ran, run_pau, run_pau_process

from pau_mcp.manifests import ManifestStore

BUILTIN = ManifestStore().suite("builtin").methods
PROBE = "builtin-probe-interactive-none"  # the name `pau-mcp eval --agent probe` gives its run
PREDICTIONS = "predictions"
GOLD = "gold-builtin"


def _writer(body: dict[str, Any]) -> str:
    """A code writer that writes the gold source of the method whose gold description it is given."""
    user = body["messages"][-1]["content"]
    for method in BUILTIN.values():
        if method.description in user:
            return f"```python\n{method.source}```"
    return "```python\ndef test_func(*args):\n    return None\n```"


def _pau(data: Path, *args: str, env: dict[str, str] | None = None, process: bool = False) -> Ran:
    """``pau-mcp ARGS`` on the run store in ``data``: in this process, or in a process of its own."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PAU_", "OPENAI_", "ANTHROPIC_", "COLUMNS"))}
    environment = clean | {"PAU_MCP_DATA_DIR": str(data)} | (env or {})
    return (run_pau_process if process else run_pau)(*args, env=environment)


def _ok(result: Ran) -> Ran:
    assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    data = tmp_path_factory.mktemp("data")
    _ok(_pau(data, "eval", "--agent", "probe", *(f"--methods=builtin/b00{i}" for i in range(1, 5))))
    _ok(_pau(data, "demo"))
    _ok(_pau(data, "score", "demo", "--scores", "direct"))  # no model: the code the demo submitted is scored
    predictions = data / "predictions.jsonl"
    b001, b002 = BUILTIN["builtin/b001"], BUILTIN["builtin/b002"]
    predictions.write_text(
        json.dumps({"id": b001.id, "predicted_description": "x", "code": b001.source})
        + "\n"
        + json.dumps({"id": b002.id, "predicted_description": "y", "code": "def test_func(*a):\n    return 0\n"})
        + "\n"
    )
    _ok(_pau(data, "score", str(predictions), "--scores", "direct", "--run", PREDICTIONS))
    with FakeLLM(responder=_writer) as fake:
        gold = ["score", "--gold", "--suite", "builtin", "--coder-model", "openai/coder"]
        _ok(_pau(data, *gold, env={"OPENAI_BASE_URL": fake.base_url}))
    yield data


def _means(db: Path, run: str) -> dict[str, tuple[int, float]]:
    """Per score kind: how many scored values the run has, and their mean (straight from SQL)."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT s.kind, COUNT(*), AVG(s.value) FROM scores s JOIN submissions u ON s.submission_id = u.id"
            " JOIN sessions se ON u.session_id = se.id JOIN runs r ON se.run_id = r.id"
            " WHERE r.name = ? AND s.status = 'scored' GROUP BY s.kind",
            (run,),
        ).fetchall()
    return {kind: (count, mean) for kind, count, mean in rows}


def test_a_probe_run_reports_its_direct_code_scores_in_every_rendering(data: Path, tmp_path: Path) -> None:
    (count, mean), = _means(data / "runs.db", PROBE).values()  # fmt: skip
    out = tmp_path / "out"
    result = _ok(
        _pau(
            data, "report", PROBE, "--markdown", str(out / "r.md"), "--csv", str(out / "r.csv"),
            "--csv-methods", str(out / "m.csv"), "--html", str(out / "r.html"), "--plots", str(out / "plots"),
            env={"COLUMNS": "250"}, process=True,
        )
    )  # fmt: skip
    shown = f"{mean:.3f}"
    assert re.search(rf"{PROBE}\s+│ {count}\s+│ {re.escape(shown)}", result.stdout), result.stdout
    assert "Direct code" in result.stdout
    assert "no finished episodes" not in result.stdout and "zeros" not in result.stdout
    # No empty judge or code-match table: nothing of those kinds was recorded.
    assert "Judge score" not in result.stdout
    assert shown in (out / "r.md").read_text() and shown in (out / "r.html").read_text()
    (row,) = csv.DictReader((out / "r.csv").open())
    assert int(row["direct_n"]) == count and float(row["direct_mean"]) == pytest.approx(mean)
    methods = list(csv.DictReader((out / "m.csv").open()))
    assert sum(1 for m in methods if m["direct_status"] == "scored") == count
    assert (out / "plots" / "direct_distribution.png").stat().st_size > 5_000
    assert (out / "r.html").read_text().count("data:image/png;base64,") == 2  # and the suite's test-suite sizes


def test_runs_without_episodes_report_their_scored_submissions(data: Path) -> None:
    db = data / "runs.db"
    expected = {run: _means(db, run) for run in ("demo", PREDICTIONS, GOLD)}
    assert set(expected["demo"]) == {"direct"} and set(expected[PREDICTIONS]) == {"direct"}
    assert set(expected[GOLD]) == {"codematch_gold"} and expected[GOLD]["codematch_gold"][0] == len(BUILTIN)
    result = _ok(_pau(data, "report", "demo", PREDICTIONS, GOLD, env={"COLUMNS": "250"}))
    assert "no finished episodes" not in result.stdout and "zeros" not in result.stdout
    for run, kinds in expected.items():
        for kind, (count, mean) in kinds.items():
            row = rf"{run}\s+│ {count}\s+│ {re.escape(f'{mean:.3f}')}"
            assert re.search(row, result.stdout), f"{run} {kind}: {count} scores, mean {mean:.3f}\n{result.stdout}"
    assert "Code match from the gold description" in result.stdout and "Direct code" in result.stdout
    assert "has no episodes" in result.stdout


def test_a_run_with_submissions_but_no_scores_says_how_to_score_it(data: Path, tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    _ok(_pau(fresh, "demo"))
    result = _ok(_pau(fresh, "report", "demo", env={"COLUMNS": "250"}))
    assert "pau-mcp score demo" in result.stdout
    assert "no finished episodes" not in result.stdout


def test_the_terminal_report_is_readable_at_100_columns(data: Path) -> None:
    result = _ok(_pau(data, "report", PROBE, "demo", PREDICTIONS, GOLD, env={"COLUMNS": "100"}))
    lines = result.stdout.splitlines()
    assert "…" not in result.stdout
    assert max(len(line) for line in lines) <= 100
    for run in (PROBE, "demo", PREDICTIONS, GOLD):
        assert any(run in line for line in lines), run
    (count, mean), = _means(data / "runs.db", PROBE).values()  # fmt: skip
    assert f"{mean:.3f}" in result.stdout and "100.0%" in result.stdout
