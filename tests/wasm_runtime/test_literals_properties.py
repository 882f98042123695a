"""Properties of argument parsing over generated input: literals round trip, and anything else is InvalidInput."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from wasm_runtime.literals import MAX_INT_DIGITS, MAX_LITERAL_CHARS, MAX_NESTING, InvalidInput, parse_arguments

FAST = settings(max_examples=60, deadline=None)

# Every character, lone surrogates included.
any_char = st.characters(codec=None, categories=None)
hashable_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.complex_numbers(allow_nan=False, allow_infinity=False)
    | st.text(any_char, max_size=8)
    | st.binary(max_size=8)
)
hashables = st.recursive(hashable_scalars, lambda inner: st.tuples(inner) | st.tuples(inner, inner), max_leaves=6)
literal_values = st.recursive(
    hashable_scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(hashables, inner, max_size=4)
        | st.sets(hashables, max_size=4)
    ),
    max_leaves=20,
)


def same(a: Any, b: Any) -> bool:
    """Equal with the same types all the way down (floats by repr, so -0.0 is not 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return repr(a) == repr(b)
    if isinstance(a, complex):
        return bool(a == b)  # `(1-0j)` reads back as 1 - 0j, whose zero has lost its sign: Python's own rule
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def one_line_invalid(text: str) -> InvalidInput:
    try:
        parse_arguments(text)
    except InvalidInput as exc:
        message = str(exc)
        assert message and "\n" not in message
        return exc
    raise AssertionError(f"{text!r} was accepted")


@FAST
@given(st.lists(literal_values, max_size=4).map(tuple))
def test_the_repr_of_any_argument_tuple_parses_back_to_it(args: tuple[Any, ...]) -> None:
    text = repr(args)
    assume(len(text) <= MAX_LITERAL_CHARS)
    assert same(parse_arguments(text), args)


@FAST
@given(literal_values.filter(lambda v: type(v) is not tuple))
def test_a_single_literal_that_is_not_a_tuple_is_one_argument(value: object) -> None:
    assert same(parse_arguments(repr(value)), (value,))


@FAST
@given(st.text(any_char, max_size=200))
def test_any_text_gives_arguments_or_invalid_input_with_a_one_line_message(text: str) -> None:
    try:
        result = parse_arguments(text)
    except InvalidInput as exc:
        assert str(exc) and "\n" not in str(exc)
    else:
        assert type(result) is tuple


TOKENS = ["(", ")", "[", "]", "{", "}", ",", ":", "1", "-", "+", "j", "1e999", "0x", "ff", "'a'", "b'x'", "'\\ud800'",
          "\ud800", "None", "True", "set()", "f(", "lambda", "*", "**", "1_0", ".5", "'''", "\\", "\n", " ", "#", "\x00",
          "not", "if", "else", "await", "yield", ":=", "...", "...."]  # fmt: skip


@FAST
@given(st.lists(st.sampled_from(TOKENS), max_size=30).map("".join))
def test_token_soup_gives_arguments_or_invalid_input_never_another_error(text: str) -> None:
    try:
        parse_arguments(text)
    except InvalidInput as exc:
        assert str(exc) and "\n" not in str(exc)


@FAST
@given(
    st.integers(min_value=MAX_NESTING + 1, max_value=190), st.sampled_from(["[{}]", "({},)", "{{1: {}}}", "{{{},}}"])
)
def test_nesting_past_the_limit_is_refused_with_the_limit_in_the_message(depth: int, container: str) -> None:
    text = "1"
    for level in range(depth):
        text = (container if level else "[{}]").format(text)  # the innermost is a list: sets take hashables only
    assert f"nested more than {MAX_NESTING}" in str(one_line_invalid(text))


@FAST
@given(st.integers(min_value=190, max_value=20_000), st.sampled_from("([{-"))
def test_nesting_far_past_the_limit_is_refused_without_a_raw_error(depth: int, opening: str) -> None:
    one_line_invalid(opening * depth + "1")
    one_line_invalid(opening * depth)


@FAST
@given(
    st.integers(min_value=MAX_INT_DIGITS + 1, max_value=MAX_INT_DIGITS + 2000),
    st.sampled_from(["{}", "-{}", "({},)", "0x{:x}", "-0o{:o}", "[0b{:b}]", "{{1: {}}}"]),
)
def test_an_int_over_4300_digits_is_refused_in_any_notation(digits: int, form: str) -> None:
    # Built as text: this process cannot turn such an int into decimal text either.
    value = 10 ** (digits - 1) + 7
    text = form.format("1" + "0" * (digits - 2) + "7") if "{}" in form else form.format(value)
    assert f"more than {MAX_INT_DIGITS} digits" in str(one_line_invalid(text))


def test_an_int_of_exactly_4300_digits_is_accepted() -> None:
    largest = 10**MAX_INT_DIGITS - 1
    assert parse_arguments(str(largest)) == (largest,)
    assert parse_arguments(hex(-largest)) == (-largest,)


@FAST
@given(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), st.text(max_size=5))
def test_a_lone_surrogate_character_is_refused_and_its_escape_accepted(char: str, rest: str) -> None:
    message = str(one_line_invalid(f"('{rest}{char}',)"))
    assert "lone surrogate" in message and f"U+{ord(char):04X}" in message
    escaped = f"('\\u{ord(char):04x}',)"
    assert parse_arguments(escaped) == (char,)


@FAST
@given(st.integers(min_value=MAX_LITERAL_CHARS + 1, max_value=MAX_LITERAL_CHARS + 5000))
def test_text_over_the_size_limit_is_refused_before_parsing(size: int) -> None:
    assert f"limit is {MAX_LITERAL_CHARS}" in str(one_line_invalid("[" + "1," * ((size - 2) // 2) + "1]"))


@FAST
@given(st.floats(allow_nan=False))
def test_floats_read_back_exactly_and_overflowing_literals_are_infinite(number: float) -> None:
    if math.isinf(number):
        assert parse_arguments("1e999" if number > 0 else "-1e999") == (number,)
    else:
        assert repr(parse_arguments(repr(number))[0]) == repr(number)
