"""Freezing outcomes and validating methods in the real sandbox, one failure kind at a time."""

from __future__ import annotations

from typing import Any

import pytest

from pau_mcp.manifests import Case, FrozenOutcome, Method, dump_method
from pau_mcp.manifests.checks import Problem, check_method, check_methods, freeze_method, freeze_methods, source_arity
from wasm_runtime import Limits, Sandbox

DOUBLE = ["def test_func(arg0):", "    return arg0 * 2"]

#: Keeps a counter on the built-ins module, reached through ``print.__self__`` without any import.
COUNTER_ON_BUILTINS = [
    "def test_func(arg0):",
    "    home = print.__self__",
    "    home.pau_calls = getattr(home, 'pau_calls', 0) + 1",
    "    return (arg0, home.pau_calls)",
]

#: Keeps a total in the globals of the outermost (guest) frame, reached through a traceback.
TOTAL_IN_A_GUEST_FRAME = [
    "def test_func(arg0):",
    "    try:",
    "        raise ValueError",
    "    except ValueError as exc:",
    "        frame = exc.__traceback__.tb_frame",
    "    while frame.f_back is not None:",
    "        frame = frame.f_back",
    "    scope = frame.f_globals",
    "    scope['pau_total'] = scope.get('pau_total', 0) + arg0",
    "    return scope['pau_total']",
]

#: Looks random; the sandbox reseeds ``random`` for every input, so it is deterministic.
SEEDED_RANDOM = [
    "import random",
    "def test_func(arg0):",
    "    picks = [random.randint(0, 99) for _ in range(arg0)]",
    "    random.shuffle(picks)",
    "    return picks, random.random(), random.choice('abcdef')",
]


def make(
    source: list[str] | str = DOUBLE, inputs: tuple[str, ...] = ("(1,)", "(2,)", "('a',)"), **changes: Any
) -> Method:
    """An unfrozen method: the first two inputs are examples, the rest tests."""
    params = changes.pop("params", ["arg0"])
    entry = changes.pop("entry", "test_func")
    data: dict[str, Any] = {
        "id": "demo/m1",
        "header": f"def {entry}({', '.join(params)}):",
        "params": params,
        "entry": entry,
        "source": source,
        "description": "Doubles its argument.",
        "examples": [{"input": text} for text in inputs[:2]],
        "tests": [{"input": text} for text in inputs[2:]],
        "provenance": {"dataset": "demo"},
        "tags": {"arity": len(params)},
    }
    data.update(changes)
    return Method.model_validate(data)


def checks_of(problems: list[Problem]) -> list[str]:
    return [problem.check for problem in problems]


def with_outcome(method: Method, index: int, **fields: Any) -> Method:
    """The method with test ``index``'s frozen outcome edited by hand."""
    tests = list(method.tests)
    old = tests[index].outcome
    assert old is not None
    tests[index] = Case(input=tests[index].input, outcome=old.model_copy(update=fields))
    return method.model_copy(update={"tests": tests})


# --- freezing -----------------------------------------------------------------------------------


def test_freezing_records_an_outcome_for_every_example_and_test_in_order(sandbox: Sandbox) -> None:
    draft = make(inputs=("(1,)", "('ab',)", "(None,)", "([1],)"))
    frozen = freeze_method(draft, sandbox)
    assert not draft.frozen and frozen.frozen
    assert [c.input for c in frozen.examples] == ["(1,)", "('ab',)"]
    assert [c.input for c in frozen.tests] == ["(None,)", "([1],)"]
    assert [c.frozen_outcome().shown() for c in (*frozen.examples, *frozen.tests)] == [
        "2", "'abab'", "raises TypeError: unsupported operand type(s) for *: 'NoneType' and 'int'", "[1, 1]"
    ]  # fmt: skip
    assert frozen.model_copy(update={"examples": [], "tests": []}) == draft.model_copy(
        update={"examples": [], "tests": []}
    )


