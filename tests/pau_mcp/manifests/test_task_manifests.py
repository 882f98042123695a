"""Tasks in a suite: one chain of calls of its methods each, validated as written, answered at `manifests freeze` by
running the gold functions in the real sandbox, and checked by `manifests validate`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pau_command import run_pau
from pydantic import ValidationError
from tasksuite import ANSWERS, TASKS, make_task_suite

from pau_mcp.manifests import ManifestError, ManifestStore, Task, TaskStep, placeholders, substitute


def _task(*steps: tuple[str, str], suite: str = "mini") -> Task:
    return Task(id=f"{suite}/x", question="?", steps=[TaskStep(method=m, input=i) for m, i in steps])


def test_a_task_is_one_chain_where_each_step_takes_an_earlier_result() -> None:
    assert _task(("mini/b001", "(234,)"), ("mini/b023", "($1,)")).hops == 2
    for steps, why in (
        ([("mini/b001", "(234,)"), ("mini/b023", "(5,)")], "uses no earlier result"),
        ([("mini/b001", "($1,)")], "not the result of an earlier step"),
        ([("mini/b001", "(2,)"), ("mini/b023", "($2,)")], "not the result of an earlier step"),
        ([("mini/b001", "(2,)"), ("mini/b001", "(3,)"), ("mini/b023", "($2,)")], "step 2 uses no earlier result"),
        ([("other/b001", "(2,)")], "not a method of suite 'mini'"),
    ):
        with pytest.raises(ValidationError, match=why):
            _task(*steps)
    with pytest.raises(ValidationError, match="never used"):
        _task(("mini/b001", "(2,)"), ("mini/b023", "($1,)"), ("mini/b005", "($1,)"))


def test_tasks_are_stored_one_file_each_and_their_methods_must_exist(tmp_path: Path) -> None:
    make_task_suite(tmp_path)
    suite = ManifestStore([tmp_path]).suite("mini")
    assert sorted(suite.tasks) == ["mini/t1", "mini/t2", "mini/t3"] and len(suite.methods) == 5
    assert json.loads((tmp_path / "mini" / "tasks" / "t2.json").read_text())["steps"][1] == {
        "method": "mini/b023", "input": "($1,)"
    }  # fmt: skip
    broken = tmp_path / "mini" / "tasks" / "t9.json"
    broken.write_text(TASKS[0].model_copy(update={"id": "mini/t9"}).model_dump_json().replace("mini/b001", "mini/b999"))
    with pytest.raises(ManifestError, match="t9.json: steps.0.method: suite 'mini' has no method 'mini/b999'"):
        ManifestStore([tmp_path]).suite("mini")


def test_freeze_answers_each_task_by_running_its_chain_of_gold_functions(tmp_path: Path) -> None:
    make_task_suite(tmp_path)
    frozen = run_pau("manifests", "freeze", "--manifests", str(tmp_path), "--suite", "mini")
    assert frozen.returncode == 0, frozen.stderr
    assert "froze 3 tasks (3 changed)" in frozen.stdout
    tasks = ManifestStore([tmp_path]).suite("mini").tasks
    assert all(task.answer is not None for task in tasks.values())  # each task was frozen
    assert {task_id: task.answer.encoded for task_id, task in tasks.items() if task.answer is not None} == ANSWERS
    checked = run_pau("manifests", "validate", "--manifests", str(tmp_path), "--suite", "mini")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "5 methods and 3 tasks checked, 8 passed, 0 failed" in checked.stdout


def test_a_chain_that_raises_cannot_be_frozen_and_a_question_that_gives_a_method_away_fails_validation(
    tmp_path: Path,
) -> None:
    gold = ManifestStore().method("builtin/b001").description
    raising = Task(
        id="mini/bad", question="How many steps does 0 need?", steps=[TaskStep(method="mini/b005", input="(0,)")]
    )
    leaking = Task(
        id="mini/leak", question=f"{gold} What is it for 12?", steps=[TaskStep(method="mini/b001", input="(12,)")]
    )
    make_task_suite(tmp_path, [raising, leaking])
    frozen = run_pau("manifests", "freeze", "--manifests", str(tmp_path), "--suite", "mini")
    assert frozen.returncode == 1
    assert "mini/bad: step 1 (mini/b005 on (0,)) ended with raises ValueError" in frozen.stderr
    checked = run_pau("manifests", "validate", "--manifests", str(tmp_path), "--suite", "mini")
    assert checked.returncode == 1
    assert "mini/leak: [question] the question quotes the gold description of mini/b001" in checked.stderr
    assert "mini/bad: [frozen]" in checked.stderr


def test_placeholders_are_found_and_filled_in_linear_time_in_a_megabyte() -> None:
    text = "($1, '$2" + "$" * (1024 * 1024) + "$1')"
    assert placeholders(text) == [1, 2, 1]
    filled = substitute(text, ["24", "'x'"])
    assert filled.startswith("(24, ''x'") and filled.endswith("$24')")
    assert placeholders("$0 $10 $$9") == [1, 9]  # one digit, 1 to 9: $10 is $1 followed by 0
