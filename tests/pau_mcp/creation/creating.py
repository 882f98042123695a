"""Helpers of the creation tests: `pau-mcp create` run in this process against the scripted model on loopback."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fakellm import FakeLLM
from pau_command import Ran, run_pau
from scripted import ScriptedModel

MODEL = "openai/gpt-4o-mini"

# The fixture ``serve`` (conftest.py): starts a fake OpenAI-compatible server answering with a scripted model.
Serve = Callable[[ScriptedModel], FakeLLM]


def create_env(fake: FakeLLM, data_dir: Path) -> dict[str, str]:
    """The command's environment: the fake server as the OpenAI endpoint, a data directory of the test's own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAU_", "OPENAI_", "ANTHROPIC_", "AZURE_"))}
    return {**env, "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "test-key", "PAU_MCP_DATA_DIR": str(data_dir)}


def run_create(fake: FakeLLM, data_dir: Path, manifests: Path, *args: str | Path) -> Ran:
    """``pau-mcp create ARGS --model MODEL --manifests DIR --json`` in this process."""
    return run_pau(
        "create", *args, "--model", MODEL, "--manifests", manifests, "--json", env=create_env(fake, data_dir)
    )


def report_of(ran: Ran) -> dict[str, Any]:
    """The JSON report a run printed (it fails the test, with the output, when there is none)."""
    assert ran.stdout.strip().startswith("{"), f"exit {ran.returncode}\n{ran.stdout}\n{ran.stderr}"
    report: dict[str, Any] = json.loads(ran.stdout)
    return report


def records(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The report's records by key."""
    return {r["key"]: r for r in report["records"]}
