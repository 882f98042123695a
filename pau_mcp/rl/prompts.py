"""What the explorer is told at each step of the cycle: reason, propose an input, reflect.

Every prompt is built from the agent view alone (header, known examples, the
explorer's own calls and hypothesis), so no source or gold description can
reach the policy through an observation.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["SYSTEM", "propose_prompt", "reason_prompt", "reflect_prompt"]

SYSTEM = (
    "You study a Python function whose code you cannot see. You learn about it only by choosing inputs and "
    "reading what it returns. You work in a cycle: reason about which input to try next, propose that input, "
    "then reflect on the result and either conclude with a description of the function or go on. Your final "
    "description should be precise enough that a programmer could re-implement the function exactly, edge cases "
    "and exceptions included. Keep every reply short."
)


def _context(header: str, examples: Sequence[str], recent: Sequence[str], hypothesis: str, left: int | None) -> str:
    known = "\n".join(f"  {line}" for line in examples) or "  (none)"
    tried = "\n".join(f"  {line}" for line in recent) or "  (no experiments yet)"
    budget = "no limit on calls" if left is None else f"{left} call{'s' * (left != 1)} left"
    return (
        f"The function: `{header}`\nKnown examples:\n{known}\nYour latest experiments:\n{tried}\n"
        f"Your current hypothesis: {hypothesis or '(none yet)'}\nBudget: {budget}.\n"
    )


def reason_prompt(
    header: str, examples: Sequence[str], recent: Sequence[str], hypothesis: str, left: int | None
) -> str:
    """Ask for the reasoning behind the next input."""
    return (
        _context(header, examples, recent, hypothesis, left)
        + "\nWhat is still unknown about the function? In a few sentences, say which input you will try next, what "
        "property it has, and what you expect it to return if your hypothesis is right."
    )


def propose_prompt(
    header: str, examples: Sequence[str], recent: Sequence[str], hypothesis: str, left: int | None, arity: int,
    plan: str,
) -> str:  # fmt: skip
    """Ask for the exact input, as one ``INPUT:`` line."""
    sample = "(" + ", ".join(str(i + 1) for i in range(arity)) + ("," if arity == 1 else "") + ")"
    return (
        _context(header, examples, recent, hypothesis, left)
        + f"\nYour plan: {plan or '(none)'}\n\nGive the exact input now: one line `INPUT: <a Python literal tuple of "
        f"{arity} argument{'s' * (arity != 1)}>`, e.g. `INPUT: {sample}`, and nothing else."
    )


def reflect_prompt(
    header: str, examples: Sequence[str], recent: Sequence[str], hypothesis: str, left: int | None, result: str,
    must_conclude: bool,
) -> str:  # fmt: skip
    """Show the result and ask whether the explorer is done."""
    ending = (
        "You have no calls left, so this is your final answer: reply `CONCLUDED: YES` and then "
        "`HYPOTHESIS: <a complete description of what the function does>`."
        if must_conclude
        else "Reply with `CONCLUDED: YES` if you are confident your hypothesis covers every case, otherwise "
        "`CONCLUDED: NO`; then `HYPOTHESIS: <a complete description of what the function does>`."
    )
    return _context(header, examples, recent, hypothesis, left) + f"\nResult: {result}\n\n{ending}"