def test_freezing_twice_changes_nothing(sandbox: Sandbox) -> None:
    once = freeze_method(make(SEEDED_RANDOM, ("(3,)", "(0,)", "(5,)")), sandbox)
    assert dump_method(freeze_method(once, sandbox)) == dump_method(once)


def test_freezing_many_keeps_their_order_and_reports_each(sandbox: Sandbox) -> None:
    drafts = [make(id=f"demo/m{i}", inputs=(f"({i},)", "(0,)")) for i in range(5)]
    seen: list[str] = []
    frozen = freeze_methods(drafts, sandbox, progress=lambda m: seen.append(m.id))
    assert [m.id for m in frozen] == [d.id for d in drafts] == seen
    assert [m.examples[0].frozen_outcome().value for m in frozen] == ["0", "2", "4", "6", "8"]


# --- a passing method --------------------------------------------------------------------------


def test_a_sound_frozen_method_passes(sandbox: Sandbox) -> None:
    assert check_method(freeze_method(make(), sandbox), sandbox) == []


def test_a_method_that_raises_on_some_inputs_still_passes(sandbox: Sandbox) -> None:
    method = freeze_method(
        make(["def test_func(arg0):", "    return {1: 'a'}[arg0]"], ("(1,)", "(1,)", "(2,)")), sandbox
    )
    assert method.tests[0].frozen_outcome().error_type == "KeyError"
    assert check_method(method, sandbox) == []


def test_a_random_looking_method_seeded_by_the_sandbox_validates(sandbox: Sandbox) -> None:
    method = freeze_method(make(SEEDED_RANDOM, ("(4,)", "(4,)", "(6,)", "(1,)")), sandbox)
    first, second = method.examples
    assert first.outcome == second.outcome  # the same input gives the same "random" answer
    assert method.tests[0].frozen_outcome().value != first.frozen_outcome().value
    assert check_method(method, sandbox) == []


def test_parameters_with_defaults_or_varargs_fit_a_shorter_or_longer_header(sandbox: Sandbox) -> None:
    defaults = make(["def test_func(arg0, arg1=10):", "    return arg0 + arg1"], ("(1,)", "(2,)"))
    varargs = make(
        ["def test_func(*args):", "    return len(args)"], ("(1, 2, 3)", "(4, 5, 6)"), params=["arg0", "arg1", "arg2"]
    )
    for method in (defaults, varargs):
        assert check_method(freeze_method(method, sandbox), sandbox) == [], method.source


# --- each failure ------------------------------------------------------------------------------


def test_a_source_that_does_not_compile_fails_compiles(sandbox: Sandbox) -> None:
    method = freeze_method(make(["def test_func(arg0):", "    return (arg0"]), sandbox)
    problems = check_method(method, sandbox)
    assert checks_of(problems) == ["compiles"]
    assert "'(' was never closed" in problems[0].message


def test_a_source_without_the_entry_fails_entry(sandbox: Sandbox) -> None:
    method = freeze_method(make(["def other(arg0):", "    return arg0"]), sandbox)
    problems = check_method(method, sandbox)
    assert set(checks_of(problems)) == {"entry"}
    assert any("no top-level function 'test_func'" in p.message for p in problems)


def test_a_name_error_inside_the_method_is_not_a_missing_entry(sandbox: Sandbox) -> None:
    source = ["def f(arg0):", "    if arg0:", "        return foo", "    return 0"]
    method = freeze_method(make(source, ("(0,)", "(1,)"), entry="f"), sandbox)
    assert method.examples[1].frozen_outcome().shown() == "raises NameError: name 'foo' is not defined"
    assert check_method(method, sandbox) == []


def test_a_header_with_more_parameters_than_the_source_takes_fails_arity(sandbox: Sandbox) -> None:
    method = freeze_method(make(DOUBLE, ("(1, 2)", "(3, 4)"), params=["arg0", "arg1"]), sandbox)
    problems = check_method(method, sandbox)
    assert checks_of(problems) == ["arity"]
    assert problems[0].message == "the header has 2 parameters, the source's test_func takes 1..1"


