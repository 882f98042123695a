"""Checking an answer to a task: exact match with the frozen answer by the one equality rule, and the agent's calls
re-executed with the gold functions in the real sandbox; what the agent wrote is hostile and capped."""

from __future__ import annotations

import anyio
import pytest
from tasksuite import make_task_suite

from pau_mcp.manifests import ManifestStore
from pau_mcp.manifests.checks import freeze_task
from pau_mcp.scoring import TaskCall, TaskCheck, check_answer
from pau_mcp.scoring.tasks import read_answer

TOOLS = {"fn_b001": "mini/b001", "fn_b005": "mini/b005", "fn_b023": "mini/b023"}


@pytest.fixture(scope="module")
def suite(tmp_path_factory, sandbox):
    root = make_task_suite(tmp_path_factory.mktemp("manifests"))
    loaded = ManifestStore([root]).suite("mini")
    for task in list(loaded.tasks.values()):
        frozen, problem = freeze_task(task, loaded.methods, sandbox)
        assert problem is None
        loaded.tasks[task.id] = frozen
    return loaded


def _check(suite, sandbox, task_id: str, answer: str, *calls: tuple[str, str]) -> TaskCheck:
    task = suite.tasks[task_id]
    given = [TaskCall(tool, args) for tool, args in calls]
    return anyio.run(lambda: check_answer(task, answer, given, methods=suite.methods, tools=TOOLS, sandbox=sandbox))


def test_an_answer_matches_by_value_whatever_its_spelling(suite, sandbox):
    for answer in ("40", " 40 ", "`40`", "40.0", "0x28"):
        checked = _check(suite, sandbox, "mini/t1", answer)
        assert (checked.value, checked.answer_matched, checked.verified) == (1.0, True, None), answer
    for answer in ("'40'", "41", "forty", "", "[40]"):
        checked = _check(suite, sandbox, "mini/t1", answer)
        assert checked.value == 0.0 and not checked.answer_matched, answer
    assert _check(suite, sandbox, "mini/t1", "forty").reason == "the answer is not a Python literal"


def test_a_two_hop_answer_counts_only_when_its_calls_re_execute_to_it(suite, sandbox):
    right = _check(suite, sandbox, "mini/t2", "'220'", ("fn_b001", "(234,)"), ("fn_b023", "($1,)"))
    assert (right.value, right.verified, right.same_methods, right.hops) == (1.0, True, True, 2)
    assert [c["args"] for c in right.calls] == ["(234,)", "(24,)"]
    written_out = _check(suite, sandbox, "mini/t2", "'220'", ("fn_b001", "(234,)"), ("fn_b023", "(24,)"))
    assert written_out.value == 1.0 and written_out.same_methods  # the values it saw, written out, re-execute too
    shortcut = _check(suite, sandbox, "mini/t2", "'220'", ("fn_b023", "(24,)"))
    assert shortcut.verified and not shortcut.same_methods  # verified as VAKRA does: by what the calls give
    guessed = _check(suite, sandbox, "mini/t2", "'220'")
    assert (guessed.value, guessed.answer_matched, guessed.verified) == (0.0, True, False)
    assert guessed.reason == "no calls were given"
    wrong_chain = _check(suite, sandbox, "mini/t2", "'220'", ("fn_b001", "(235,)"), ("fn_b023", "($1,)"))
    assert wrong_chain.value == 0.0 and wrong_chain.reason == "re-executing the calls does not give the answer"


def test_calls_that_cannot_run_are_refused_in_fixed_words(suite, sandbox):
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


def test_a_megabyte_of_answer_or_arguments_is_refused_without_being_parsed(suite, sandbox):
    huge = "[" * (1024 * 1024)
    assert read_answer(huge) == (False, None)
    checked = _check(suite, sandbox, "mini/t2", huge, ("fn_b001", "(" + "1" * (1024 * 1024) + ",)"))
    assert checked.value == 0.0 and "longer than 65,536 characters" in checked.reason
    nested = "[" * 5000 + "]" * 5000
    assert read_answer(nested) == (False, None)  # nested past the argument rules' limit
