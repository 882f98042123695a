"""Reading a policy's replies: inputs, reflections, hidden thinking."""

from __future__ import annotations

from pau_mcp.rl import parse_input, parse_reflection, visible_text


def test_an_input_line_is_read_in_the_forms_models_write() -> None:
    assert parse_input("INPUT: (1, 'a')") == "(1, 'a')"
    assert parse_input("Sure.\n**Input:** `(3,)`") == "(3,)"
    assert parse_input("```\n(4, 5)\n```") == "(4, 5)"


def test_a_reply_without_an_input_gives_none() -> None:
    assert parse_input("I think the function doubles.") is None
    assert parse_input("INPUT:") is None


def test_thinking_is_not_part_of_the_reply() -> None:
    assert visible_text("<think>INPUT: (9,)</think>INPUT: (1,)") == "INPUT: (1,)"
    assert parse_input("long thoughts (7,) ...</think>\nINPUT: (2,)") == "(2,)"


def test_a_reflection_gives_decision_and_hypothesis_in_either_order() -> None:
    first = parse_reflection("CONCLUDED: YES\nHYPOTHESIS: doubles its argument")
    assert first.concluded and first.clean and first.hypothesis == "doubles its argument"
    second = parse_reflection("HYPOTHESIS: sorts a list\nCONCLUDED: no")
    assert not second.concluded and second.clean and second.hypothesis == "sorts a list"


def test_a_reflection_out_of_format_keeps_the_text_as_hypothesis_and_is_not_clean() -> None:
    loose = parse_reflection("It probably sorts.")
    assert not loose.clean and not loose.concluded and loose.hypothesis == "It probably sorts."
