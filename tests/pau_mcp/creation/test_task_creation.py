"""`pau-mcp create --tasks-for SUITE`: chains drawn from a suite's hidden tests and run in the real sandbox, questions
written by a (scripted) model from the gold descriptions and refused when they give one away, answers frozen."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakellm import FakeLLM, Reply
from pau_command import Ran, run_pau
from tasksuite import make_task_suite

from pau_mcp.creation.tasks import read_question, unstated_input
from pau_mcp.manifests import ManifestStore, TaskStep, placeholders


def writer(body: dict[str, Any]) -> Reply | str:
    """Writes a plain question, except for a chain that starts with 57 digits' product: it copies the description."""
    text = str(body["messages"][-1]["content"])
    steps = re.findall(r"^Step (\d+): .*?arguments (.*?)\.\n  (.*)$", text, re.MULTILINE)
    if steps and "b001" not in text and steps[0][2].startswith("Takes an integer and returns the product"):
        return f"QUESTION: {steps[0][2]} What is it for {steps[0][1]}?"
    return "QUESTION: " + " then ".join(f"do step {n} on {args}" for n, args, _ in steps) + "; what is the result?"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    with FakeLLM(responder=writer) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        yield server


def _create(tmp_path: Path, *extra: str) -> Ran:
    return run_pau(
        "create", "--tasks-for", "mini", "--model", "openai/writer", "--hops", "1,2,3", "--tasks-per-hop", "3",
        "--manifests", str(tmp_path / "manifests"), "--data-dir", str(tmp_path), *extra,
    )  # fmt: skip


def test_tasks_are_drawn_from_the_tests_asked_by_a_model_and_frozen_and_a_leaking_question_is_refused(
    tmp_path: Path, fake: FakeLLM
) -> None:
    make_task_suite(tmp_path / "manifests", tasks=[])
    made = _create(tmp_path)
    assert made.returncode == 0, made.stdout + made.stderr
    suite = ManifestStore([tmp_path / "manifests"]).suite("mini")
    tasks = list(suite.tasks.values())
    assert tasks and {t.hops for t in tasks} <= {1, 2, 3} and all(t.frozen for t in tasks)
    assert f"{len(tasks)} tasks written" in made.stdout
    for task in tasks:
        assert task.provenance.made_by == "create" and task.asks_calls == (task.hops >= 2)
        assert len({step.method for step in task.steps}) == task.hops
        for number, step in enumerate(task.steps[1:], start=2):
            assert placeholders(step.input) == [number - 1]
        assert not any(suite.methods[s.method].description in task.question for s in task.steps)
    # The gold descriptions reached the question writer (the operator's model), fenced as data.
    asked = [str(body["messages"][-1]["content"]) for body in fake.requests]
    assert all("<chain-" in text for text in asked)
    refused = [line for line in made.stdout.splitlines() if "refused:" in line]
    assert refused and all("quotes the gold description" in line for line in refused)
    validated = run_pau("manifests", "validate", "--manifests", str(tmp_path / "manifests"), "--suite", "mini")
    assert validated.returncode == 0, validated.stdout + validated.stderr


def test_the_same_seed_makes_the_same_tasks_and_existing_tasks_are_kept_unless_replaced(
    tmp_path: Path, fake: FakeLLM
) -> None:
    make_task_suite(tmp_path / "manifests", tasks=[])
    assert _create(tmp_path).returncode == 0
    folder = tmp_path / "manifests" / "mini" / "tasks"
    first = {path.name: path.read_text() for path in folder.glob("*.json")}
    again = _create(tmp_path)
    assert again.returncode == 1 and "already has" in again.stderr and "--replace" in again.stderr
    assert _create(tmp_path, "--replace").returncode == 0
    assert {path.name: path.read_text() for path in folder.glob("*.json")} == first


def test_the_packaged_suite_is_not_rewritten_and_a_question_is_read_after_its_marker() -> None:
    refused = run_pau("create", "--tasks-for", "builtin", "--model", "openai/writer")
    assert refused.returncode == 2 and "part of the pau-mcp installation" in refused.stderr
    assert read_question("Sure.\nQUESTION:  What is  2 + 2?\n") == "What is 2 + 2?"
    assert read_question("x" * (2 * 1024 * 1024)) == "x" * 2000  # capped before it is copied


def vague(body: dict[str, Any]) -> str:
    """Writes questions that never say which values to start from."""
    return "QUESTION: Take my number through these steps; what comes out at the end?"


def test_a_question_that_does_not_state_its_inputs_is_refused_and_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_task_suite(tmp_path / "manifests", tasks=[])
    with FakeLLM(responder=vague) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        made = _create(tmp_path)
    assert made.returncode == 1, made.stdout + made.stderr
    refused = [line for line in made.stdout.splitlines() if "refused:" in line]
    assert refused and all("does not state the input" in line for line in refused), refused
    assert "0 tasks written" in made.stdout


def test_every_literal_input_must_be_in_the_question_as_written() -> None:
    steps = [
        TaskStep(method="m/a", input="(57, 'Banana split', [1, -2], {'k': None})"),
        TaskStep(method="m/b", input="($1, True, '', 3.5)"),
    ]
    stated = (
        "Take 57, 'Banana split', the list [1, -2] and {'k': None}; then the result, True, an empty string and 3.5."
    )
    assert unstated_input(stated, steps) is None
    assert unstated_input(stated.replace("57", "fifty-seven"), steps) == "57 (step 1)"
    assert unstated_input(stated.replace("Banana split", "banana"), steps) == "'Banana split' (step 1)"
    assert unstated_input(stated.replace("-2", "2"), steps) == "-2 in [1, -2] (step 1)"
    assert unstated_input(stated.replace("3.5", "three and a half"), steps) == "3.5 (step 2)"
    assert unstated_input(stated.replace("True", "on"), steps) == "True (step 2)"
    # Small numbers may be words; the earlier result ($1) needs no stating.
    assert unstated_input("Count from two.", [TaskStep(method="m/a", input="(2,)")]) is None
