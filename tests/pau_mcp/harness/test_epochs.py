"""`pau-mcp eval --epochs K`: each method K times under seeds of its own, and the report reads the epochs together."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from fakellm import FakeLLM

from pau_mcp.cli import main
from pau_mcp.manifests import ManifestStore
from pau_mcp.runstore import RunStore

TWO = ("--methods", "builtin/b001", "--methods", "builtin/b002", "--budget", "1")
SCORED = ("--judge-model", "openai/m", "--coder-model", "openai/m")


def _seeded(body: dict[str, Any]) -> str:
    """The paper agent's model gets the description right under even seeds; the code writer writes b001's own source
    for a right description (so b001 passes in even epochs, b002 never does); the judge rates 3."""
    text = str(body["messages"][-1].get("content") or "")
    if "Rating:" in text and "<reference-" in text:
        return "Rating: 3"
    if "Write the Python function described below" in text:
        if "seed-pass" in text:
            return f"```python\n{ManifestStore().method('builtin/b001').source}\n```"
        return "```python\ndef test_func(arg0):\n    return 0\n```"
    if "Give the exact input" in text:
        return "INPUT: (7,)"
    if "Update your hypothesis" in text:
        return "HYPOTHESIS: something\nCONCLUDED: YES"
    if "Write your final answer" in text:
        return "DESCRIPTION: seed-pass" if body.get("seed", 1) % 2 == 0 else "DESCRIPTION: seed-fail"
    return "I will try one."


def _invoke(fake: FakeLLM, tmp_path: Path, *args: str) -> Result:
    env = {
        "PAU_MCP_TOOL_KEY": "", "PAU_JUDGE_MODEL": "", "PAU_CODER_MODEL": "", "OPENAI_BASE_URL": fake.base_url,
        "OPENAI_API_KEY": "test",
    }  # fmt: skip
    return CliRunner().invoke(
        main, [*args, "--data-dir", str(tmp_path), "--db", str(tmp_path / "runs.db")], env=env, catch_exceptions=False
    )


def test_three_epochs_draw_their_own_replies_under_recorded_seeds_and_report_pass_hat_k_and_consistency(
    tmp_path: Path,
) -> None:
    with FakeLLM(responder=_seeded) as fake:
        result = _invoke(fake, tmp_path, "eval", "--model", "openai/m", "--run", "g", "--epochs", "3", *SCORED, *TWO)
        assert result.exit_code == 0, result.output
        agent = [body for body in fake.requests if "seed" in body]
        # Every agent request carries its epoch's seed; none was replayed from another epoch's cache.
        assert sorted({body["seed"] for body in agent}) == [0, 1, 2]
        per_epoch = [sum(1 for body in agent if body["seed"] == seed) for seed in (0, 1, 2)]
        assert per_epoch[0] == per_epoch[1] == per_epoch[2] > 0
        # The same command again resumes: every epoch is finished, nothing is asked again.
        asked = len(fake.requests)
        again = _invoke(fake, tmp_path, "eval", "--model", "openai/m", "--run", "g", "--epochs", "3", *SCORED, *TWO)
        assert again.exit_code == 0, again.output
        assert len(fake.requests) == asked

    store = RunStore(tmp_path / "runs.db")
    recorded = {row.name: row.config for row in store.runs()}
    for k in (1, 2, 3):
        assert recorded[f"g-epoch{k}"]["seed"] == k - 1
        assert recorded[f"g-epoch{k}"]["epoch"] == {"group": "g", "index": k, "of": 3, "seed": k - 1}
    (line,) = [line for line in result.output.splitlines() if line.startswith("epochs of g:")]
    # b001 passes in epochs 1 and 3, b002 never: c = (2, 0) of n = 3.
    assert "2 methods" in line and "pass@1 0.333 pass^1 0.333" in line and "pass@3 0.500 pass^3 0.000" in line
    assert line.endswith("outcome consistency 50%")
    assert "epoch 1 (g-epoch1, seed 0): mean code match 0.500 [95% CI 0.000, 1.000], n=2" in result.output
    assert "epoch 3 (g-epoch3, seed 2): mean code match 0.500" in result.output
    assert "epoch 2 (g-epoch2, seed 1): mean code match 0.0" in result.output

    report = CliRunner().invoke(
        main, ["report", "g", "--db", str(tmp_path / "runs.db"), "--markdown", str(tmp_path / "r.md")],
        env={"COLUMNS": "250"}, catch_exceptions=False,
    )  # fmt: skip
    assert report.exit_code == 0, report.output
    markdown = (tmp_path / "r.md").read_text()
    assert "Repeated episodes (epochs)" in markdown and "g-epoch3" in markdown
    first, second = [line for line in markdown.splitlines() if line.startswith(("| g | 1 |", "|  | 2 |"))]
    assert first.endswith("| 1 | 33.3% | 33.3% | 50.0% |")  # k = 1: pass@1, pass^1, then the group's consistency
    assert second.endswith("| 2 | 50.0% | 16.7% |  |")


def test_epochs_refuse_to_share_samples_and_task_runs(tmp_path: Path) -> None:
    with FakeLLM(responder=_seeded) as fake:
        shared = _invoke(fake, tmp_path, "eval", "--model", "openai/m", "--epochs", "2", "--share-samples", *TWO)
        tasks = _invoke(fake, tmp_path, "eval", "--model", "openai/m", "--epochs", "2", "--mode", "tasks")
    assert shared.exit_code == 2 and "--share-samples" in shared.output
    assert tasks.exit_code == 2 and "task run is one run" in tasks.output
    assert not (tmp_path / "runs.db").exists() or not RunStore(tmp_path / "runs.db").runs()


def test_a_report_csv_of_an_epoch_group_lists_each_epoch_as_a_run(tmp_path: Path) -> None:
    with FakeLLM(responder=_seeded) as fake:
        assert (
            _invoke(fake, tmp_path, "eval", "--model", "openai/m", "--run", "g", "--epochs", "2", *TWO).exit_code == 0
        )
    table = tmp_path / "runs.csv"
    CliRunner().invoke(main, ["report", "g", "--csv", str(table), "--db", str(tmp_path / "runs.db")])
    with table.open(newline="") as handle:
        assert [row["run"] for row in csv.DictReader(handle)] == ["g-epoch1", "g-epoch2"]
