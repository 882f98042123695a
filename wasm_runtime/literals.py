"""Arguments arrive as Python literals; this turns them into argument tuples safely."""

from __future__ import annotations

import ast
import os
import threading
import warnings
from typing import Any, Literal, overload

__all__ = [
    "MAX_INT_DIGITS",
    "MAX_LITERAL_CHARS",
    "MAX_NESTING",
    "InvalidInput",
    "int_too_long",
    "literal_value",
    "parse_arguments",
    "parse_python",
]

MAX_LITERAL_CHARS = 64 * 1024
MAX_NESTING = 100
#: Longest int argument, in decimal digits: Python's own limit for turning an int into text, so any
#: argument can be shown (``repr``) on the host and in the sandbox alike.
MAX_INT_DIGITS = 4300
_INT_BOUND: int = 10**MAX_INT_DIGITS

_HOW = (
    "Write the arguments as a Python literal: numbers, strings, bytes, True/False/None, "
    "and tuples, lists, dicts and sets of them, e.g. (3, 'abc') for two arguments or "
    "([1, 2],) for one list."
)


# CPython 3.11 before 3.11.9 can fail with "SystemError: AST constructor recursion depth mismatch" when
# several threads build ASTs at once (python/cpython#106905); the sandbox parses on many threads.
_AST_LOCK = threading.Lock()


def _new_lock_in_child() -> None:
    # A thread of the parent may hold the lock at the moment of a fork; the child has no such thread, so it would
    # wait forever. The child starts with a lock of its own (RL trainers fork from threaded processes).
    global _AST_LOCK
    _AST_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_in_child)


@overload
def parse_python(text: str, mode: Literal["exec"] = "exec") -> ast.Module: ...
@overload
def parse_python(text: str, mode: Literal["eval"]) -> ast.Expression: ...
@overload
def parse_python(text: str, mode: str) -> ast.AST: ...


def parse_python(text: str, mode: str = "exec") -> ast.AST:
    """``ast.parse``, safe to call from many threads at once, without printing SyntaxWarnings to stderr."""
    with _AST_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        return ast.parse(text, mode=mode)


def literal_value(text: str) -> Any:
    """``ast.literal_eval`` of ``text``, parsed under ``parse_python``'s lock (python/cpython#106905).

    Raises:
        ValueError, TypeError, SyntaxError, MemoryError, RecursionError: as ``ast.literal_eval`` does for text that
            is not a literal.
    """
    return ast.literal_eval(parse_python(text.lstrip(" \t"), mode="eval"))


class InvalidInput(ValueError):
    """The text is not a literal argument tuple the sandbox accepts. The message (one line) says why and how to fix it."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


def int_too_long(value: int) -> bool:
    """True when ``value`` has more than ``MAX_INT_DIGITS`` decimal digits."""
    return value >= _INT_BOUND or value <= -_INT_BOUND


_INT_TOO_LONG = (
    f"an integer in the arguments has more than {MAX_INT_DIGITS} digits; the sandbox accepts at most {MAX_INT_DIGITS}."
)


def _depth(node: ast.AST) -> int:
    """How deep the tree nests (counting up to just past ``MAX_NESTING``); refuses over-long int constants."""
    deepest = 0
    stack = [(node, 1)]
    while stack:
        current, level = stack.pop()
        deepest = max(deepest, level)
        if deepest > MAX_NESTING:
            break
        if isinstance(current, ast.Constant) and type(current.value) is int and int_too_long(current.value):
            raise InvalidInput(_INT_TOO_LONG)
        stack.extend((child, level + 1) for child in ast.iter_child_nodes(current))
    return deepest


def _not_python(exc: BaseException) -> str:
    if isinstance(exc, UnicodeEncodeError) and exc.reason == "surrogates not allowed":
        char = exc.object[exc.start]
        return (
            f"the arguments contain a lone surrogate character (U+{ord(char):04X}), which is not valid text; "
            f"inside a string literal write it as the escape '\\u{ord(char):04x}'."
        )
    detail = exc.msg if isinstance(exc, SyntaxError) else str(exc) or type(exc).__name__
    if "integer string conversion" in detail:
        return _INT_TOO_LONG
    return f"the arguments are not valid Python ({detail}). {_HOW}"


def parse_arguments(text: str) -> tuple[Any, ...]:
    """Parse a literal into the tuple of arguments for one call.

    A tuple literal is the argument list; any other literal is the single
    argument (``[1, 2]`` is one list, not two arguments). Parsing happens on
    the host, before anything enters the sandbox.

    Args:
        text: The literal, at most 64 KiB, nested at most 100 levels, with ints of at most 4300 digits.

    Returns:
        The arguments.

    Raises:
        InvalidInput: The text is too long, too deep, not Python (a lone surrogate character included), not a
            literal, or holds an int too long to show. Nothing else is raised.
    """
    if not isinstance(text, str):
        raise InvalidInput(f"arguments must be given as text, not {type(text).__name__}. {_HOW}")
    if len(text) > MAX_LITERAL_CHARS:
        raise InvalidInput(f"the arguments are {len(text)} characters long; the limit is {MAX_LITERAL_CHARS}.")
    if not text.strip():
        raise InvalidInput(f"the arguments are empty. {_HOW} Use () for a call without arguments.")
    try:
        tree = parse_python(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise InvalidInput(_not_python(exc)) from None
    if _depth(tree.body) > MAX_NESTING:
        raise InvalidInput(f"the arguments are nested more than {MAX_NESTING} levels deep.")
    try:
        with _AST_LOCK:
            value = ast.literal_eval(tree)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        raise InvalidInput(f"only literals are allowed; {_describe_non_literal(text.strip(), tree)}. {_HOW}") from None
    return value if type(value) is tuple else (value,)


_KINDS = {
    ast.Call: "a call",
    ast.Name: "a name",
    ast.Attribute: "an attribute",
    ast.Lambda: "a lambda",
    ast.BinOp: "an operator expression",
    ast.BoolOp: "a boolean expression",
    ast.Compare: "a comparison",
    ast.Subscript: "a subscript",
    ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension",
    ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a generator",
    ast.JoinedStr: "an f-string",
    ast.Starred: "a starred expression",
    ast.IfExp: "a conditional expression",
    ast.NamedExpr: "an assignment expression",
}


def _describe_non_literal(text: str, tree: ast.AST) -> str:
    for node in ast.walk(tree):
        for kind, description in _KINDS.items():
            if isinstance(node, kind):
                segment = ast.get_source_segment(text, node) or ""
                if len(segment) > 60:
                    segment = segment[:57] + "..."
                return f"`{segment}` is {description}, which is not evaluated"
    return "the text is not a literal (unsupported operators, or a value out of range)"