def test_a_header_with_fewer_parameters_than_required_fails_arity(sandbox: Sandbox) -> None:
    source = ["def test_func(arg0, arg1):", "    return arg0"]
    method = freeze_method(make(source, ("(1,)", "(2,)"), params=["arg0"]), sandbox)
    assert checks_of(check_method(method, sandbox)) == ["arity"]


def test_an_input_that_is_not_a_literal_fails_runs(sandbox: Sandbox) -> None:
    method = freeze_method(make(inputs=("(1,)", "(2,)", "(len('x'),)")), sandbox)
    problems = check_method(method, sandbox)
    assert checks_of(problems) == ["runs"]
    assert problems[0].message.startswith("input (len('x'),) ended with invalid_input")


def test_an_input_that_times_out_fails_runs(sandbox: Sandbox) -> None:
    source = ["def test_func(arg0):", "    while arg0:", "        pass", "    return arg0"]
    limits = Limits(timeout_s=0.05)
    method = freeze_method(make(source, ("(0,)", "(False,)", "(1,)")), sandbox, limits)
    problems = check_method(method, sandbox, limits)
    assert checks_of(problems) == ["runs"]
    assert "input (1,) ended with timeout" in problems[0].message


def test_an_unfrozen_input_fails_frozen(sandbox: Sandbox) -> None:
    method = freeze_method(make(), sandbox)
    method = method.model_copy(update={"tests": [*method.tests, Case(input="(9,)")]})
    problems = check_method(method, sandbox)
    assert checks_of(problems) == ["frozen"]
    assert "input (9,) has no frozen outcome" in problems[0].message


def test_an_outcome_edited_by_hand_fails_reproduces(sandbox: Sandbox) -> None:
    method = with_outcome(freeze_method(make(), sandbox), 0, value="'aaa'", encoded="aaa")
    problems = check_method(method, sandbox)
    assert checks_of(problems) == ["reproduces"]
    assert problems[0].message == "input ('a',) was frozen as \"'aaa'\" but gives \"'aa'\""


def test_reproducing_is_exact_not_just_equal(sandbox: Sandbox) -> None:
    method = freeze_method(make(inputs=("(1,)", "(2,)", "(3,)", "(None,)")), sandbox)
    as_float = with_outcome(
        method, 0, value="6.0", value_type="float", encoded=6.0
    )  # 6.0 == 6, but it is not what runs
    assert checks_of(check_method(as_float, sandbox)) == ["reproduces"]
    other_message = with_outcome(method, 1, error_message="something else")
    assert checks_of(check_method(other_message, sandbox)) == ["reproduces"]


@pytest.mark.parametrize(
    "source", [COUNTER_ON_BUILTINS, TOTAL_IN_A_GUEST_FRAME], ids=["print.__self__", "traceback f_globals"]
)
def test_a_method_whose_batch_outcomes_depend_on_earlier_inputs_fails_reproduces(
    sandbox: Sandbox, source: list[str]
) -> None:
    method = freeze_method(make(source, ("(1,)", "(2,)", "(3,)", "(4,)")), sandbox)
    batch = [case.frozen_outcome().value for case in (*method.examples, *method.tests)]
    alone = [sandbox.call(method.source, case.input).value for case in (*method.examples, *method.tests)]
    assert batch != alone, "the batch no longer leaks state; pick another route for this test"
    problems = check_method(method, sandbox)
    assert set(checks_of(problems)) == {"reproduces"}
    assert len(problems) == 3  # every input but the first saw state left by earlier ones
    assert not any("input (1,)" in p.message for p in problems)


def test_an_empty_description_fails_description(sandbox: Sandbox) -> None:
    method = freeze_method(make(), sandbox).model_copy(update={"description": "  "})  # the model refuses this on load
    assert checks_of(check_method(method, sandbox)) == ["description"]


