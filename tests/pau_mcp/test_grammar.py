"""The paper loop's reply grammar, shared by the harness's paper agent and the RL environment: inputs read as written,
reflections read at their markers, and a megabyte of the worst a model can write read in linear time."""

from __future__ import annotations

import pytest

from pau_mcp.grammar import MAX_READ_CHARS, read_input, read_reflection, visible_text
from pau_mcp.harness.agents import written_tool_calls
from pau_mcp.llm.replies import split_thinking
from pau_mcp.rl import parse_input, parse_reflection

FENCE = "```"


@pytest.mark.parametrize(
    ("reply", "arity", "expected"),
    [
        ("INPUT: (1, 'a')", 2, "(1, 'a')"),
        ("Sure.\n**Input:** `(3,)`", 1, "(3,)"),
        ("- INPUT: test_func(1, 2)", 2, "(1, 2)"),
        ("INPUT: `(3,)` to see what a larger one gives", 1, "(3,)"),
        ("INPUT: test_func(1, 'x)') to see the bracket in a string", 2, "(1, 'x)')"),
        ("INPUT: 5", 1, "(5,)"),
        ("INPUT: (1,)\nOn second thought:\nINPUT: (2,)", 1, "(2,)"),  # the last marker is the model's last word
        (f"INPUT:\n{FENCE}python\n(1, [2, 3])\n{FENCE}", 2, "(1, [2, 3])"),  # the literal in the fence after it
        (f"INPUT:\n\n{FENCE}\n([1, 2,\n  3], 'a')\n{FENCE}", 2, "([1, 2, 3], 'a')"),  # written over lines: one line
        ("INPUT:\n(7, 8)", 2, "(7, 8)"),
        (f"{FENCE}\nINPUT: (4, 5)\n{FENCE}", 2, "(4, 5)"),
        (f"I will test a pair based on the input:\n{FENCE}python\n(1, 2)\n{FENCE}", 2, "(1, 2)"),
        ("Let me see:\n`test_func(5)`", 1, "(5,)"),
        ("I will try four.\n(4,)", 1, "(4,)"),
        ("<think>INPUT: (666,) is silly</think>\nINPUT: (1,)", 1, "(1,)"),
        ("thoughts the template opened (7,) ...</think>\nINPUT: (2,)", 1, "(2,)"),
        ("INPUT: hello there", 2, "hello there"),  # as written: the server says what is wrong, spending nothing
        ("INPUT: (1, 2)", 1, "(1, 2)"),  # two values for one parameter: as written, for the rules to refuse
        ("INPUT: ((1, 2),)", 1, "((1, 2),)"),
    ],
)
def test_an_input_is_read_as_written(reply: str, arity: int, expected: str) -> None:
    assert read_input(reply, arity) == expected
    assert parse_input(reply, arity) == expected  # the RL environment reads the same


@pytest.mark.parametrize(
    "reply",
    [
        "I think the function doubles its input: let me check.",
        "INPUT:",
        "My next test will use the input:\nsomething larger than before",
        "<think>INPUT: (9,)</think>",
        "<think>cut off by the token limit INPUT: (9,)",
        "The result (it was 4) suggests doubling.",
    ],
)
def test_a_reply_without_an_input_gives_none(reply: str) -> None:
    assert read_input(reply, 2) is None


def test_prose_that_ends_in_input_colon_is_not_a_marker() -> None:
    reply = f"Based on the input:\n{FENCE}python\n(3, 4)\n{FENCE}\nthat should show the sign."
    assert read_input(reply, 2) == "(3, 4)"  # not the word "python"


def test_without_an_arity_any_parenthesised_literal_is_the_arguments() -> None:
    assert read_input("(5)") == "(5)"
    assert read_input("plain 5") is None


@pytest.mark.parametrize(
    ("reply", "concluded", "hypothesis", "clean"),
    [
        ("CONCLUDED: YES\nHYPOTHESIS: doubles its argument", True, "doubles its argument", True),
        ("HYPOTHESIS: sorts a list\nin place\nCONCLUDED: no", False, "sorts a list\nin place", True),
        ("**Hypothesis:** returns 'Hello'\n**CONCLUDED:** **YES**", True, "returns 'Hello'", True),
        ("It probably sorts.", False, "It probably sorts.", False),
        ("I have not CONCLUDED: YES yet.\nHYPOTHESIS: adds one", False, "adds one", False),
    ],
)
def test_a_reflection_is_read_at_its_markers(reply: str, concluded: bool, hypothesis: str, clean: bool) -> None:
    for read in (read_reflection(reply), parse_reflection(reply)):
        assert (read.concluded, read.hypothesis, read.clean) == (concluded, hypothesis, clean)


MEGABYTE = 1024 * 1024

WORST = {
    "unclosed think tags": "<think>" * (MEGABYTE // 7),
    "lone end tags": "</think>" * (MEGABYTE // 8),
    "newlines": "\n" * MEGABYTE,
    # Blank lines between text: the reflection pattern that let a line's start run over the next lines took 17 s
    # on 40 KB of these (quadratic), and the thinking pattern 15 s on 56 KB of unclosed tags.
    "blank lines between text": "a" + "\n " * (MEGABYTE // 2) + "a",
    "decoration without a marker": "*" * MEGABYTE,
    "empty input markers": "INPUT:\n" * (MEGABYTE // 7),
    "an input marker before an unclosed fence": "INPUT:\n```\n" + "x\n" * (MEGABYTE // 2),
    "open brackets": "INPUT: " + "(" * MEGABYTE,
    "an unclosed string in a group": "INPUT: (" + "'\\" * (MEGABYTE // 2),
    "closing brackets after prose": "INPUT: (1,) " + "x)" * (MEGABYTE // 2),
    "decisions and hypotheses": "CONCLUDED:\nHYPOTHESIS:\n" * (MEGABYTE // 23),
    "one long line": "INPUT: " + "1, " * (MEGABYTE // 3),
    "tool call tags": "<tool_call>" * (MEGABYTE // 11),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(WORST))
def test_a_megabyte_of_the_worst_a_model_can_write_is_read_in_linear_time(name: str) -> None:
    text = WORST[name]
    # Each reading either finds nothing or what the capped tail holds; quadratic reading would take hours here.
    for arity in (1, 2, None):
        found = read_input(text, arity)
        assert found is None or len(found) <= MAX_READ_CHARS
    read_reflection(text)
    assert len(visible_text(text)) <= len(text)
    split_thinking(text)
    written_tool_calls(text)
    written_tool_calls(text[: 60 * 1024])  # under the tool agent's cap, searched
