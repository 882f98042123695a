"""The self-checking explorer (`--agent observer`): code written from its own description runs beside the hidden
tool on fresh inputs; a disagreement makes it revise; it concludes when a round agrees. A real `pau-mcp serve`, the
real sandbox, the models played by a scripted loopback server."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fakellm import FakeLLM, Reply
from mcp.client.client import Client
from pau_command import run_pau
from serve_args import serve_parts

from pau_mcp.config import Settings
from pau_mcp.contract import FACTS_KEY, ToolResult, ToolStatus
from pau_mcp.grammar import MAX_READ_CHARS, read_inputs
from pau_mcp.harness import EvalConfig, RunProgress, run_eval
from pau_mcp.harness.selfcheck import agrees, seen_from_example, seen_from_result
from pau_mcp.manifests import ManifestStore
from pau_mcp.runstore import EpisodeRow, RunStore
from pau_mcp.scoring import Scorer
from pau_mcp.server_assembly import assemble_server
from wasm_runtime import Outcome, Sandbox, Status, encode

MODEL = "openai/fake-observer"
B001 = ManifestStore().method("builtin/b001")  # the product of the non-zero digits, negated for a negative number
FIRST = "Multiplies the decimal digits of the number together."
REVISED = "Multiplies the non-zero decimal digits, skipping zeros; a negative number gives the negated product."
RIGHT = (
    "def test_func(arg0):\n    if arg0 == 0:\n        return 0\n    r = 1\n    for c in str(abs(arg0)):\n"
    "        if c != '0':\n            r *= int(c)\n    return -r if arg0 < 0 else r\n"
)
PLAIN = "def test_func(arg0):\n    r = 1\n    for c in str(abs(arg0)):\n        r *= int(c)\n    return r\n"


def brain(body: dict[str, Any]) -> Reply | str:
    """Plays the observer (hypothesis, inputs, revision), its code writer, and the scorer's judge and code writer."""
    text = str(body["messages"][-1]["content"])
    if "Write the Python function" in text:
        return f"```python\n{RIGHT if 'skipping zeros' in text else PLAIN}```"
    if "Rating:" in text and "<reference-" in text:
        return "Rating: 4"
    if "Write your first hypothesis" in text:
        return f"DESCRIPTION: {FIRST}"
    if "new inputs where your description" in text:
        if REVISED in text:
            return "These could still break it:\nINPUT: (1000,)\nINPUT: (-909,)\nINPUT: (0,)\nINPUT: (99,)"
        return "INPUT: (105,)\nINPUT: (7,)\n- INPUT: `(-23,)` for the sign\nINPUT: (12,)\nINPUT: (234,)"
    if "disagreed with the hidden function" in text:
        return f"I see: zeros are skipped and the sign is kept.\nDESCRIPTION: {REVISED}"
    return "I do not know."


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    with FakeLLM(responder=brain) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        yield server


def _observe(tmp_path: Path, budget: int = 10) -> tuple[Settings, EpisodeRow]:
    settings = Settings.from_options(
        data_dir=tmp_path, db=tmp_path / "runs.db", judge_model=MODEL, coder_model=MODEL, budget=budget
    )
    config = EvalConfig(
        run="observer", model=MODEL, suite="builtin", agent="observer", budget=budget, methods=(B001.id,),
        concurrency=1,
    )  # fmt: skip

    async def go() -> RunProgress:
        scorer = Scorer.from_settings(settings)
        try:
            with anyio.fail_after(180):
                return await run_eval(settings, config, scorer, None)
        finally:
            await scorer.aclose()

    progress = anyio.run(go)
    assert progress.failed == 0, progress.errors
    store = RunStore(settings.db_path)
    (episode,) = store.episodes(store.run_id("observer"), with_trajectories=True)
    return settings, episode


