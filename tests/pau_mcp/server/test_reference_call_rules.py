"""`serve --protocol reference`: the reference benchmark's rules for calls (docs/protocol.md), and the dataset text
of initial examples in the facts; this project's protocol keeps its own."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
from conftest import ROOT
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from pau_command import run_pau

from pau_mcp.config import Settings
from pau_mcp.contract import FACTS_KEY
from pau_mcp.manifests import Case, ManifestStore, Method, Original, Provenance, Suite, SuiteInfo, Tags, tool_name
from pau_mcp.manifests.checks import freeze_method
from pau_mcp.server import exploration_settings
from pau_mcp.server.catalog import Exposed
from pau_mcp.server.launch import http_server as launch_http_server
from wasm_runtime import Sandbox


def _suite(root: Path, sandbox: Sandbox) -> None:
    """A suite with one method that returns as many characters as asked, and keeps its examples' dataset text."""
    suite = Suite.create(root, SuiteInfo(name="big"))
    method = Method(
        id="big/m", header="def test_func(arg0):", params=["arg0"], source="def test_func(arg0):\n    return 'x' * arg0\n",
        description="Returns arg0 copies of x.", provenance=Provenance(dataset="test"), tags=Tags(arity=1),
        examples=[Case(input="(2,)", original=Original(input="2", output='"xx"'))], tests=[Case(input="(3,)")],
    )  # fmt: skip
    suite.save(freeze_method(method, sandbox))


def _call(tmp_path: Path, *args: str) -> tuple[int, str, list[dict[str, Any]]]:
    db = tmp_path / "runs.db"
    ran = run_pau(
        "call", *args, "--suite", "big", "--manifests", tmp_path / "suites", "--db", db, env=dict(os.environ), cwd=ROOT
    )
    shown = run_pau("runs", "show", "cli", "--json", "--db", db, env=dict(os.environ), cwd=ROOT)
    return ran.returncode, ran.stdout, json.loads(shown.stdout)["calls"]


def test_under_the_reference_protocol_a_call_of_the_wrong_arity_runs_counts_and_shows_pythons_type_error(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    _suite(tmp_path / "suites", sandbox)
    code, out, calls = _call(tmp_path, "big/m", "(1, 2)")
    assert code == 1 and "takes 1 argument, got 2" in out and not calls[-1]["counted"]  # this project's: refused
    code, out, calls = _call(tmp_path, "big/m", "(1, 2)", "--protocol", "reference")
    assert "raised TypeError: test_func() takes 1 positional argument but 2 were given" in out
    assert calls[-1]["counted"] and calls[-1]["status"] == "error"


def test_the_reference_protocols_results_are_bounded_at_a_mebibyte_not_unbounded(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    _suite(tmp_path / "suites", sandbox)
    _, _, calls = _call(tmp_path, "big/m", "(500000,)")
    assert calls[-1]["status"] == "output_limit"  # this project's 64 KiB
    _, _, calls = _call(tmp_path, "big/m", "(500000,)", "--protocol", "reference")
    assert calls[-1]["status"] == "ok"
    _, _, calls = _call(tmp_path, "big/m", "(2000000,)", "--protocol", "reference")
    assert calls[-1]["status"] == "output_limit"  # 2 MB: past the bound that stands for the reference's none


def test_the_reference_protocols_calls_get_thirty_seconds_unless_the_operator_sets_a_limit() -> None:
    ours = exploration_settings(Settings.from_options())
    assert (ours.timeout_s, ours.max_output_kb) == (2.0, 64)
    theirs = exploration_settings(Settings.from_options(protocol="reference"))
    assert (theirs.timeout_s, theirs.max_output_kb) == (30.0, 1024)
    chosen = exploration_settings(Settings.from_options(protocol="reference", timeout_s=5, max_output_kb=128))
    assert (chosen.timeout_s, chosen.max_output_kb) == (5.0, 128)


def test_a_server_launched_with_the_parents_settings_applies_the_reference_limits_the_operator_did_not_set(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    # `pau-mcp eval --protocol reference` hands its server the settings as a JSON file: every field in it counted as
    # the operator's, so the reference's limits never applied (2 s / 64 KiB where the protocol promises 30 s / 1 MiB).
    _suite(tmp_path / "suites", sandbox)
    given = Settings.from_options(protocol="reference", manifests=(tmp_path / "suites",), data_dir=tmp_path)
    handed = Settings.from_json(given.to_json())
    assert (exploration_settings(handed).timeout_s, exploration_settings(handed).max_output_kb) == (30.0, 1024)
    chosen = Settings.from_json(Settings.from_options(protocol="reference", timeout_s=5).to_json())
    assert (exploration_settings(chosen).timeout_s, exploration_settings(chosen).max_output_kb) == (5.0, 1024)
    with launch_http_server(["--suite", "big", "--db", str(tmp_path / "runs.db")], settings=given) as url:
        status = anyio.run(_one_call, url, tool_name(given.deployment_key(), "big/m"), 500_000)
    assert status == "ok"  # 500,000 characters: within the reference's 1 MiB, past this project's 64 KiB


async def _one_call(url: str, tool: str, size: int) -> str:
    async with streamable_http_client(url) as (read, write, *_), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool(tool, {"arg0": size})
        return str((result.structured_content or {}).get("status"))


def test_the_dataset_text_of_initial_examples_is_published_only_for_suites_that_keep_it(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    _suite(tmp_path / "suites", sandbox)
    kept = Exposed(ManifestStore([tmp_path / "suites"]).method("big/m"), "fn_x")
    (example,) = kept.meta(20)[FACTS_KEY]["examples"]
    assert example == {"line": "test_func(2) -> 'xx'", "input": "(2,)", "output": "'xx'",
                       "original": {"input": "2", "output": '"xx"'}}  # fmt: skip
    assert 'xx"' not in kept.description(20)  # the description shows this project's form only
    builtin = Exposed(ManifestStore().method("builtin/b001"), "fn_y").meta(20)[FACTS_KEY]["examples"]
    assert all(set(example) == {"line", "input", "output"} for example in builtin)
