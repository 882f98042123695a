"""Reading an explorer's replies: the input it proposes and the reflection that concludes or goes on.

The grammar is the paper loop's, shared with the harness's paper agent (``pau_mcp.grammar``): markers at a line
start (``INPUT:``, ``CONCLUDED: YES|NO``, ``HYPOTHESIS:``) in any case and with markdown emphasis, an input inside a
code fence, and never a model's hidden thinking (``<think>...</think>``). Reading never guesses content: nothing here
checks that a literal is valid; ``rules.call_arguments`` does.
"""

from __future__ import annotations

from ..grammar import Reflection, read_input, read_reflection, visible_text

__all__ = ["Reflection", "parse_input", "parse_reflection", "visible_text"]


def parse_input(reply: str, arity: int | None = None) -> str | None:
    """The argument literal a reply proposes, or None when it proposes none (``pau_mcp.grammar.read_input``).

    Args:
        reply: The policy's reply.
        arity: The method's parameter count (None: any parenthesised literal reads as the arguments).
    """
    return read_input(reply, arity)


def parse_reflection(reply: str) -> Reflection:
    """Read a reflection: ``CONCLUDED: YES`` or ``NO`` and ``HYPOTHESIS: <description>`` (in either order)."""
    return read_reflection(reply)
