"""`pau-mcp export inspect RUN`: an Inspect AI log written with Inspect's own API, read back with read_eval_log."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from scripted_runs import scripted_run

from pau_mcp.cli import main
from pau_mcp.manifests import ManifestStore
from pau_mcp.runstore import RunStore

inspect_log = pytest.importorskip("inspect_ai.log", reason="the inspect extra: pip install 'pau-mcp[inspect]'")


def export(tmp_path: Path, run: str) -> Path:
    out = tmp_path / "logs"
    result = CliRunner().invoke(
        main, ["export", "inspect", run, "--out", str(out), "--db", str(tmp_path / "runs.db")], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    (path,) = out.glob("*.eval")
    assert f"wrote {path}" in result.output
    return path


def test_an_exported_log_holds_every_episode_with_its_messages_tool_results_scores_usage_and_versions(
    tmp_path: Path,
) -> None:
    scripted_run(tmp_path, "paper")
    log = inspect_log.read_eval_log(str(export(tmp_path, "paper")))

    assert log.status == "success" and log.eval.model == "openai/agent" and log.eval.task == "pau-mcp"
    assert log.eval.packages["pau-mcp"] and log.eval.packages["inspect_ai"]
    suite = log.eval.metadata["pau_mcp"]["suite"]
    assert suite["name"] == "builtin" and suite["digest"].startswith("sha256:")
    assert log.eval.metadata["pau_mcp"]["prompts"]  # the digest of the prompts the run followed
    assert sorted(s.id for s in log.samples) == ["builtin/b001", "builtin/b002"]
    gold = {ManifestStore().method(s.id).description for s in log.samples}
    store = RunStore(tmp_path / "runs.db")
    recorded = {e.method_id: e for e in store.episodes(store.run_id("paper"))}
    for sample in log.samples:
        roles = [m.role for m in sample.messages]
        assert {"user", "assistant", "tool"} <= set(roles)
        calls = [c for m in sample.messages if m.role == "assistant" for c in (m.tool_calls or [])]
        results = [m for m in sample.messages if m.role == "tool"]
        method_results = [m for m in results if m.function != "submit"]
        assert len(method_results) == sample.metadata["queries"] == 2
        assert {c.id for c in calls} >= {m.tool_call_id for m in results}  # every result answers a call
        assert calls[-1].function == "submit" and calls[-1].arguments["description"] == "returns its argument"
        for result in method_results:
            assert result.metadata["status"] in ("ok", "error") and result.metadata["counted"] is True
            assert result.metadata["fuel"] > 0
        assert any(e.event == "tool" for e in sample.events) and any(e.event == "model" for e in sample.events)
        judge, codematch = sample.scores["judge"], sample.scores["codematch"]
        assert judge.value == 3.0 and "misses the zero case" in judge.explanation
        assert 0 <= codematch.value < 1 and codematch.metadata["failures"] and codematch.metadata["tests"] > 0
        episode = recorded[sample.id]
        usage = sample.model_usage["openai/agent"]
        assert (usage.input_tokens, usage.output_tokens) == (episode.input_tokens, episode.output_tokens)
        assert usage.input_tokens > 0 and usage.total_cost == episode.cost_usd
        reasoning = [m for m in sample.messages if m.role == "assistant" and not isinstance(m.content, str)]
        assert reasoning and "It echoed." in str(reasoning[-1].content)
        assert not any(text in str(sample.model_dump()) for text in gold)  # the gold description stays out
    means = {s.name: s.metrics["mean"].value for s in log.results.scores}
    assert means["judge"] == 3.0 and 0 <= means["codematch"] < 1


def test_the_epochs_of_a_group_are_one_log_whose_samples_carry_their_epoch(tmp_path: Path) -> None:
    scripted_run(tmp_path, "g", "--epochs", "2")
    log = inspect_log.read_eval_log(str(export(tmp_path, "g")))
    assert log.eval.config.epochs == 2
    assert sorted((s.id, s.epoch) for s in log.samples) == [
        ("builtin/b001", 1), ("builtin/b001", 2), ("builtin/b002", 1), ("builtin/b002", 2)
    ]  # fmt: skip


def test_exporting_an_unknown_run_or_one_without_episodes_says_what_to_do(tmp_path: Path) -> None:
    scripted_run(tmp_path, "paper")
    unknown = CliRunner().invoke(main, ["export", "inspect", "nope", "--db", str(tmp_path / "runs.db")])
    assert unknown.exit_code == 1 and "no run named 'nope'" in unknown.output and "paper" in unknown.output
