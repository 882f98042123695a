"""Arguments are literals, parsed on the host with size and nesting limits."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from wasm_runtime.literals import MAX_LITERAL_CHARS, InvalidInput, literal_value, parse_arguments

ROOT = Path(__file__).resolve().parents[2]


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


# -- python/cpython#106905 ---------------------------------------------------------------------------------------------

#: ``ast.literal_eval`` of a node parsed before builds no tree, so it needs no lock: the names such nodes go by (or
#: the node is ``parse_python(...)``'s own).
_NODES = {"node", "tree", "argument"}


def _unlocked_parses(path: Path) -> list[str]:
    found = []
    for call in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
            continue
        if not (isinstance(call.func.value, ast.Name) and call.func.value.id == "ast"):
            continue
        given = ast.unparse(call.args[0]) if call.args else ""
        text_given = given not in _NODES and not given.startswith("parse_python(")
        if call.func.attr == "parse" or (call.func.attr == "literal_eval" and text_given):
            found.append(f"{path.relative_to(ROOT)}:{call.lineno} ast.{call.func.attr}")
    return found


def test_every_parse_of_python_text_beside_the_sandbox_holds_the_one_lock() -> None:
    # CPython 3.11 before 3.11.9 can raise "SystemError: AST constructor recursion depth mismatch" when two threads
    # build syntax trees at once. A CI run scored a probe's code "error" that way: the sandbox chose each call's
    # engine with a bare ast.parse while another thread parsed. Every parse goes through parse_python or
    # literal_value, which hold one lock for the process.
    sources = [*(ROOT / "wasm_runtime").glob("*.py"), *(ROOT / "pau_mcp").rglob("*.py")]
    unlocked = [place for path in sources if path.name != "literals.py" for place in _unlocked_parses(path)]
    assert not unlocked, f"parse under the lock (wasm_runtime.parse_python, literal_value): {unlocked}"


def test_literal_value_reads_what_literal_eval_reads_and_refuses_what_it_refuses() -> None:
    assert literal_value("  (1, 'a', [2.5])") == (1, "a", [2.5])
    with pytest.raises(ValueError):
        literal_value("f(1)")
    with pytest.raises(SyntaxError):
        literal_value("(1,")
