"""The changes variants are made of: each kind rewrites the source as it says, leaves the validator alone, and the
result runs in the sandbox."""

from __future__ import annotations

import random

import pytest

from pau_mcp.creation import KINDS, Candidate, candidates
from pau_mcp.manifests import Case, Method, Provenance, Tags
from pau_mcp.manifests.checks import freeze_method
from wasm_runtime import Sandbox

SOURCE = (
    "def validate_input_args(arg0, arg1):\n    if arg0 < 0:\n        raise ValueError('negative')\n\n"
    "def test_func(arg0, arg1):\n    validate_input_args(arg0, arg1)\n    if arg0 > 2:\n        return arg0 * 10 + arg1\n"
    "    return arg0 - arg1\n"
)
INPUTS = ["(1, 2)", "(5, 1)", "(0, 0)", "(3, 4)", "(7, 7)", "(2, 9)"]


def method(
    sandbox: Sandbox, source: str = SOURCE, inputs: list[str] = INPUTS, name: str = "m", arity: int = 2
) -> Method:
    params = [f"arg{i}" for i in range(arity)]
    made = Method(
        id=f"s/{name}", header=f"def test_func({', '.join(params)}):", params=params, source=source,
        description="gold", examples=[Case(input=i) for i in inputs[:2]], tests=[Case(input=i) for i in inputs[2:]],
        provenance=Provenance(dataset="t"), tags=Tags(arity=arity),
    )  # fmt: skip
    return freeze_method(made, sandbox)


def of_kind(sandbox: Sandbox, kind: str, suite: list[Method] | None = None) -> tuple[Method, list[Candidate]]:
    original = method(sandbox)
    found, total = candidates(original, suite or [original], [kind], random.Random(0), 100)
    assert len(found) == total
    return original, found


def test_constants_move_by_one_outside_the_validator(sandbox: Sandbox) -> None:
    _, found = of_kind(sandbox, "constant")
    assert sorted(c.change for c in found) == ["constant 10 -> 11 (line 8)", "constant 2 -> 3 (line 7)"]
    assert all("if arg0 < 0:" in c.source for c in found)  # the validator's 0 is left alone


def test_comparisons_and_operators_change_one_at_a_time(sandbox: Sandbox) -> None:
    _, comparisons = of_kind(sandbox, "comparison")
    assert [c.change for c in comparisons] == ["comparison > -> >= (line 7)"]
    assert "if arg0 >= 2:" in comparisons[0].source
    _, operators = of_kind(sandbox, "arithmetic")
    assert sorted(c.change for c in operators) == [
        "arithmetic * -> + (line 8)", "arithmetic + -> - (line 8)", "arithmetic - -> + (line 9)",
    ]  # fmt: skip


def test_argument_order_swaps_the_parameters_everywhere(sandbox: Sandbox) -> None:
    original, (swapped,) = of_kind(sandbox, "argument-order")
    assert swapped.change == "argument order: arg0 and arg1 trade places"
    outcomes = sandbox.run(swapped.source, ["(2, 5)"])
    assert outcomes[0].value == sandbox.run(original.source, ["(5, 2)"])[0].value


def test_an_edge_case_returns_another_output_above_the_median(sandbox: Sandbox) -> None:
    original, found = of_kind(sandbox, "edge-case")
    assert {c.change.split(" when ")[1] for c in found} == {"arg0 > 2", "arg1 > 2"}
    for candidate in found:
        before = [o.value for o in sandbox.run(original.source, INPUTS)]
        after = [o.value for o in sandbox.run(candidate.source, INPUTS)]
        assert before != after and "validate_input_args(arg0, arg1)\n    if" in candidate.source


def test_composition_applies_another_one_argument_method_to_the_result(sandbox: Sandbox) -> None:
    other = method(
        sandbox,
        "def helper(x):\n    return x\n\ndef test_func(arg0):\n    return helper(arg0) * -1\n",
        ["(1,)", "(2,)", "(3,)"],
        "n",
        1,
    )
    original, (composed,) = of_kind(sandbox, "composition", [method(sandbox), other])
    assert composed.change == "composition: s/n applied to the result"
    got = sandbox.run(composed.source, ["(5, 1)", "(1, 2)"])
    assert [o.value for o in got] == ["-51", "1"]


def test_an_unknown_kind_is_an_error_naming_the_kinds(sandbox: Sandbox) -> None:
    with pytest.raises(ValueError, match="choose among constant, comparison"):
        candidates(method(sandbox), [], ["typo"], random.Random(0), 5)


def test_kinds_take_turns_and_tries_cut_the_list(sandbox: Sandbox) -> None:
    found, total = candidates(method(sandbox), [], list(KINDS), random.Random(3), 4)
    assert total > 4 and len(found) == 4
    assert len({c.kind for c in found}) == 4  # one of each kind before a second of any
