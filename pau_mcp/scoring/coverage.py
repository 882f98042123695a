"""Exploration coverage: which lines and branches of a hidden function an agent's calls ran, beside its tests'.

Measured after the fact, for the operator only: the agent's recorded inputs and
the method's hidden test inputs are run again in the sandbox with tracing on
(``Sandbox.run(trace=True)``, many times slower than a call, so never on an
agent's path), and the lines each run executed are compared. Nothing here is
ever shown to an agent: it holds the shape of the hidden source.

- A *line* is a statement of a function in the hidden source (a line a
  multi-line statement continues on counts as its first line).
- A *branch* is a way out of the line of an ``if``/``elif``, ``while``, ``for``
  or ``match`` statement that a run took: to the next line, into a ``case``, or
  out of the function. Which ways exist is not computed, only which were taken,
  so the measure is relative to the hidden tests; conditions inside one line
  (``a if c else b``, ``and``, ``or``) are not told apart.
- ``agent_of_tests`` is the share of the lines (branches) the hidden tests run
  that the agent's calls also ran: 1.0 when the agent reached everything the tests
  exercise. "Insufficient exploration" becomes a number.

The hidden function runs in the same interpreter as the tracer: a function that
turns tracing off (``sys.settrace``) hides from it. Coverage of the project's
suites is evidence; of a hostile function, it is not.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Sequence
from functools import partial
from typing import Any

import anyio

from wasm_runtime import Limits, Outcome, Sandbox, SandboxInterface, Status, parse_python

from ..manifests import Method

__all__ = ["TRACE_SLOWDOWN", "SourceShape", "measure_coverage", "source_shape", "trace_limits", "traced_parts"]

#: Tracing costs many times a call's work: coverage runs get this many times the sandbox's time per input.
TRACE_SLOWDOWN = 10

_BRANCHING = (ast.If, ast.While, ast.For, ast.AsyncFor, ast.Match)


@dataclasses.dataclass(frozen=True)
class SourceShape:
    """What coverage counts in a source.

    Attributes:
        statements: Each line inside a function mapped to the first line of the innermost statement holding it.
        branching: First lines of the ``if``, ``while``, ``for`` and ``match`` statements inside functions.
    """

    statements: dict[int, int]
    branching: frozenset[int]

    def line(self, number: int) -> int:
        """The statement line a traced line counts as (lines outside any function stay as they are)."""
        return self.statements.get(number, number) if number > 0 else number


def source_shape(source: str) -> SourceShape:
    """The statements and branching lines of the functions in ``source`` (empty when it does not parse)."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return SourceShape({}, frozenset())
    statements: dict[int, int] = {}
    branching: set[int] = set()
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        # ast.walk goes outside in, so an inner statement overwrites the statement around it.
        for node in ast.walk(ast.Module(body=function.body, type_ignores=[])):
            if isinstance(node, ast.stmt):
                for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                    statements[line] = node.lineno
                if isinstance(node, _BRANCHING):
                    branching.add(node.lineno)
    return SourceShape(statements, frozenset(branching))


@dataclasses.dataclass
class _Traced:
    lines: set[int] = dataclasses.field(default_factory=set)
    branches: set[tuple[int, int]] = dataclasses.field(default_factory=set)
    inputs: int = 0
    lost: int = 0


def traced_parts(outcome: Outcome, shape: SourceShape) -> tuple[set[int], set[tuple[int, int]]] | None:
    """The statement lines and the branches one traced run executed, or None when it left no trace.

    A run leaves none when it stopped before the guest could report (a limit, a crash) or was never run.
    """
    trace = outcome.extra.get("trace")
    if not trace:
        return None
    lines = {shape.line(line) for line in trace["lines"]}
    branches: set[tuple[int, int]] = set()
    for start, end in trace["arcs"]:
        a, b = shape.line(start), shape.line(end)
        if a != b and a in shape.branching:
            branches.add((a, b))
    return lines, branches


def trace_limits(limits: Limits) -> Limits:
    """Limits for a traced run: ``TRACE_SLOWDOWN`` times the time and CPU of ``limits``, for the tracer."""
    return dataclasses.replace(
        limits, timeout_s=min(3600.0, limits.timeout_s * TRACE_SLOWDOWN), fuel=limits.fuel_budget * TRACE_SLOWDOWN
    )


def _collect(outcomes: Sequence[Outcome], shape: SourceShape) -> _Traced:
    traced = _Traced()
    for outcome in outcomes:
        if outcome.status is Status.INVALID_INPUT:
            continue  # nothing ran
        traced.inputs += 1
        parts = traced_parts(outcome, shape)
        if parts is None:
            traced.lost += 1  # stopped before the guest could report (a limit, a crash), or a malformed trace
            continue
        traced.lines.update(parts[0])
        traced.branches.update(parts[1])
    return traced


def _part(tests: set[Any], agent: set[Any], total: int | None = None) -> dict[str, Any]:
    common = tests & agent
    part: dict[str, Any] = {
        "tests": len(tests),
        "agent": len(agent),
        "common": len(common),
        "agent_of_tests": len(common) / len(tests) if tests else None,
    }
    if total is not None:
        part["function"] = total
    return part


async def measure_coverage(
    sandbox: SandboxInterface, method: Method, inputs: Sequence[str], *, limits: Limits | None = None
) -> dict[str, Any]:
    """What the agent's ``inputs`` and the method's hidden tests execute of its source, and how they overlap.

    Args:
        sandbox: An in-process ``Sandbox`` (tracing is a ``Sandbox.run`` option; worker processes do not offer it).
        method: The hidden method (its source and test inputs are read here).
        inputs: The argument literals of the agent's own calls, in order.
        limits: Per-input limits; each input gets ``TRACE_SLOWDOWN`` times their time (and CPU), for the tracer.

    Returns:
        ``{"status": "measured", "lines": {...}, "branches": {...}, ...}``: for lines and for branches,
        how many the tests and the agent ran, how many both, and ``agent_of_tests``; the line numbers
        and branches themselves; the inputs traced and those whose trace was lost to a limit. With a
        sandbox that cannot trace, ``{"status": "unavailable", "reason": ...}``.
    """
    if not isinstance(sandbox, Sandbox):
        return {
            "status": "unavailable",
            "reason": f"a {type(sandbox).__name__} cannot trace; use an in-process Sandbox",
        }
    traced_limits = trace_limits(limits or sandbox.limits)
    shape = source_shape(method.source)

    async def run(inputs: list[str]) -> list[Outcome]:
        call = partial(sandbox.run, method.source, inputs, entry=method.entry, limits=traced_limits, trace=True)
        return await anyio.to_thread.run_sync(call)

    tests = _collect(await run([case.input for case in method.tests]), shape)
    agent = _collect(await run(list(inputs)) if inputs else [], shape)
    return {
        "status": "measured",
        "lines": _part(tests.lines, agent.lines, total=len(set(shape.statements.values()))),
        "branches": _part(tests.branches, agent.branches),
        "agent_lines": sorted(agent.lines),
        "test_lines": sorted(tests.lines),
        "agent_branches": sorted([a, b] for a, b in agent.branches),
        "test_branches": sorted([a, b] for a, b in tests.branches),
        "inputs": agent.inputs,
        "lost": agent.lost,
        "test_inputs": tests.inputs,
        "tests_lost": tests.lost,
    }
