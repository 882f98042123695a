"""The rules of a query, shared by everything that lets an explorer call a hidden method.

The MCP server (``pau_mcp.server``) and the RL environment (``pau_mcp.rl``)
both hold explorers to the same rules, and neither imports the other, so the
rules live here, below both:

* Arguments are a Python literal (``wasm_runtime.parse_arguments``) with
  exactly as many values as the method has parameters. Anything else is
  refused before it reaches the sandbox, and a refused call does not count.
* Every call that reaches the sandbox counts against the budget, whatever the
  function does with it (returns, raises, times out, floods its output); a
  call over the budget is refused and does not count: the budget rule is the
  tool contract's (``pau_mcp.contract.Budget``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wasm_runtime import InvalidInput, parse_arguments

__all__ = ["arity_problem", "call_arguments"]


def arity_problem(header: str, params: Sequence[str], given: int) -> str | None:
    """Why ``given`` arguments cannot call a method, or None when the count is right.

    Args:
        header: The method's header, ``def test_func(arg0, arg1):``.
        params: Its parameter names.
        given: How many arguments a call passes.
    """
    if given == len(params):
        return None
    signature = header[4:-1] if header.startswith("def ") and header.endswith(":") else header
    return f"{signature} takes {len(params)} argument{'s' * (len(params) != 1)}, got {given}."


def call_arguments(literal: str, header: str, params: Sequence[str]) -> tuple[tuple[Any, ...], str]:
    """Parse an argument literal for a method and check its arity.

    Args:
        literal: The arguments as a Python literal, e.g. ``(1, 'a')``; a single non-tuple value is one argument.
        header: The method's header.
        params: Its parameter names.

    Returns:
        The argument tuple and its canonical literal (``repr`` of the tuple), as the run store records it.

    Raises:
        InvalidInput: not a literal the sandbox accepts, or the wrong number of arguments; the message says why.
    """
    args = parse_arguments(literal)
    problem = arity_problem(header, params, len(args))
    if problem:
        raise InvalidInput(problem)
    return args, repr(args)
