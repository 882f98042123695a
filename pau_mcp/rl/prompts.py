"""What the explorer is told at each step of the cycle: reason, propose an input, reflect.

Every prompt is built from the agent view alone (header, known examples, the
explorer's own calls and hypothesis), so no source or gold description can
reach the policy through an observation. The wording is the ``rl_*``
templates of ``pau_mcp.prompts``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..prompts import load_prompts

__all__ = ["SYSTEM", "propose_prompt", "reason_prompt", "reflect_prompt"]

#: The explorer's system prompt.
SYSTEM = load_prompts().text("rl_system")


def _context(header: str, examples: Sequence[str], recent: Sequence[str], hypothesis: str, left: int | None) -> str:
    known = "\n".join(f"  {line}" for line in examples) or "  (none)"
    tried = "\n".join(f"  {line}" for line in recent) or "  (no experiments yet)"
    budget = "no limit on calls" if left is None else f"{left} call{'s' * (left != 1)} left"
    return load_prompts().render(
        "rl_context", header=header, known=known, tried=tried, hypothesis=hypothesis or "(none yet)", budget=budget
    )


def reason_prompt(
    header: str, examples: Sequence[str], recent: Sequence[str], hypothesis: str, left: int | None
) -> str:
    """Ask for the reasoning behind the next input."""
    return load_prompts().render("rl_reason", context=_context(header, examples, recent, hypothesis, left))


def propose_prompt(
    header: str, examples: Sequence[str], recent: Sequence[str], hypothesis: str, left: int | None, arity: int,
    plan: str,
) -> str:  # fmt: skip
    """Ask for the exact input, as one ``INPUT:`` line."""
    sample = "(" + ", ".join(str(i + 1) for i in range(arity)) + ("," if arity == 1 else "") + ")"
    return load_prompts().render(
        "rl_propose",
        context=_context(header, examples, recent, hypothesis, left),
        plan=plan or "(none)",
        arity=f"{arity} argument{'s' * (arity != 1)}",
        sample=sample,
    )


def reflect_prompt(
    header: str, examples: Sequence[str], recent: Sequence[str], hypothesis: str, left: int | None, result: str,
    must_conclude: bool,
) -> str:  # fmt: skip
    """Show the result and ask whether the explorer is done."""
    return load_prompts().render(
        "rl_reflect_final" if must_conclude else "rl_reflect",
        context=_context(header, examples, recent, hypothesis, left),
        result=result,
    )
