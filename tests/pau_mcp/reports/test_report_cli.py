"""``pau-mcp report`` as a user runs it over a real run store: the command group in the test's process (`run_pau`),
and once in a process of its own."""

from __future__ import annotations

import csv
import os
import re
from pathlib import Path

import pytest
from fakellm import FakeLLM
from pau_command import Ran, run_pau, run_pau_process
from test_report_fixtures import add_pending_run, build_store


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    path = tmp_path / "runs.db"
    store = build_store(path)
    add_pending_run(store)
    store.close()
    return path


def _report(*args: str, env: dict[str, str] | None = None, process: bool = False) -> Ran:
    """``pau-mcp report ARGS`` in this process (or in a process of its own)."""
    # COLUMNS: a wide terminal, so no cell is wrapped and the assertions can read rows.
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("PAU_")} | {"COLUMNS": "250"} | (env or {})
    return (run_pau_process if process else run_pau)("report", *args, env=full_env)


def test_report_prints_the_tables_and_writes_every_file(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = _report(
        "alpha-int", "alpha-ctx", "--db", str(db), "--resamples", "200",
        "--markdown", str(out / "r.md"), "--csv", str(out / "r.csv"), "--csv-methods", str(out / "m.csv"),
        "--plots", str(out / "plots"), "--html", str(out / "r.html"), process=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert re.search(r"alpha-int\s+│ 4 │ 3\.50 │ 1\.12 │ 75\.0%", result.stdout)
    assert "Unscored judge replies are left out" in result.stdout
    assert "200 resamples" in result.stdout
    assert "## Judge score (1-5)" in (out / "r.md").read_text()
    assert [r["run"] for r in csv.DictReader((out / "r.csv").open())] == ["alpha-int", "alpha-ctx"]
    assert len(list(csv.DictReader((out / "m.csv").open()))) == 10
    assert sorted(p.name for p in (out / "plots").iterdir()) == [
        "codematch_distribution.png",
        "judge_distribution.png",
        "modes.png",
        "rank_correlation.png",
        "test_suite_sizes.png",  # the runs' suite, described too
    ]
    page = (out / "r.html").read_text()
    assert page.count("data:image/png;base64,") == 5 and 'src="http' not in page
    for name in ("r.md", "r.csv", "m.csv", "r.html"):
        assert f"wrote {out / name}" in result.stderr.replace("\n", "")


def test_unscored_as_one_changes_the_numbers_and_says_so(db: Path) -> None:
    result = _report("alpha-int", "--db", str(db), "--unscored-as-one")
    assert result.returncode == 0, result.stderr
    assert re.search(r"alpha-int\s+│ 5 │ 3\.00 │ 1\.41 │ 60\.0%", result.stdout)
    assert "count as 1 (--unscored-as-one" in result.stdout


def test_the_same_seed_gives_the_same_p_values_and_another_seed_may_not(db: Path) -> None:
    runs = ("alpha-int", "alpha-ctx", "--db", str(db), "--resamples", "300")
    first, again = _report(*runs, "--seed", "11"), _report(*runs, "--seed", "11")
    assert first.returncode == 0, first.stderr
    p_values = re.findall(r"alpha-int\s+│ alpha-ctx\s+│.*", first.stdout)
    assert p_values and p_values == re.findall(r"alpha-int\s+│ alpha-ctx\s+│.*", again.stdout)


def test_an_unknown_run_is_an_error_that_lists_the_known_runs(db: Path) -> None:
    result = _report("alpha-int", "nope", "--db", str(db))
    assert result.returncode == 1
    assert "no run named 'nope'" in result.stderr and "known runs: alpha-ctx, alpha-int, empty" in result.stderr


def test_a_run_with_no_finished_episodes_reports_no_scores_rather_than_zeros(db: Path) -> None:
    result = _report("empty", "alpha-int", "--db", str(db))
    assert result.returncode == 0, result.stderr
    assert re.search(r"empty\s+│ 0 │ n/a\s+│ n/a", result.stdout)
    assert "Run empty has no finished episodes: it has no scores yet (n/a)." in result.stdout
    assert "Runs empty and alpha-int have no method scored in both" in result.stdout


def test_a_missing_store_says_how_to_get_one(tmp_path: Path) -> None:
    result = _report("x", "--db", str(tmp_path / "none.db"))
    assert result.returncode == 1 and "no run store at" in result.stderr
    assert not (tmp_path / "none.db").exists()


def test_classify_failures_counts_only_the_episodes_it_labelled(db: Path, tmp_path: Path) -> None:
    replies = iter(["Label: insufficient_exploration", "It is hard to say.", "Label: something_else"])
    with FakeLLM(responder=lambda body: next(replies)) as fake:
        env = {"OPENAI_BASE_URL": fake.base_url, "PAU_JUDGE_MODEL": "openai/fake", "PAU_MCP_DATA_DIR": str(tmp_path)}
        result = _report("alpha-int", "--db", str(db), "--classify-failures", "--no-cache", env=env)
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stderr.split())
    assert "classified 1 of 3 failed episodes" in said and "2 left unclassified" in said


def test_classify_failures_needs_a_model(db: Path) -> None:
    result = _report("alpha-int", "--db", str(db), "--classify-failures")
    assert result.returncode == 2 and "--judge-model" in result.stderr and "PAU_JUDGE_MODEL" in result.stderr


def test_classify_failures_adds_the_failure_table(db: Path, tmp_path: Path) -> None:
    with FakeLLM(responder=lambda body: "The agent stopped early.\nLabel: insufficient_exploration") as fake:
        env = {
            "OPENAI_BASE_URL": fake.base_url,
            "PAU_JUDGE_MODEL": "openai/fake",
            "PAU_MCP_DATA_DIR": str(tmp_path / "data"),
        }
        result = _report("alpha-int", "--db", str(db), "--classify-failures", "--csv", str(tmp_path / "r.csv"), env=env)
        assert len(fake.requests) == 3
    assert result.returncode == 0, result.stderr
    assert "Failure modes" in result.stdout
    assert re.search(r"alpha-int\s+│ 3\s+│ 3 \(100\.0%\)", result.stdout)
    assert "classified 3 of 3 failed episodes with openai/fake" in result.stderr
    (row,) = csv.DictReader((tmp_path / "r.csv").open())
    assert (row["failure_insufficient_exploration"], row["failure_unclassified"]) == ("3", "0")
    assert (tmp_path / "data" / "llm-cache.db").exists()


def test_a_report_on_an_rl_rollout_shows_its_returns_and_suggests_no_score(tmp_path: Path) -> None:
    from pau_mcp.runstore import EpisodeResult, RunStore

    path = tmp_path / "runs.db"
    store = RunStore(path)
    run_id = store.ensure_run("rollout", "rl", {"model": "openai/policy", "suite": "builtin"})
    store.plan_episodes(run_id, ["b/m1", "b/m2", "b/m3"])
    for method, value in (("b/m1", 4.5), ("b/m2", 1.5), ("b/m3", None)):
        store.start_episode(run_id, method)
        if value is None:
            store.finish_episode(run_id, method, EpisodeResult(state="failed", error="LLMError: refused"))
            continue
        steps = [{"return": value, "steps": [{"reward": value}]}]
        store.finish_episode(run_id, method, EpisodeResult(state="done", queries=3, trajectory=steps))
    store.close()
    result = _report("rollout", "--db", str(path), "--markdown", str(tmp_path / "r.md"))
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "r.md").read_text()
    assert "## RL returns" in text and "| rollout | 2 | 3.000 | 1.500 | 1.500 | 4.500 |" in text
    assert "pau-mcp score rollout" not in text and "is an RL rollout" in text


def test_episodes_that_ended_without_a_description_are_counted_and_no_score_is_suggested(tmp_path: Path) -> None:
    from pau_mcp.runstore import EpisodeResult, RunStore

    path = tmp_path / "runs.db"
    store = RunStore(path)
    run_id = store.ensure_run("quiet", "eval", {"model": "openai/m", "agent": "tools", "suite": "builtin"})
    store.plan_episodes(run_id, ["b/m1", "b/m2"])
    for method in ("b/m1", "b/m2"):
        store.start_episode(run_id, method)
        store.finish_episode(run_id, method, EpisodeResult(state="done", queries=2))  # nothing submitted
    store.close()
    result = _report("quiet", "--db", str(path), "--markdown", str(tmp_path / "r.md"))
    assert result.returncode == 0, result.stderr
    text = " ".join((tmp_path / "r.md").read_text().split())
    assert "2 episodes ended without a description" in text and "nothing to score" in text
    assert "pau-mcp score quiet" not in text
