"""Running a contest end to end: a suite created from a folder's functions first published after a date, committed,
served with deployment examples to the official MCP client, then revealed and verified, with a tampered method
named."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date
from pathlib import Path

import anyio
from creating import create_env, records, report_of, run_create
from fakellm import FakeLLM
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from pau_command import run_pau
from scripted import Known, ScriptedModel

from pau_mcp.manifests import ManifestStore

NUMBERS = ["(1,)", "(2,)", "(0,)", "(-4,)", "(10,)", "(7,)", "(100,)", "(3,)"]
MODEL = [
    Known("1901", NUMBERS, "Returns arg0 plus five.", "plus five", "def test_func(arg0):\n    return arg0 + 5"),
    Known("1902", NUMBERS, "Returns arg0 minus two.", "minus two", "def test_func(arg0):\n    return arg0 - 2"),
    Known("1903", NUMBERS, "Returns arg0 squared.", "squared", "def test_func(arg0):\n    return arg0 * arg0"),
]


def _git(folder: Path, *args: str, when: str | None = None) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org"}  # fmt: skip
    if when is not None:
        env |= {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True, env=env)


def make_repository(folder: Path) -> None:
    folder.mkdir()
    _git(folder, "init", "-q")
    (folder / "old.py").write_text("def plus_five(x):\n    return x + 5 + 0 * 1901\n")
    _git(folder, "add", "old.py")
    _git(folder, "commit", "-qm", "an old function", when="2025-01-10T10:00:00+00:00")
    (folder / "new.py").write_text("def minus_two(x):\n    return x - 2 + 0 * 1902\n")
    _git(folder, "add", "new.py")
    _git(folder, "commit", "-qm", "a new one", when="2026-03-01T10:00:00+00:00")
    (folder / "loose.py").write_text("def squared(x):\n    return x * x + 0 * 1903\n")  # never committed: its mtime


async def _serve_and_call(suites: Path, data: Path, suite: str) -> tuple[str, str]:
    """What an agent sees of the suite, served with deployment examples: the tool list and one call's result."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAU_")}
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pau_mcp", "serve", "--manifests", str(suites), "--suite", suite, "--examples", "deployment",
              "--data-dir", str(data)],
        env=env,
    )  # fmt: skip
    with anyio.fail_after(120):
        async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            method_tools = [t for t in tools.tools if t.name.startswith("fn_")]
            called = await session.call_tool(method_tools[0].name, {"arg0": 4})
    return json.dumps([t.model_dump(mode="json") for t in tools.tools]), json.dumps(called.model_dump(mode="json"))


def test_a_contest_suite_is_created_after_a_date_committed_served_revealed_and_verified(tmp_path: Path) -> None:
    folder = tmp_path / "funcs"
    make_repository(folder)
    suites, public = tmp_path / "suites", tmp_path / "public"
    with FakeLLM(ScriptedModel(MODEL)) as fake:
        created = run_create(
            fake, tmp_path / "data", suites, folder, "--suite", "contest", "--after", "2026-01-01", "--no-validator"
        )
        dataset = run_pau(
            "create", "cruxeval", "--after", "2026-01-01", "--model", "openai/m", "--manifests", suites,
            env=create_env(fake, tmp_path / "data"),
        )  # fmt: skip
    assert dataset.returncode == 2 and "only your own files carry" in dataset.stderr
    report = report_of(created)
    by_key = records(report)
    assert set(by_key) == {"new.py::minus_two", "loose.py::squared"}  # old.py was first published before the date
    assert report["notes"] == [
        "--after 2026-01-01: 2 functions first published after it (1 dated by its file's first git commit, 1 dated by "
        "its file's modification time (not in git)); 1 left out as first published on or before it"
    ]
    read = next(s for s in by_key["new.py::minus_two"]["steps"] if s["step"] == "read")["detail"]
    assert "first published 2026-03-01 (its file's first git commit)" in read
    suite = ManifestStore([suites], include_packaged=False).suite("contest")
    info = suite.info
    assert info.created is not None and info.created.date() >= date(2026, 3, 1)
    assert info.models == ["openai/gpt-4o-mini"] and info.after == date(2026, 1, 1) and not info.public_source
    assert info.first_published == date(2026, 3, 1)
    dated = {m.provenance.original_id: (m.provenance.published, m.provenance.dated_by) for m in suite.methods.values()}
    assert dated["new.py::minus_two"] == (date(2026, 3, 1), "git") and dated["loose.py::squared"][1] == "mtime"

    public.mkdir()
    commitment = public / "contest.commitment.json"
    assert run_pau("manifests", "commit", "contest", "--manifests", suites, "--out", commitment).returncode == 0

    tools, called = anyio.run(_serve_and_call, suites, tmp_path / "serve-data", "contest")
    for method in suite.methods.values():
        for hidden in (method.description, *method.source.splitlines()[1:], "minus_two", "squared"):
            assert hidden.strip() not in tools and hidden.strip() not in called, hidden
    assert '"isError": false' in called or '"is_error": false' in called

    verified = run_pau("manifests", "verify", "contest", commitment, "--manifests", suites)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    tampered = next(iter(suite.methods.values()))
    path = suites / "contest" / f"{tampered.name}.json"
    path.write_text(path.read_text().replace("0 * 190", "0 * 199", 1))
    caught = run_pau("manifests", "verify", "contest", commitment, "--manifests", suites)
    assert caught.returncode == 1 and f"differs: {tampered.id}" in caught.stdout