def test_an_observer_revises_after_its_code_disagrees_and_concludes_when_a_fresh_round_agrees(
    tmp_path: Path, fake: FakeLLM
) -> None:
    settings, episode = _observe(tmp_path)
    assert episode.state == "done" and episode.concluded == 1 and episode.queries == 8
    assert episode.trajectory is not None
    checks = [step for step in episode.trajectory if step["kind"] == "check"]
    assert [c["agreed"] for c in checks] == [False, True]
    first, second = checks
    assert first["description"] == FIRST and first["code"].strip() == PLAIN.strip()
    assert first["fresh"] == ["(105,)", "(7,)", "(-23,)", "(12,)"]  # (234,) was an initial example: not asked again
    assert {d["input"] for d in first["disagreements"]} == {"(105,)", "(-23,)"}
    assert second["description"] == REVISED and second["fresh"] == ["(1000,)", "(-909,)", "(0,)", "(99,)"]
    assert second["checked"] == 10  # the initial examples and every input called so far, the code run on each
    revisions = [p for p in fake.prompts() if "disagreed with the hidden function" in p]
    assert len(revisions) == 1
    assert "test_func(105): the hidden function returned 5; your description's code returned 0" in revisions[0]
    assert "test_func(-23): the hidden function returned -6; your description's code returned 6" in revisions[0]
    # Its own code ran in the harness's sandbox: the server saw exactly the 8 counted calls and the submission.
    db = sqlite3.connect(settings.db_path)
    assert db.execute("SELECT COUNT(*), SUM(counted) FROM calls").fetchone() == (8, 8)
    assert db.execute("SELECT description FROM submissions").fetchall() == [(REVISED,)]
    # Costed: every request of the episode, the code writer's included, is in its tokens.
    steps = [s for s in episode.trajectory if s["kind"] == "model"]
    assert sum(1 for s in steps if s.get("step") == "coder") == 2
    assert episode.input_tokens == 11 * len(steps) and episode.output_tokens == 7 * len(steps)
    assert episode.scores["codematch"].value == 1.0 and episode.scores["judge"].value == 4.0


def test_an_observer_whose_budget_ends_in_disagreement_does_not_conclude(tmp_path: Path, fake: FakeLLM) -> None:
    _, episode = _observe(tmp_path, budget=3)
    assert episode.queries == 3 and episode.concluded == 0 and episode.trajectory is not None
    (check,) = [step for step in episode.trajectory if step["kind"] == "check"]
    assert not check["agreed"] and check["fresh"] == ["(105,)", "(7,)", "(-23,)"]
    ending = [s for s in episode.trajectory if s["kind"] == "note" and s.get("event") == "self_check"]
    assert ending == [{"kind": "note", "event": "self_check", "agreed": False, "rounds": 1, "queries": 3}]


def test_the_observers_documentation_is_served_to_any_mcp_client_and_the_report_compares_it(
    tmp_path: Path, fake: FakeLLM, sandbox: Sandbox
) -> None:
    settings, _ = _observe(tmp_path)
    common = ["--db", str(settings.db_path), "--data-dir", str(tmp_path)]
    exported = run_pau("export", "docs", "observer", *common)
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["methods"][B001.id]["documentation"] == REVISED

    async def listed() -> dict[str, Any]:
        built = assemble_server(
            *serve_parts([*common, "--methods", B001.id, "--docs", "observer"]), sandboxes=lambda *a, **k: sandbox
        )
        try:
            async with Client(built.server, mode="2026-07-28") as client:
                with anyio.fail_after(60):
                    (tool,) = [t for t in (await client.list_tools()).tools if t.name.startswith("fn_")]
                    called = await client.call_tool(tool.name, {"arg0": 105})
            return {"tool": tool, "called": called}
        finally:
            built.service.store.close()

    seen = anyio.run(listed)
    assert REVISED in (seen["tool"].description or "") and seen["tool"].meta[FACTS_KEY]["examples"] == []
    assert seen["called"].structured_content["value"] == "5"

    markdown = tmp_path / "report.md"
    assert run_pau("report", "observer", *common, "--markdown", str(markdown)).returncode == 0
    table = markdown.read_text().split("Explorers compared")[1]
    assert "| observer | observer | openai/fake-observer | 1 | 4.00 | 1.000 | 8.0 |" in table
    assert "| 1 | 0 of 1 (0.0%) |" in table


