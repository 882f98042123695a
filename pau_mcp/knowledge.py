"""Which knowledge the code writer is handed: the components NovelAPIBench separates, here for one hidden function.

* ``signature``: the function's header (its name and parameters).
* ``description``: what the function does (the agent's description, or the gold one).
* ``examples``: calls and their results (those the agent observed; without them, the initial examples).

``pau-mcp score --knowledge signature,examples`` scores code written from that combination only; each combination is
recorded as a score kind of its own (``codematch:signature+examples``, ``codematch_gold:...`` from the gold
description), so ``pau-mcp report`` can set them side by side. The code writer always learns the function's name:
code must define it to be run, so that is a rule of the exercise, not knowledge.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

__all__ = [
    "COMPONENTS",
    "FULL",
    "all_combinations",
    "knowledge_kind",
    "knowledge_label",
    "parse_knowledge",
    "split_kind",
]

#: Every component, in the order names and tables list them.
COMPONENTS = ("signature", "description", "examples")
#: Everything: what the ordinary code-match score hands the code writer (with the agent's examples).
FULL = COMPONENTS


def parse_knowledge(text: str) -> tuple[str, ...]:
    """``signature,examples`` (any order, any case, ``+`` or ``,`` between) as components in ``COMPONENTS`` order.

    Raises:
        ValueError: an unknown or repeated component, or none; the message lists the components.
    """
    parts = [part.strip().lower() for part in text.replace("+", ",").split(",") if part.strip()]
    unknown = sorted(set(parts) - set(COMPONENTS))
    if unknown:
        raise ValueError(f"unknown knowledge {', '.join(unknown)}; combine {', '.join(COMPONENTS)} (or say all)")
    if len(parts) != len(set(parts)):
        raise ValueError(f"{text!r} names a component twice")
    if not parts:
        raise ValueError(f"name at least one of {', '.join(COMPONENTS)}")
    return tuple(component for component in COMPONENTS if component in parts)


def all_combinations() -> list[tuple[str, ...]]:
    """Every non-empty combination, singles first, the full one last."""
    return [
        combination
        for size in range(1, len(COMPONENTS) + 1)
        for combination in itertools.combinations(COMPONENTS, size)
    ]


def knowledge_label(components: Iterable[str]) -> str:
    """``signature+examples``."""
    return "+".join(components)


def knowledge_kind(components: Iterable[str], gold: bool) -> str:
    """The score kind a combination is recorded as: ``codematch:<label>`` or ``codematch_gold:<label>``."""
    return f"{'codematch_gold' if gold else 'codematch'}:{knowledge_label(components)}"


def split_kind(kind: str) -> tuple[bool, tuple[str, ...]] | None:
    """``(gold, components)`` of a knowledge score kind; None for any other kind."""
    base, _, label = kind.partition(":")
    if base not in ("codematch", "codematch_gold") or not label:
        return None
    try:
        components = parse_knowledge(label)
    except ValueError:
        return None
    return base == "codematch_gold", components
