"""Anonymisation: the same renaming for every importer, checked on the text and by running both versions in the sandbox."""

from __future__ import annotations

import pytest

from pau_mcp.manifests.importers import CannotAnonymise, anonymise, description_from_docstring, docstring_of
from wasm_runtime import Sandbox

FACTORIAL = '''
"""A module docstring that names factorial."""
import math  # the comment names factorial too

_SEEN_BY_FACTORIAL = []


def factorial_helper(k):
    """Helper docstring."""
    return factorial(k)


def factorial(n, scale=1):
    """Return n! times scale.

    >>> factorial(3)
    6
    """
    # recursion below
    if n <= 1:
        return scale
    square = lambda n: n * n  # a parameter of the same name in a nested scope
    total = [n for n in range(3)]
    return n * factorial(n=n - 1, scale=scale) + 0 * square(2) + 0 * len(total)
'''


def test_the_entry_becomes_test_func_with_positional_parameters_arg0_to_argn() -> None:
    result = anonymise(FACTORIAL, "factorial")
    assert result.header == "def test_func(arg0, arg1):"
    assert result.params == ["arg0", "arg1"]
    assert result.original_name == "factorial"
    assert "def test_func(arg0, arg1=1):" in result.source
    assert result.renamed["n"] == "arg0" and result.renamed["scale"] == "arg1"


def test_docstrings_and_comments_are_removed_and_the_original_name_appears_nowhere() -> None:
    result = anonymise(FACTORIAL, "factorial")
    assert '"""' not in result.source and "'''" not in result.source
    assert "#" not in result.source
    assert "factorial" not in result.source.lower()
    # The helper whose name contains the entry's name was renamed, and its caller follows.
    assert result.renamed["factorial_helper"] == "test_func_helper"
    assert "def test_func_helper(k):" in result.source
    assert "_SEEN_BY_test_func" in result.source


def test_recursive_calls_follow_the_renaming_including_keyword_arguments() -> None:
    result = anonymise(FACTORIAL, "factorial")
    assert "test_func(arg0=arg0 - 1, arg1=arg1)" in result.source
    assert "return test_func(k)" in result.source


def test_the_anonymised_function_behaves_like_the_original_in_the_sandbox(sandbox: Sandbox) -> None:
    result = anonymise(FACTORIAL, "factorial")
    inputs = ["(0,)", "(1,)", "(5,)", "(4, 2)", "('x',)"]
    original = sandbox.run(FACTORIAL, inputs, entry="factorial")
    renamed = sandbox.run(result.source, inputs, entry="test_func")
    assert [o.value for o in renamed] == [o.value for o in original] == ["1", "1", "120", "48", None]
    assert renamed[-1].error_type == original[-1].error_type == "TypeError"
    helper = sandbox.call(result.source, "(4,)", entry="test_func_helper")
    assert helper.value == "24"


def test_defaults_keep_referring_to_the_names_they_referred_to() -> None:
    source = "limit = 10\ndef clamp(limit, top=limit):\n    return min(limit, top)\n"
    result = anonymise(source, "clamp")
    assert "def test_func(arg0, arg1=limit):" in result.source
    assert "return min(arg0, arg1)" in result.source


def test_methods_and_attributes_of_classes_keep_their_names() -> None:
    source = (
        "class Box:\n    scale_twice = 2\n    def scale_method(self, v):\n        return v * self.scale_twice\n"
        "def scale(v):\n    return Box().scale_method(v)\n"
    )
    result = anonymise(source, "scale")
    assert "def scale_method(self, v):" in result.source and "scale_twice = 2" in result.source
    assert "return Box().scale_method(arg0)" in result.source


def test_a_string_statement_after_the_first_line_is_stripped_like_a_docstring() -> None:
    source = 'def f(grid):\n    import math\n    """Example: f([[1]]) -> 1"""\n    return len(grid)\n'
    result = anonymise(source, "f")
    assert "Example" not in result.source
    assert docstring_of(source, "f") == "Example: f([[1]]) -> 1"


def test_a_stand_in_entry_gets_the_real_name_recorded_and_hidden() -> None:
    source = "def solution(x):\n    return get_total(x - 1) if x else 0\n"
    result = anonymise(source, "solution", hidden_name="get_total")
    assert result.original_name == "get_total"
    assert "get_total" not in result.source and "test_func(arg0 - 1)" in result.source


@pytest.mark.parametrize(
    ("source", "entry", "reason"),
    [
        ("def f(x):\n    return x +\n", "f", "does not parse"),
        ("def g(x):\n    return x\n", "f", "no top-level function 'f'"),
        ("async def f(x):\n    return x\n", "f", "coroutine"),
        ("def f(x):\n    arg0 = 1\n    return x + arg0\n", "f", "'arg0'"),
        ("test_func = 3\ndef f(x):\n    return x\n", "f", "'test_func'"),
    ],
)
def test_sources_that_cannot_be_anonymised_say_why(source: str, entry: str, reason: str) -> None:
    with pytest.raises(CannotAnonymise, match=reason):
        anonymise(source, entry)


def test_parameters_already_named_arg_n_are_left_alone() -> None:
    source = "def test_func(arg1, arg0):\n    arg1 = arg1 + 1\n    return arg1 - arg0\n"
    result = anonymise(source, "test_func")
    assert "def test_func(arg0, arg1):" in result.source
    assert "arg0 = arg0 + 1" in result.source and "return arg0 - arg1" in result.source


def test_descriptions_drop_doctests_and_example_blocks_but_keep_definitions() -> None:
    doc = """Return the n-th element of a sequence defined by
    seq(n) -> seq(n-1) + seq(n-2).

    For example:
        seq(3) ==> 2
        seq(10) ==> 55
    >>> seq(4)
    3

    Note: n is never negative.
    seq(5) == 5
    """
    text = description_from_docstring(doc, "seq")
    assert text == (
        "Return the n-th element of a sequence defined by seq(n) -> seq(n-1) + seq(n-2).\n\nNote: n is never negative."
    )
