"""What each OAuth scope lets a signed-in token do, and which scopes imply others.

A broader scope implies the narrower ones (the MCP authorization specification asks a resource server to account for
such hierarchies): ``operate`` is the main token's power, so it includes ``explore`` and ``score``.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["EXPLORE", "OPERATE", "SCOPES", "SCORE", "effective"]

#: Call the hidden-function tools and submit descriptions at the MCP endpoint, spending the token subject's budget.
EXPLORE = "explore"
#: Score submissions at the scorer endpoint (``pau-mcp scorer``, ``POST /v1/score``).
SCORE = "score"
#: What the main token's holder may do: name any label and run (and so any budget) with ``?session=``/``?run=``, the
#: ``X-PAU-Session``/``X-PAU-Run`` headers or ``_meta``, as the evaluation harness does; and everything above.
OPERATE = "operate"

#: Each scope and what it allows, in the order the protected-resource metadata lists them.
SCOPES: dict[str, str] = {
    EXPLORE: "call the tools and submit descriptions, spending the signed-in subject's budget",
    SCORE: "score submissions at the scorer endpoint",
    OPERATE: "name any label and run (any budget), as the main token's holder does; includes explore and score",
}

_IMPLIES: dict[str, frozenset[str]] = {OPERATE: frozenset({EXPLORE, SCORE})}


def effective(granted: Iterable[str]) -> frozenset[str]:
    """The scopes a token holds: those granted and those they imply."""
    held = set(granted)
    for scope in list(held):
        held |= _IMPLIES.get(scope, frozenset())
    return frozenset(held)
