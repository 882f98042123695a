"""Choosing a method's shown examples and hidden tests among the inputs that ran.

Examples follow the paper: drawn at random (from the run's seed), two with different outputs, never two that both
return their argument unchanged, and never one that shows the function's original name; an input that alone
reaches some line or branch is shown only when no other will do, so the tests keep it. Tests go further than
the paper, which kept whatever was left: they are picked greedily for what they exercise, each next test the one
that adds the most not yet covered, counting the lines and branches of the hidden source it runs (the operator's
coverage tracer, ``scoring.coverage``), the distinct outputs it gives and the types of those outputs. Inputs that
add nothing new fill the remaining places in random order.
"""

from __future__ import annotations

import ast
import random
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from wasm_runtime import Outcome, decode, parse_python, values_equal

__all__ = ["Ran", "Selection", "select_cases"]


@dataclass(frozen=True)
class Ran:
    """One working input: its literal, what the function returned, and the coverage units its traced run reached.

    ``units`` holds ``("line", n)`` and ``("branch", a, b)``; empty when the run could not be traced.
    """

    input: str
    outcome: Outcome
    units: frozenset[Hashable] = frozenset()

    @property
    def shown(self) -> str:
        """The output as an agent would see it."""
        return str(self.outcome.value)

    def behaviour(self) -> frozenset[Hashable]:
        """Everything this input shows of the function: coverage, its output, and its output's type."""
        return self.units | {("output", self.outcome.value_type, self.outcome.value), ("type", self.outcome.value_type)}


@dataclass(frozen=True)
class Selection:
    """The inputs shown and hidden, and one line on what the tests cover."""

    examples: list[str]
    tests: list[str]
    detail: str


def _identity(ran: Ran) -> bool:
    """True when the function returned its only argument unchanged."""
    try:
        node = parse_python(ran.input, mode="eval").body
        arguments = ast.literal_eval(node)  # the parsed node: text would be parsed again outside the parser's lock
        value = decode(ran.outcome.encoded)
    except Exception:  # noqa: BLE001 - any value that cannot be read back is simply not an identity
        return False
    return isinstance(arguments, tuple) and len(arguments) == 1 and values_equal(arguments[0], value)


def _reveals(ran: Ran, hide: str | None) -> bool:
    return bool(hide) and len(hide or "") >= 3 and (hide or "").lower() in f"{ran.input} {ran.shown}".lower()


def select_cases(
    ran: Sequence[Ran], *, examples: int, min_tests: int, max_tests: int, rng: random.Random, hide: str | None = None
) -> Selection | str:
    """Pick the examples and the hidden tests, or say why there are too few.

    Args:
        ran: The working inputs, each once, in the order they were proposed.
        examples: How many examples to show (the paper: 2).
        min_tests: Fewest hidden tests a method may have (the paper: 4).
        max_tests: Most hidden tests kept.
        rng: The run's generator for this function (the same seed, the same choice).
        hide: The function's original name: no example may show it.

    Returns:
        The selection, or the particulars of a ``too-few-inputs`` refusal.
    """
    order = list(ran)
    rng.shuffle(order)
    # An input that alone reaches some line or branch is kept for the tests when another can be shown instead.
    providers = Counter(u for r in ran for u in r.units)
    alone = {r.input for r in ran if any(providers[u] == 1 for u in r.units)}
    shown: list[Ran] = []
    for candidate in sorted(order, key=lambda r: r.input in alone):  # stable: the shuffled order among equals
        if len(shown) >= examples:
            break
        if _reveals(candidate, hide) or any(candidate.shown == s.shown for s in shown):
            continue
        if _identity(candidate) and any(_identity(s) for s in shown):
            continue
        shown.append(candidate)
    rest = [r for r in order if r not in shown]
    outputs = len({r.shown for r in ran})
    if len(shown) < examples:
        return f"{len(ran)} working inputs give {outputs} distinct outputs; {examples} examples need as many"
    covered: set[Hashable] = set()
    tests: list[Ran] = []
    pool = list(rest)
    while pool and len(tests) < max_tests:
        best = max(pool, key=lambda r: len(r.behaviour() - covered))  # the first of equals: the shuffled order
        if not best.behaviour() - covered:
            break
        tests.append(best)
        covered |= best.behaviour()
        pool.remove(best)
    tests.extend(pool[: max_tests - len(tests)])
    if len(tests) < min_tests:
        return f"{len(ran)} working inputs leave {len(tests)} for hidden tests after {examples} examples; --min-tests is {min_tests}"
    seen: set[Any] = {u for r in ran for u in r.units}
    reached: set[Any] = {u for r in tests for u in r.units}

    def part(kind: str) -> str:
        return f"{sum(1 for u in reached if u[0] == kind)} of {sum(1 for u in seen if u[0] == kind)}"

    detail = (
        f"{len(shown)} examples and {len(tests)} tests from {len(ran)} working inputs; the tests reach "
        f"{part('line')} lines and {part('branch')} branches the inputs reach, with {len({t.shown for t in tests})} distinct outputs"
    )
    return Selection([s.input for s in shown], [t.input for t in tests], detail)
