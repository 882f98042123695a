"""Checking an answer to a task: exact match with the frozen answer by the one equality rule, and the agent's calls
re-executed with the gold functions in the real sandbox; what the agent wrote is hostile and capped."""

from __future__ import annotations

import anyio
import pytest
from tasksuite import make_task_suite

from pau_mcp.manifests import ManifestStore, Suite
from pau_mcp.manifests.checks import freeze_task
from pau_mcp.scoring import TaskCall, TaskCheck, check_answer
from pau_mcp.scoring.tasks import read_answer
from wasm_runtime import Sandbox

TOOLS = {"fn_b001": "mini/b001", "fn_b005": "mini/b005", "fn_b023": "mini/b023"}


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory, sandbox: Sandbox) -> Suite:
    root = make_task_suite(tmp_path_factory.mktemp("manifests"))
    loaded = ManifestStore([root]).suite("mini")
    for task in list(loaded.tasks.values()):
        frozen, problem = freeze_task(task, loaded.methods, sandbox)
        assert problem is None
        loaded.tasks[task.id] = frozen
    return loaded


def _check(suite: Suite, sandbox: Sandbox, task_id: str, answer: str, *calls: tuple[str, str]) -> TaskCheck:
    task = suite.tasks[task_id]
    given = [TaskCall(tool, args) for tool, args in calls]
    return anyio.run(lambda: check_answer(task, answer, given, methods=suite.methods, tools=TOOLS, sandbox=sandbox))


def test_an_answer_matches_by_value_whatever_its_spelling(suite: Suite, sandbox: Sandbox) -> None:
    for answer in ("40", " 40 ", "`40`", "40.0", "0x28"):
        checked = _check(suite, sandbox, "mini/t1", answer)
        assert (checked.value, checked.answer_matched, checked.verified) == (1.0, True, None), answer
    for answer in ("'40'", "41", "forty", "", "[40]"):
        checked = _check(suite, sandbox, "mini/t1", answer)
        assert checked.value == 0.0 and not checked.answer_matched, answer
    assert _check(suite, sandbox, "mini/t1", "forty").reason == "the answer is not a Python literal"


def test_a_two_hop_answer_counts_only_when_its_calls_re_execute_to_it(suite: Suite, sandbox: Sandbox) -> None:
    right = _check(suite, sandbox, "mini/t2", "'220'", ("fn_b001", "(234,)"), ("fn_b023", "($1,)"))
    assert (right.value, right.verified, right.same_methods, right.hops) == (1.0, True, True, 2)
    assert [c["args"] for c in right.calls] == ["(234,)", "(24,)"]
    written_out = _check(suite, sandbox, "mini/t2", "'220'", ("fn_b001", "(234,)"), ("fn_b023", "(24,)"))
    assert written_out.value == 1.0 and written_out.same_methods  # the values it saw, written out, re-execute too
    shortcut = _check(suite, sandbox, "mini/t2", "'220'", ("fn_b023", "(24,)"))
    assert (shortcut.value, shortcut.verified, shortcut.same_methods) == (0.0, False, False)  # the answer, no chain
    assert shortcut.reason == "the calls are not the task's chain (its methods, in its order)"
    guessed = _check(suite, sandbox, "mini/t2", "'220'")
    assert (guessed.value, guessed.answer_matched, guessed.verified) == (0.0, True, False)
    assert guessed.reason == "no calls were given"
    wrong_chain = _check(suite, sandbox, "mini/t2", "'220'", ("fn_b001", "(235,)"), ("fn_b023", "($1,)"))
    assert wrong_chain.value == 0.0 and wrong_chain.reason == "re-executing the calls does not give the answer"


def test_one_unrelated_call_that_happens_to_give_the_answer_is_not_the_tasks_chain(
    suite: Suite, sandbox: Sandbox
) -> None:
    # t3 chains b001, b005 and b023 to '12' (57 -> 35 -> 5 steps); base 3 of any 5 gives it too.
    for calls in (
        [("fn_b023", "(5,)")],
        [("fn_b005", "(35,)"), ("fn_b023", "($1,)")],  # the first hop skipped
        [("fn_b001", "(5,)"), ("fn_b023", "($1,)")],
    ):
        checked = _check(suite, sandbox, "mini/t3", "'12'", *calls)
        assert checked.answer_matched and checked.verified is False and checked.value == 0.0, calls
        assert checked.reason == "the calls are not the task's chain (its methods, in its order)", calls
    right = _check(suite, sandbox, "mini/t3", "'12'", ("fn_b001", "(57,)"), ("fn_b005", "($1,)"), ("fn_b023", "($2,)"))
    assert (right.value, right.verified, right.same_methods) == (1.0, True, True)


def test_the_tasks_methods_in_order_from_other_inputs_are_no_chain_unless_each_step_gives_the_same(
    suite: Suite, sandbox: Sandbox
) -> None:
    # b001(75) = 35 as b001(57) does, so its chain is the task's; b001(5) = 5 skips a step's value.
    same_values = _check(suite, sandbox, "mini/t3", "'12'", ("fn_b001", "(75,)"), ("fn_b005", "($1,)"),
                         ("fn_b023", "($2,)"))  # fmt: skip
    assert same_values.value == 1.0
    skipped = _check(suite, sandbox, "mini/t3", "'12'", ("fn_b001", "(1,)"), ("fn_b005", "(35,)"), ("fn_b023", "(5,)"))
    assert skipped.value == 0.0 and skipped.same_methods
    assert skipped.reason == "call 1 does not give what the task's step 1 gives"


def test_calls_that_cannot_run_are_refused_in_fixed_words(suite: Suite, sandbox: Sandbox) -> None:
    for calls, reason in (
        ([("fn_nope", "(1,)")], "call 1 names a tool that is not one of the suite's"),
        ([("fn_b001", "($1,)")], "call 1 uses the result of a call that is not before it"),
        ([("fn_b001", "(234,)"), ("fn_b023", "($2,)")], "call 2 uses the result of a call that is not before it"),
        ([("fn_b005", "(0,)")], "call 1 did not return a value"),
        ([("fn_b001", "(1,)"), ("fn_b023", "(" + "$1, " * 17 + ")")], "call 2 uses earlier results more than 16 times"),
        ([("fn_b001", "(1,)")] * 11, "more than 10 calls were given"),
    ):
        checked = _check(suite, sandbox, "mini/t2", "'220'", *calls)
        assert checked.value == 0.0 and checked.verified is False
        assert checked.reason == reason, calls


def test_a_megabyte_of_answer_or_arguments_is_refused_without_being_parsed(suite: Suite, sandbox: Sandbox) -> None:
    huge = "[" * (1024 * 1024)
    assert read_answer(huge) == (False, None)
    checked = _check(suite, sandbox, "mini/t2", huge, ("fn_b001", "(" + "1" * (1024 * 1024) + ",)"))
    assert checked.value == 0.0 and "longer than 65,536 characters" in checked.reason
    nested = "[" * 5000 + "]" * 5000
    assert read_answer(nested) == (False, None)  # nested past the argument rules' limit
