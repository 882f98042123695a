"""``LLMClient.preflight``: one cheap check per model, so a misconfigured run fails in seconds with one line."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fakellm import FakeLLM
from pau_command import Ran, run_pau, run_pau_process

from pau_mcp.llm import LLMClient, LLMError, LLMNotConfigured


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_a_refused_connection_fails_within_seconds_in_one_line_naming_the_url(
    make_client: Callable[..., LLMClient], run: Callable[..., Any]
) -> None:
    port = _closed_port()
    # "Within seconds" means not retried: with a first backoff of 1000 s, one retry would outlast the minute given
    # (a timeout, not the LLMError), while a busy machine's slowness cannot.
    llm = make_client(
        {"OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1"}, retries=5, backoff_s=1000.0, max_backoff_s=1000.0
    )
    with pytest.raises(LLMError) as info:
        run(lambda: llm.preflight(["openai/m"]), seconds=60)
    message = str(info.value)
    assert f"127.0.0.1:{port}" in message and "OPENAI_BASE_URL" in message and "\n" not in message


def test_a_missing_key_fails_before_any_request(make_client: Callable[..., LLMClient], run: Callable[..., Any]) -> None:
    with pytest.raises(LLMNotConfigured, match="OPENAI_API_KEY"):
        run(lambda: make_client({}).preflight(["openai/gpt-4o-mini"]))
    with pytest.raises(LLMNotConfigured, match="ANTHROPIC_API_KEY"):
        run(lambda: make_client({}).preflight(["anthropic/claude-haiku-4-5"]))


def test_a_model_the_server_does_not_list_fails_naming_what_it_lists(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any]
) -> None:
    fake.models = ["qwen2.5-coder:7b", "llama3.1:8b"]
    llm = make_client({"OPENAI_BASE_URL": fake.base_url})
    assert run(lambda: llm.preflight(["openai/llama3.1:8b", "openai/qwen2.5-coder:7b", "openai/llama3.1:8b"])) == []
    assert len(fake.gets) == 2  # one check per distinct model
    with pytest.raises(LLMError, match="does not serve a model 'gpt-4o-mini'.*lists.*llama3.1:8b") as info:
        run(lambda: llm.preflight(["openai/gpt-4o-mini"]))
    assert info.value.fatal
    assert fake.requests == []  # no completion was asked for


def test_an_ollama_tag_left_implicit_matches_latest_and_a_gateways_wildcard_route_matches(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any]
) -> None:
    fake.models = ["llama3.1:latest", "anthropic/*"]
    llm = make_client({"OPENAI_BASE_URL": fake.base_url})
    assert run(lambda: llm.preflight(["openai/llama3.1", "openai/anthropic/claude-haiku-4-5"])) == []


def test_a_server_without_a_model_list_passes_with_a_warning(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any]
) -> None:
    fake.models = None
    warnings = run(lambda: make_client({"OPENAI_BASE_URL": fake.base_url}).preflight(["openai/anything"]))
    assert len(warnings) == 1 and "openai/anything" in warnings[0] and "not checked" in warnings[0]


def test_a_rejected_key_fails_the_check_with_the_providers_words(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any]
) -> None:
    fake.models = ["m"]
    fake.require_key = "sk-good"
    with pytest.raises(LLMError, match="Incorrect API key.*OPENAI_API_KEY") as info:
        run(lambda: make_client({"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-bad"}).preflight(["openai/m"]))
    assert info.value.fatal
    assert (
        run(
            lambda: make_client({"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-good"}).preflight(["openai/m"])
        )
        == []
    )


def test_anthropic_models_are_looked_up_by_name(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any]
) -> None:
    fake.models = ["claude-haiku-4-5"]
    llm = make_client({"ANTHROPIC_BASE_URL": fake.root_url, "ANTHROPIC_API_KEY": "k"})
    assert run(lambda: llm.preflight(["anthropic/claude-haiku-4-5"])) == []
    with pytest.raises(LLMError, match="claude-nonexistent"):
        run(lambda: llm.preflight(["anthropic/claude-nonexistent"]))
    fake.models = None  # a gateway without the models route
    (note,) = run(lambda: llm.preflight(["anthropic/claude-nonexistent"]))
    assert "not checked" in note


# -- the commands check before they start --------------------------------------------------------


def _pau(tmp_path: Path, env_extra: dict[str, str], *args: str, process: bool = False) -> Ran:
    """``pau-mcp ARGS`` with only the given provider variables: in this process, or in a process of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAU_", "OPENAI_", "ANTHROPIC_", "AZURE_"))}
    env.update(env_extra, PAU_MCP_DATA_DIR=str(tmp_path), PAU_MCP_DB=str(tmp_path / "runs.db"))
    if process:
        return run_pau_process(*args, env=env, timeout=120)
    return run_pau(*args, env=env)


def test_eval_with_an_unreachable_model_server_fails_in_seconds_in_one_line_before_any_run(tmp_path: Path) -> None:
    port = _closed_port()
    # "In seconds" means the check is not retried: with 100 retries allowed, backing off up to a minute each, a retried
    # check would outlast the process's two minutes by far, while a busy machine's slow start-up cannot.
    done = _pau(
        tmp_path,
        {"OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1", "PAU_LLM_RETRIES": "100"},
        *("eval", "--model", "openai/m", "--limit", "2"),
        process=True,
    )
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and f"127.0.0.1:{port}" in errors[0] and "OPENAI_BASE_URL" in errors[0]
    assert not (tmp_path / "runs.db").exists() or "eval" not in _run_names(tmp_path / "runs.db")


def test_eval_with_a_missing_key_fails_at_once_naming_the_variable(tmp_path: Path) -> None:
    done = _pau(tmp_path, {}, "eval", "--model", "anthropic/claude-haiku-4-5", "--limit", "1")
    assert done.returncode == 1 and "ANTHROPIC_API_KEY" in done.stderr
    assert len([line for line in done.stderr.splitlines() if line.strip()]) == 1


def test_score_with_a_model_the_server_does_not_serve_fails_before_scoring(tmp_path: Path, fake: FakeLLM) -> None:
    fake.models = ["judge"]
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text('{"id": "builtin/b002", "predicted_description": "Counts runs."}\n')
    env = {"OPENAI_BASE_URL": fake.base_url, "PAU_MCP_WORKERS": "1"}
    done = _pau(
        tmp_path, env, "score", str(predictions), "--judge-model", "openai/judge", "--coder-model", "openai/nope"
    )
    assert done.returncode == 1 and "does not serve a model 'nope'" in done.stderr
    assert fake.requests == []


def _run_names(db: Path) -> str:
    import sqlite3

    return " ".join(row[0] for row in sqlite3.connect(db).execute("SELECT name FROM runs"))


def test_azure_is_checked_for_endpoint_version_and_key_with_a_note_that_deployments_are_not_listed(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any]
) -> None:
    fake.models = ["gpt-4o-mini"]
    fake.require_key = "az-key"
    env = {"AZURE_OPENAI_ENDPOINT": fake.root_url, "OPENAI_API_VERSION": "2024-10-21"}
    (note,) = run(lambda: make_client({**env, "AZURE_OPENAI_API_KEY": "az-key"}).preflight(["azure/my-deployment"]))
    assert "azure/my-deployment" in note and "not checked" in note
    assert fake.gets[0] == "/openai/models?api-version=2024-10-21"
    with pytest.raises(LLMError, match="AZURE_OPENAI_API_KEY"):
        run(lambda: make_client({**env, "AZURE_OPENAI_API_KEY": "wrong"}).preflight(["azure/my-deployment"]))
