"""server.json, the server's entry in the MCP registry (schema 2025-12-11), agrees with the package it describes:
its name with the README's ``mcp-name:`` line (how the registry verifies a PyPI package), its version with
pyproject.toml, its command with the console script, its variables with the settings."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

from pau_mcp.config import SETTINGS
from pau_mcp.server.card import REGISTRY_NAME, SERVER_JSON_SCHEMA

ROOT = Path(__file__).resolve().parents[1]


def test_server_json_describes_the_package_as_pypi_and_the_readme_publishes_its_name() -> None:
    entry = json.loads((ROOT / "server.json").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert entry["$schema"] == SERVER_JSON_SCHEMA
    assert entry["name"] == REGISTRY_NAME
    assert re.fullmatch(r"[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+", entry["name"])  # reverse-DNS namespace / name
    assert 1 <= len(entry["description"]) <= 100
    assert entry["version"] == project["version"]
    (package,) = entry["packages"]
    assert package["registryType"] == "pypi" and package["identifier"] == project["name"]
    assert package["version"] == project["version"] and package["transport"] == {"type": "stdio"}
    assert project["scripts"]["pau-mcp"] == "pau_mcp.cli:main"  # what `uvx pau-mcp serve` runs
    assert [a["value"] for a in package["packageArguments"]] == ["serve"]
    known = {spec.env for spec in SETTINGS.values()}
    for variable in package["environmentVariables"]:
        assert variable["name"] in known and variable["description"]
    assert f"mcp-name: {entry['name']}" in (ROOT / "README.md").read_text()
