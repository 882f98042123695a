"""Inputs drawn to look like the published ones: the same types and shapes, other values, the same on every machine."""

from __future__ import annotations

import random
import re
import subprocess
import sys

import pytest

from pau_mcp.manifests import ManifestStore
from pau_mcp.server import inputs
from pau_mcp.server.inputs import WAYS, draw_inputs, literal
from wasm_runtime import parse_arguments


def _shape(value: object) -> object:
    """A value's type structure: containers with the shapes of their items, scalars by type."""
    if isinstance(value, (list, tuple, set, frozenset)):
        return (type(value).__name__, frozenset(repr(_shape(item)) for item in value))
    if isinstance(value, dict):
        return ("dict", frozenset(repr((_shape(k), _shape(v))) for k, v in value.items()))
    return type(value).__name__


def _kinds(value: object) -> set[str]:
    """Every type name inside a value."""
    found = {type(value).__name__}
    if isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            found |= _kinds(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            found |= _kinds(key) | _kinds(item)
    return found


@pytest.mark.parametrize("way", WAYS)
def test_every_draw_is_a_literal_of_the_templates_arity_and_types(way: str) -> None:
    for method in ManifestStore().methods(["builtin"]):
        templates = [parse_arguments(case.input) for case in method.examples]
        allowed = [set().union(*(_kinds(t[i]) for t in templates)) for i in range(len(method.params))]
        for args in draw_inputs(templates, way, 20, random.Random(method.id)):
            assert parse_arguments(literal(args)) == args, (method.id, args)
            assert len(args) == len(method.params)
            for position, value in enumerate(args):
                # No new kind of value: a list of ints stays a list of ints (empty containers and None aside).
                assert _kinds(value) <= allowed[position] | {"NoneType"}, (method.id, way, args)


def test_the_same_generator_state_draws_the_same_inputs_in_every_process() -> None:
    # The module alone (it needs nothing else), loaded from its file: a fresh interpreter with its own string hashing.
    code = (
        "import importlib.util, random; "
        f"spec = importlib.util.spec_from_file_location('inputs', {inputs.__file__!r}); "
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); draw_inputs, literal = m.draw_inputs, m.literal; "
        "t = [({'mean', 'ugly', 'bad'}, 'x y z', {('a', 'b'), ('c',)}, {'k': [1.5, 2]})]; "
        "print([literal(a) for a in draw_inputs(t, 'fresh', 30, random.Random(7))])"
    )
    runs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": seed}
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(runs) == 1  # sets are written in one order whatever the string hashing


def test_a_set_is_written_with_its_items_sorted_and_reads_back_equal() -> None:
    args: tuple[object, ...] = ({"b", "a", "c"}, {(3, "x"), (1,)}, set(), (1,), [()], {1: {2}})
    text = literal(args)
    assert text == "({'a', 'b', 'c'}, {(1,), (3, 'x')}, set(), (1,), [()], {1: {2}})"
    assert parse_arguments(text) == args
    assert literal((5,)) == "(5,)" and literal(()) == "()"


def test_shaped_draws_keep_the_form_of_structured_text() -> None:
    dates = [("2024-03-10", 5), ("2023-01-15", 30)]
    colours = [("#ff8000",), ("#1A2B3C",)]
    rng = random.Random(1)
    for date, days in draw_inputs(dates, "shaped", 50, rng):
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", date) and isinstance(days, int)
    for (colour,) in draw_inputs(colours, "shaped", 50, rng):
        assert re.fullmatch(r"#[0-9a-f]{6}|#[0-9A-F]{6}", colour)


def test_fresh_draws_keep_words_sortedness_and_rows_of_one_length() -> None:
    rng = random.Random(2)
    for (text,) in draw_inputs([("the quick brown fox",), ("HELLO   WORLD",)], "fresh", 30, rng):
        assert text and all(word.isalpha() for word in text.split())
    for (numbers,) in draw_inputs([([1, 4, 9, 16],), ([2, 3, 5],)], "fresh", 30, rng):
        assert numbers == sorted(numbers)
    for (matrix,) in draw_inputs([([[1, 2], [3, 4]],), ([[1, 1, 1], [2, 2, 2], [3, 3, 3]],)], "fresh", 30, rng):
        assert len({len(row) for row in matrix}) <= 1


def test_fresh_draws_keep_a_relation_the_published_arguments_show_some_of_the_time() -> None:
    rng = random.Random(3)
    anagrams = draw_inputs([("listen", "silent"), ("apple", "paper")], "fresh", 40, rng)
    assert any(sorted(a) == sorted(b) for a, b in anagrams)
    keys = draw_inputs([({"a": 1, "b": 2}, "b"), ({"name": "Ada", "age": 36}, "name")], "fresh", 40, rng)
    assert any(key in mapping for mapping, key in keys)
    letters = draw_inputs([("banana", "a"), ("hello world", "o")], "fresh", 40, rng)
    assert any(letter in text for text, letter in letters)


def test_nearby_draws_change_every_argument_a_little() -> None:
    rng = random.Random(4)
    template = ([3, 1, 2], 10, "abc")
    for drawn in draw_inputs([template], "nearby", 30, rng):
        assert drawn != template
        assert abs(drawn[1] - 10) <= 2


def test_drawing_needs_a_known_way_and_a_template() -> None:
    with pytest.raises(ValueError, match="unknown way"):
        draw_inputs([(1,)], "random", 1, random.Random(0))
    with pytest.raises(ValueError, match="at least one"):
        draw_inputs([], "fresh", 1, random.Random(0))