def test_a_method_without_inputs_fails_inputs(sandbox: Sandbox) -> None:
    assert checks_of(check_method(make(inputs=()), sandbox)) == ["inputs"]


# --- anonymity -----------------------------------------------------------------------------------


def anonymous(method: Method, original: str) -> Method:
    return method.model_copy(update={"provenance": method.provenance.model_copy(update={"original_name": original})})


@pytest.mark.parametrize(
    ("where", "changes"),
    [
        ("id", {"id": "demo/double_it"}),
        ("example input", {"inputs": ("('double_it',)", "(2,)", "(3,)")}),
        ("example output", {"source": ["def test_func(arg0):", "    return 'DOUBLE_IT' * arg0"]}),
        ("header", {"entry": "double_it", "source": ["def double_it(arg0):", "    return arg0 * 2"]}),
    ],
)
def test_revealing_the_original_name_fails_anonymous(sandbox: Sandbox, where: str, changes: dict[str, Any]) -> None:
    method = anonymous(freeze_method(make(**changes), sandbox), "double_it")
    problems = check_method(method, sandbox)
    assert checks_of(problems) == ["anonymous"], where
    assert "reveals the original name 'double_it'" in problems[0].message


def test_the_original_name_may_appear_where_agents_never_look(sandbox: Sandbox) -> None:
    source = ["def test_func(arg0):", "    double_it = arg0 * 2", "    return double_it"]
    method = anonymous(freeze_method(make(source, ("(1,)", "(2,)", "('double_it',)")), sandbox), "double_it")
    assert check_method(method, sandbox) == []


def test_a_generic_or_very_short_original_name_is_not_a_revelation(sandbox: Sandbox) -> None:
    method = freeze_method(make(id="demo/fx"), sandbox)
    assert check_method(anonymous(method, "fx"), sandbox) == []
    assert check_method(anonymous(method, "test_func"), sandbox) == []


# --- many at once ----------------------------------------------------------------------------------


def test_checking_many_gives_problems_by_id_in_order(sandbox: Sandbox) -> None:
    good = freeze_method(make(id="demo/good"), sandbox)
    bad = freeze_method(make(id="demo/bad", source=["def test_func(arg0):", "    return (arg0"]), sandbox)
    seen: list[str] = []
    results = check_methods([good, bad], sandbox, progress=lambda m: seen.append(m.id))
    assert list(results) == seen == ["demo/good", "demo/bad"]
    assert results["demo/good"] == [] and checks_of(results["demo/bad"]) == ["compiles"]
    assert str(results["demo/bad"][0]).startswith("demo/bad: [compiles] the source does not compile")


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def test_func(a, b):\n    pass\n", (2, 2)),
        ("def test_func(a, b=1, c=2):\n    pass\n", (1, 3)),
        ("def test_func(a, /, b, *, c=1):\n    pass\n", (2, 2)),
        ("def test_func(a, *rest):\n    pass\n", (1, 10**6)),
        ("async def test_func():\n    pass\n", (0, 0)),
        ("def test_func(:\n", None),
    ],
)
def test_source_arity_counts_positional_parameters(source: str, expected: tuple[int, int] | None) -> None:
    assert source_arity(source, "test_func") == expected


def test_source_arity_ignores_nested_functions() -> None:
    with pytest.raises(ValueError, match="no top-level function 'test_func'"):
        source_arity("class A:\n    def test_func(self):\n        pass\n", "test_func")


def test_a_frozen_outcome_equals_its_sandbox_outcome_frozen_again(sandbox: Sandbox) -> None:
    outcome = sandbox.call("def test_func(a):\n    return {1: (a,)}\n", "(2,)")
    assert FrozenOutcome.of(FrozenOutcome.of(outcome).outcome()) == FrozenOutcome.of(outcome)
