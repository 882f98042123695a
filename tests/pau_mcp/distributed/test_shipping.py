"""What a Ray worker takes from the driver decides what the run does on every node, and holds no secret it does not
need."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from pau_mcp.config import Settings
from pau_mcp.distributed.evaluation import EvalSetup, eval_shipment
from pau_mcp.distributed.rollouts import RolloutSetup, rollout_shipment
from pau_mcp.distributed.shipping import pack, worker_key
from pau_mcp.harness import EvalConfig
from pau_mcp.manifests import tool_name
from pau_mcp.rl.rollout import RolloutConfig


def test_a_worker_follows_the_drivers_protocol_so_its_scorer_and_agent_agree(tmp_path: Path) -> None:
    driver = Settings(protocol="reference", budget=7, db=tmp_path / "driver.db")
    worker = pack(driver).settings(tmp_path / "worker")
    assert worker.protocol == "reference" and worker.budget == 7
    assert worker.db_path == tmp_path / "worker" / "runs.db"


# -- secrets: what each worker's role needs and no more ---------------------------------------------------------------

DEPLOYMENT_KEY = "the-deployment-key-0123456789abcdef"
VARIABLES = {
    "OPENAI_API_KEY": "sk-openai-secret",
    "OPENAI_BASE_URL": "http://10.0.0.9:8000/v1",
    "ANTHROPIC_API_KEY": "sk-ant-secret",
    "AZURE_OPENAI_API_KEY": "azure-secret",
    "AZURE_OPENAI_ENDPOINT": "https://example.openai.azure.com",
    "OPENAI_API_VERSION": "2024-10-21",
}


def _shipped(setup: object) -> bytes:
    """What Ray carries to a worker: its arguments, pickled."""
    return pickle.dumps(setup)


def test_an_evaluation_worker_gets_its_providers_variables_and_never_the_deployment_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in VARIABLES.items():
        monkeypatch.setenv(name, value)
    settings = Settings(judge_model="anthropic/judge", coder_model="openai/coder", db=tmp_path / "d.db")
    config = EvalConfig(run="r1", model="openai/agent", suite="builtin")
    shipment = eval_shipment(settings, config, DEPLOYMENT_KEY)
    sent = _shipped(EvalSetup(config, shipment))
    assert DEPLOYMENT_KEY.encode() not in sent
    assert b"azure-secret" not in sent and b"sk-openai-secret" in sent and b"sk-ant-secret" in sent
    assert set(shipment.env) == {"OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_VERSION", "ANTHROPIC_API_KEY"}
    # The worker's own server names tools with a key of the run: none of the deployment's tool names.
    worker = shipment.settings(tmp_path / "worker")
    assert (
        worker.deployment_key() == shipment.key == worker_key(DEPLOYMENT_KEY, "r1") != worker_key(DEPLOYMENT_KEY, "r2")
    )
    assert tool_name(shipment.key, "builtin/b001") != tool_name(DEPLOYMENT_KEY, "builtin/b001")


def test_an_evaluation_worker_that_does_not_score_gets_no_judge_or_coder_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in VARIABLES.items():
        monkeypatch.setenv(name, value)
    settings = Settings(judge_model="anthropic/judge", coder_model="azure/coder", db=tmp_path / "d.db")
    unscored = eval_shipment(
        settings, EvalConfig(run="r", model="openai/agent", suite="builtin", score=False), "k" * 16
    )
    assert set(unscored.env) == {"OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_VERSION"}
    direct = EvalConfig(run="r", model="anthropic/agent", suite="builtin", kinds=("direct",))
    assert set(eval_shipment(settings, direct, "k" * 16).env) == {"ANTHROPIC_API_KEY"}


def test_a_rollout_worker_gets_its_models_providers_variables_and_no_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in VARIABLES.items():
        monkeypatch.setenv(name, value)
    config = RolloutConfig(
        run="r", model="openai/policy", suite="builtin", methods=("builtin/b001",),
        critic={"model": "azure/critic", "mode": "asymmetric"},
    )  # fmt: skip
    shipment = rollout_shipment(Settings(db=tmp_path / "d.db"), config)
    sent = _shipped(RolloutSetup(config, shipment))
    assert b"sk-ant-secret" not in sent and shipment.key == ""
    assert set(shipment.env) == {
        "OPENAI_API_KEY", "OPENAI_BASE_URL", "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT", "OPENAI_API_VERSION",
    }  # fmt: skip
