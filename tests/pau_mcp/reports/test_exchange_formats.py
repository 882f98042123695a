"""`pau-mcp export eee` and `export hf-results`: records valid against Every Eval Ever's schema (its own validator),
and the .eval_results YAML a Hugging Face model page reads (huggingface_hub's own parser)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from scripted_runs import scripted_run

from pau_mcp.cli import main
from pau_mcp.manifests import ManifestStore

validate = pytest.importorskip(
    "every_eval_ever.validator.validate",
    reason="every-eval-ever (pip install --no-deps --ignore-requires-python every-eval-ever==0.3.0; .ci/run does)",
)


def _validated(root: Path) -> dict[str, list[Any]]:
    """Every record under ``root`` checked by Every Eval Ever's validator with its path and semantic checks."""
    files = validate._LocalRepositoryFiles(root)
    found = {}
    for path in sorted(root.rglob("*.json*")):
        where = path.relative_to(root).as_posix()
        report = validate.validate_file(
            path, repo_path=where, available_files=files, read_repo_file=files.read_text, run_semantic_checks=True
        )
        assert report.valid, (where, report.errors)
        found[where] = report.warnings
    return found


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("exchange")
    scripted_run(root, "one")
    scripted_run(root, "g", "--epochs", "2")
    return root


def _export(root: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["export", *args, "--db", str(root / "runs.db")], catch_exceptions=False)


def test_eee_records_of_a_run_validate_aggregate_and_instance_level(runs: Path, tmp_path: Path) -> None:
    result = _export(runs, "eee", "one", "--out", str(tmp_path), "--organization", "pau-mcp tests")
    assert result.exit_code == 0, result.output
    checked = _validated(tmp_path)
    aggregate_path = next(p for p in checked if p.endswith(".json"))
    assert aggregate_path.startswith("data/pau-mcp-builtin/openai/agent/")
    assert any(p.endswith("_samples.jsonl") for p in checked)
    aggregate = json.loads((tmp_path / aggregate_path).read_text())
    results = {r["evaluation_result_id"]: r for r in aggregate["evaluation_results"]}
    assert set(results) == {"pau-mcp.judge", "pau-mcp.codematch"}
    judge = results["pau-mcp.judge"]
    assert judge["score_details"]["score"] == 3.0 and judge["metric_config"]["llm_scoring"]["judges"][0]["model_info"][
        "id"] == "openai/judge"  # fmt: skip
    interval = results["pau-mcp.codematch"]["score_details"]["uncertainty"]["confidence_interval"]
    assert interval["lower"] <= results["pau-mcp.codematch"]["score_details"]["score"] <= interval["upper"]
    assert aggregate["source_metadata"]["source_organization_name"] == "pau-mcp tests"
    instances = [json.loads(line) for line in (tmp_path / aggregate_path.replace(".json", "_samples.jsonl")).open()]
    assert len(instances) == 4  # two episodes, two score kinds
    assert {i["evaluation_result_id"] for i in instances} == set(results)
    first = instances[0]
    assert first["interaction_type"] == "agentic" and first["input"]["reference"] == []
    assert any(m.get("tool_calls") for m in first["messages"]) and any(m["role"] == "tool" for m in first["messages"])
    assert first["answer_attribution"][0]["extracted_value"] == "returns its argument"
    gold = ManifestStore().method(first["sample_id"].split("#")[0]).description
    assert gold not in json.dumps(instances)


def test_eee_records_of_an_epoch_group_carry_pass_hat_k_and_validate(runs: Path, tmp_path: Path) -> None:
    result = _export(runs, "eee", "g", "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    checked = _validated(tmp_path)
    aggregate = json.loads((tmp_path / next(p for p in checked if p.endswith(".json"))).read_text())
    hat = next(
        r for r in aggregate["evaluation_results"] if r["evaluation_result_id"] == "pau-mcp.codematch.pass_hat_2"
    )
    assert hat["metric_config"]["metric_parameters"]["k"] == 2 and hat["score_details"]["score"] == 0.0


def test_hf_results_yaml_reads_back_with_huggingface_hubs_parser(runs: Path, tmp_path: Path) -> None:
    from huggingface_hub import parse_eval_result_entries

    result = _export(
        runs, "hf-results", "g", "--dataset-id", "someone/pau-builtin", "--out", str(tmp_path),
        "--source-url", "https://example.org/logs", "--source-user", "someone",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    path = tmp_path / ".eval_results" / "pau-mcp-builtin_with_tools.yaml"
    entries = {e.task_id: e for e in parse_eval_result_entries(yaml.safe_load(path.read_text()))}
    assert set(entries) == {"codematch", "judge", "codematch_pass_hat_2"}
    assert entries["judge"].value == 3.0 and entries["judge"].dataset_id == "someone/pau-builtin"
    assert 0 <= entries["codematch"].value < 100 and entries["codematch_pass_hat_2"].value == 0.0
    assert entries["judge"].notes == "With tools" and entries["judge"].source_url == "https://example.org/logs"
    assert entries["judge"].date and len(entries["judge"].date) == 10


def test_hf_results_refuse_a_dataset_id_that_is_not_owner_slash_name(runs: Path, tmp_path: Path) -> None:
    result = _export(runs, "hf-results", "one", "--dataset-id", "pau", "--out", str(tmp_path))
    assert result.exit_code == 1 and "owner/name" in result.output
