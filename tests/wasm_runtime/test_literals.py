"""Arguments are literals, parsed on the host with size and nesting limits."""

from __future__ import annotations

import pytest

from wasm_runtime.literals import MAX_LITERAL_CHARS, InvalidInput, parse_arguments


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("(1, 'a')", (1, "a")),
        ("()", ()),
        ("5", (5,)),
        ("[1, 2]", ([1, 2],)),
        ("([1, 2],)", ([1, 2],)),
        ("{'k': (1,)}", ({"k": (1,)},)),
        ("set()", (set(),)),
        ("(b'x', 1+2j, -3.5, None, True)", (b"x", 1 + 2j, -3.5, None, True)),
        ("  (1,)  ", (1,)),
    ],
)
def test_a_tuple_is_the_argument_list_and_anything_else_one_argument(text: str, args: tuple[object, ...]) -> None:
    assert parse_arguments(text) == args


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("(f(1),)", "`f(1)` is a call"),
        ("__import__('os').system('ls')", "is a call"),
        ("(x,)", "`x` is a name"),
        ("lambda: 1", "lambda"),
        ("(1+2,)", "operator"),
        ("[i for i in range(3)]", "comprehension"),
        ("(1,", "not valid Python"),
        ("", "empty"),
    ],
)
def test_non_literals_are_refused_with_a_message_that_says_literals_only(text: str, says: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_arguments(text)
    assert says in str(info.value)
    assert "literal" in str(info.value)


def test_too_long_input_is_refused() -> None:
    with pytest.raises(InvalidInput, match="limit is"):
        parse_arguments("'" + "a" * MAX_LITERAL_CHARS + "'")


def test_nesting_beyond_one_hundred_levels_is_refused() -> None:
    parse_arguments("[" * 90 + "]" * 90)
    with pytest.raises(InvalidInput, match="nested more than 100"):
        parse_arguments("[" * 150 + "]" * 150)


def test_non_text_input_is_refused() -> None:
    with pytest.raises(InvalidInput):
        parse_arguments(b"(1,)")  # type: ignore[arg-type]
