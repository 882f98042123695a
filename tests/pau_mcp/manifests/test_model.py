"""The manifest model: one pydantic object per hidden method, validated where it is read.

Each test builds a method from a plain dict (what a file holds) and checks
what a user relies on: the fields exist, bad values are refused with the
field named, and what agents may see carries nothing hidden.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import pytest
from pydantic import ValidationError

from pau_mcp.manifests import Case, FrozenOutcome, Method, SuiteInfo, call_text, tool_name
from wasm_runtime import Outcome, Status


def method_data(**changes: Any) -> dict[str, Any]:
    """A complete, valid method as a file would hold it; ``changes`` replace top-level fields."""
    data: dict[str, Any] = {
        "id": "demo/add_them",
        "header": "def test_func(arg0, arg1):",
        "params": ["arg0", "arg1"],
        "entry": "test_func",
        "source": ["def test_func(arg0, arg1):", "    secret_marker = 1", "    return arg0 + arg1"],
        "description": "Adds its two arguments.",
        "examples": [
            {"input": "(1, 2)", "outcome": {"status": "ok", "value": "3", "value_type": "int", "encoded": 3}},
            {"input": "('a', 1)", "outcome": {"status": "error", "error_type": "TypeError", "error_message": "bad"}},
        ],
        "tests": [{"input": "(40, 2)", "outcome": {"status": "ok", "value": "42", "value_type": "int", "encoded": 42}}],
        "provenance": {"dataset": "demo set", "original_id": "D/7", "original_name": "add_numbers", "license": "MIT"},
        "tags": {"arity": 2, "value_types": ["int"], "difficulty": "easy", "hidden_behaviour": []},
    }
    data.update(changes)
    return data


def error_text(data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as info:
        Method.model_validate(data)
    return str(info.value)


# --- what a method holds ------------------------------------------------------------------


def test_a_method_holds_every_part_the_issue_names() -> None:
    method = Method.model_validate(method_data())
    assert method.id == "demo/add_them" and method.suite == "demo" and method.name == "add_them"
    assert method.header == "def test_func(arg0, arg1):" and method.params == ["arg0", "arg1"]
    assert method.entry == "test_func" and "return arg0 + arg1" in method.source
    assert method.description == "Adds its two arguments."
    assert [c.input for c in method.examples] == ["(1, 2)", "('a', 1)"]
    assert method.examples[0].outcome == FrozenOutcome(status=Status.OK, value="3", value_type="int", encoded=3)
    assert [c.input for c in method.tests] == ["(40, 2)"]
    assert (method.provenance.dataset, method.provenance.original_id, method.provenance.license) == (
        "demo set",
        "D/7",
        "MIT",
    )
    assert method.tags.arity == 2 and method.tags.value_types == ["int"] and method.tags.difficulty == "easy"


def test_source_written_as_lines_is_one_string_in_memory() -> None:
    method = Method.model_validate(method_data())
    assert method.source == "def test_func(arg0, arg1):\n    secret_marker = 1\n    return arg0 + arg1\n"
    compile(method.source, "<test>", "exec")


def test_source_may_also_be_written_as_one_string() -> None:
    method = Method.model_validate(method_data(source="def test_func(arg0, arg1):\n    return arg0\n"))
    assert method.source == "def test_func(arg0, arg1):\n    return arg0\n"


def test_the_entry_defaults_to_test_func() -> None:
    data = method_data()
    del data["entry"]
    assert Method.model_validate(data).entry == "test_func"


def test_examples_and_tests_may_be_left_unfrozen() -> None:
    method = Method.model_validate(method_data(examples=[{"input": "(1, 2)"}], tests=[{"input": "(3, 4)"}]))
    assert method.examples[0].outcome is None
    assert not method.frozen
    assert Method.model_validate(method_data()).frozen


def test_a_method_is_immutable() -> None:
    method = Method.model_validate(method_data())
    with pytest.raises(ValidationError):
        method.description = "something else"  # type: ignore[misc]


def test_the_description_is_stripped() -> None:
    assert Method.model_validate(method_data(description="  Adds.\n")).description == "Adds."


# --- refusals, each naming the field --------------------------------------------------------


def test_a_missing_field_is_named() -> None:
    data = method_data()
    del data["description"]
    text = error_text(data)
    assert "description" in text and "Field required" in text


def test_a_misspelt_field_is_refused_rather_than_ignored() -> None:
    text = error_text(method_data(descripton="typo"))
    assert "descripton" in text and "Extra inputs are not permitted" in text


def test_a_wrong_type_is_named() -> None:
    text = error_text(method_data(params="arg0, arg1"))
    assert "params" in text and "valid list" in text


def test_an_empty_or_blank_description_is_refused() -> None:
    assert "description" in error_text(method_data(description=""))
    assert "must not be empty" in error_text(method_data(description="   \n"))


@pytest.mark.parametrize("bad_id", ["add_them", "Demo/add", "demo/", "/add", "demo/a b", "demo/add/more"])
def test_an_id_must_be_suite_slash_name(bad_id: str) -> None:
    text = error_text(method_data(id=bad_id))
    assert "id" in text and "suite/name" in text


def test_a_header_that_is_not_a_def_line_is_refused() -> None:
    text = error_text(method_data(header="test_func(arg0, arg1)"))
    assert "header must look like" in text


def test_header_and_params_must_agree() -> None:
    text = error_text(method_data(header="def test_func(arg0, argX):"))
    assert "header parameters ['arg0', 'argX'] differ from params ['arg0', 'arg1']" in text


def test_the_header_must_name_the_entry() -> None:
    text = error_text(method_data(header="def add(arg0, arg1):"))
    assert "header names 'add' but entry is 'test_func'" in text


def test_tags_arity_must_count_the_params() -> None:
    text = error_text(method_data(tags={"arity": 3}))
    assert "tags.arity is 3 but there are 2 parameters" in text


def test_a_nested_bad_value_is_named_by_its_path() -> None:
    data = method_data()
    data["tests"] = [{"input": "(1, 2)", "outcome": {"status": "finished"}}]
    text = error_text(data)
    assert "tests.0.outcome.status" in text


def test_an_empty_input_is_refused() -> None:
    assert "input" in error_text(method_data(tests=[{"input": ""}]))


def test_difficulty_takes_three_levels() -> None:
    assert "difficulty" in error_text(method_data(tags={"arity": 2, "difficulty": "trivial"}))


def test_provenance_needs_a_dataset() -> None:
    assert "provenance.dataset" in error_text(method_data(provenance={"original_id": "x"}))


def test_a_method_without_parameters_is_allowed() -> None:
    method = Method.model_validate(
        method_data(
            header="def test_func():", params=[], source=["def test_func():", "    return 1"], tags={"arity": 0}
        )
    )
    assert method.params == [] and method.tags.arity == 0


# --- what agents may see ---------------------------------------------------------------------


KEY = "a-deployment-key-for-tests"


def test_the_agent_view_holds_only_tool_header_and_examples() -> None:
    method = Method.model_validate(method_data())
    view = method.agent_view(KEY)
    assert set(view) == {"tool", "header", "examples"} and view["tool"] == tool_name(KEY, method.id)
    assert view["examples"] == [
        {"input": "(1, 2)", "output": "3"},
        {"input": "('a', 1)", "output": "raises TypeError: bad"},
    ]
    text = repr(view)
    for hidden in ("secret_marker", "Adds its two", "(40, 2)", "add_numbers", "demo set", "demo/add_them"):
        assert hidden not in text


def test_the_tool_name_is_keyed_stable_opaque_and_distinct() -> None:
    name = tool_name(KEY, "demo/add_them")
    assert re.fullmatch(r"fn_[0-9a-f]{10}", name)
    assert name == tool_name(KEY, "demo/add_them")
    assert tool_name(KEY, "demo/add_them2") != name
    assert tool_name("another-deployment-key", "demo/add_them") != name
    assert name != "fn_" + hashlib.sha256(b"demo/add_them").hexdigest()[:10]  # an id alone does not give it
    assert "add_them" not in name and "demo" not in name


def test_an_unfrozen_example_shows_no_output() -> None:
    method = Method.model_validate(method_data(examples=[{"input": "(1, 2)"}]))
    assert method.agent_view(KEY)["examples"] == [{"input": "(1, 2)", "output": None}]


@pytest.mark.parametrize(
    ("literal", "shown"),
    [
        ("(1, 'a')", "test_func(1, 'a')"),
        ("([1, 2],)", "test_func([1, 2])"),
        ("[1, 2]", "test_func([1, 2])"),
        ("()", "test_func()"),
        ("  (1,  (2, 3))  ", "test_func(1, (2, 3))"),
        ("not python(", "test_func(not python()"),
    ],
)
def test_a_call_reads_like_python(literal: str, shown: str) -> None:
    assert call_text("test_func", literal) == shown


# --- frozen outcomes ----------------------------------------------------------------------------


def test_a_frozen_outcome_keeps_what_the_sandbox_returned_but_not_timing() -> None:
    outcome = Outcome(
        status=Status.OK,
        value="(1, 2)",
        value_type="tuple",
        encoded={"tuple": [1, 2]},
        stdout="hi",
        duration_ms=3.0,
        fuel=99,
    )
    frozen = FrozenOutcome.of(outcome)
    assert frozen.model_dump(exclude_none=True) == {
        "status": "ok", "value": "(1, 2)", "value_type": "tuple", "encoded": {"tuple": [1, 2]}
    }  # fmt: skip
    again = frozen.outcome()
    assert again.status is Status.OK and again.decoded() == (1, 2) and type(again.decoded()) is tuple
    assert again.duration_ms == 0.0 and again.stdout == ""


@pytest.mark.parametrize(
    ("fields", "shown"),
    [
        ({"status": "ok", "value": "[1]"}, "[1]"),
        ({"status": "error", "error_type": "KeyError", "error_message": "'x'"}, "raises KeyError: 'x'"),
        ({"status": "error", "error_type": "StopIteration"}, "raises StopIteration"),
        (
            {"status": "timeout", "error_message": "the function used up its CPU budget"},
            "timeout: the function used up its CPU budget",
        ),
    ],
)
def test_an_outcome_reads_as_its_value_or_its_exception(fields: dict[str, Any], shown: str) -> None:
    assert FrozenOutcome(**fields).shown() == shown


def test_a_case_refuses_an_unknown_status() -> None:
    with pytest.raises(ValidationError):
        Case(input="(1,)", outcome={"status": "fine"})  # type: ignore[arg-type]


# --- suite.json ---------------------------------------------------------------------------------


def test_a_suite_name_is_lower_case() -> None:
    assert SuiteInfo(name="my-suite.v2").name == "my-suite.v2"
    with pytest.raises(ValidationError, match="suite names use lower-case"):
        SuiteInfo(name="My Suite")


def test_suite_info_refuses_unknown_fields() -> None:
    with pytest.raises(ValidationError, match="Extra inputs"):
        SuiteInfo.model_validate({"name": "x", "licence": "MIT"})