def test_an_observer_reads_every_input_on_a_line_that_lists_several(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def listing(body: dict[str, Any]) -> Reply | str:
        text = str(body["messages"][-1]["content"])
        if "new inputs where your description" in text and REVISED not in text:
            return "INPUT: (105,), (7,), (-23,), (12,)"  # one line, four inputs
        return brain(body)

    with FakeLLM(responder=listing) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        _, episode = _observe(tmp_path)
    assert episode.trajectory is not None
    first = next(step for step in episode.trajectory if step["kind"] == "check")
    assert first["fresh"] == ["(105,)", "(7,)", "(-23,)", "(12,)"]


@pytest.mark.parametrize(
    ("line", "arity", "inputs"),
    [
        ("INPUT: (1,), (2,), (3,)", 1, ["(1,)", "(2,)", "(3,)"]),
        ("INPUT: (1, 2); (3, 4) and (5, 6)", 2, ["(1, 2)", "(3, 4)", "(5, 6)"]),
        ("INPUT: (1, 2), (3, 4)", 2, ["(1, 2)", "(3, 4)"]),
        ("INPUT: ((1, 2), (3, 4))", 2, ["((1, 2), (3, 4))"]),  # one input of two tuples, as the rules ask
        ("INPUT: test_func(1) or test_func(-1)", 1, ["(1,)", "(-1,)"]),
        ("INPUT: (1,) to check the sign", 1, ["(1,)"]),
        ("INPUT: [1, 2], 3", 2, ["[1, 2], 3"]),
    ],
)
def test_each_input_a_line_lists_is_read(line: str, arity: int, inputs: list[str]) -> None:
    assert read_inputs(line, arity, limit=8) == inputs


def test_a_megabyte_of_input_lines_is_read_in_linear_time_and_capped() -> None:
    flood = "INPUT:\n```\n" + "(1,)\n" * (200 * 1024)
    assert read_inputs(flood, 1, limit=4) == ["(1,)"] * 4  # only the capped tail is read: its marker is not in it
    lines = "INPUT: (1,)\n" * (90 * 1024)
    assert read_inputs(lines, 1, limit=4) == ["(1,)"] * 4
    prose = "x" * (1024 * 1024)
    assert read_inputs(prose, 2, limit=4) == []
    nested = "(" * (1024 * 1024) + "\nINPUT: " + "(" * 60_000
    (written,) = read_inputs(nested, 1)  # never parsed: it goes as written, for the server's rules to refuse
    assert len(written) <= MAX_READ_CHARS


def _ok(value: str) -> ToolResult:
    return ToolResult(status=ToolStatus.OK, value=value, queries_used=1, queries_left=None)


def test_its_check_compares_values_by_the_one_equality_rule_and_reads_a_megabyte_without_parsing_it() -> None:
    def returned(value: object) -> Outcome:
        return Outcome(Status.OK, value=repr(value), value_type=type(value).__name__, encoded=encode(value))

    assert agrees(seen_from_result("(1,)", _ok("2")), returned(2.0))  # 2 == 2.0
    assert not agrees(seen_from_result("(1,)", _ok("(1, 2)")), returned([1, 2]))
    assert agrees(seen_from_example("(0,)", "raises ValueError: no"), Outcome(Status.ERROR, error_type="ValueError"))
    assert not agrees(seen_from_example("(0,)", "raises ValueError: no"), Outcome(Status.ERROR, error_type="KeyError"))
    assert agrees(seen_from_example("(0,)", "timeout: too slow"), Outcome(Status.TIMEOUT))
    huge = "[" * (1024 * 1024)  # not a literal the argument rules read (over 64 KiB): compared as text
    assert not agrees(seen_from_result("(1,)", _ok(huge)), returned([]))
