"""Choosing examples and hidden tests: the paper's examples, tests chosen for what they exercise."""

from __future__ import annotations

import random

from pau_mcp.creation import Ran, select_cases
from wasm_runtime import Outcome, Status, encode


def ran(text: str, value: object, *units: object) -> Ran:
    outcome = Outcome(status=Status.OK, value=repr(value), value_type=type(value).__name__, encoded=encode(value))
    return Ran(text, outcome, frozenset(units))


def test_tests_take_first_the_inputs_that_reach_something_new() -> None:
    inputs = [ran(f"({i},)", i + 100, ("line", 2)) for i in range(10)]
    inputs += [ran("(50,)", "big", ("line", 3), ("branch", 2, 3)), ran("(-1,)", "neg", ("line", 4), ("branch", 2, 4))]
    chosen = select_cases(inputs, examples=2, min_tests=2, max_tests=3, rng=random.Random(0))
    assert not isinstance(chosen, str)
    assert {"(50,)", "(-1,)"} <= set(chosen.tests)  # the only inputs reaching their branches are tested, not shown
    assert len(chosen.tests) == 3 and "reach 3 of 3 lines and 2 of 2 branches" in chosen.detail


def test_examples_differ_in_output_and_never_show_the_original_name() -> None:
    inputs = [ran("('triple',)", "x"), ran("(1,)", "a"), ran("(2,)", "a"), ran("(3,)", "b"), ran("(4,)", "c")]
    for seed in range(20):
        chosen = select_cases(inputs, examples=2, min_tests=1, max_tests=10, rng=random.Random(seed), hide="triple")
        assert not isinstance(chosen, str)
        shown = {i.input: i.shown for i in inputs}
        assert "('triple',)" not in chosen.examples
        assert shown[chosen.examples[0]] != shown[chosen.examples[1]]


def test_two_identities_are_never_both_shown() -> None:
    inputs = [ran("(1,)", 1), ran("(2,)", 2), ran("(3,)", 9), ran("(4,)", 4), ran("(5,)", 5)]
    for seed in range(20):
        chosen = select_cases(inputs, examples=2, min_tests=1, max_tests=10, rng=random.Random(seed))
        assert not isinstance(chosen, str) and "(3,)" in chosen.examples


def test_too_few_distinct_outputs_or_tests_say_how_many_there_were() -> None:
    same = [ran(f"({i},)", 7) for i in range(9)]
    assert select_cases(same, examples=2, min_tests=4, max_tests=20, rng=random.Random(0)) == (
        "9 working inputs give 1 distinct outputs; 2 examples need as many"
    )
    few = [ran(f"({i},)", i * 2) for i in range(5)]
    said = select_cases(few, examples=2, min_tests=4, max_tests=20, rng=random.Random(0))
    assert said == "5 working inputs leave 3 for hidden tests after 2 examples; --min-tests is 4"
