"""Reading an explorer's replies: the input it proposes and the reflection that concludes or goes on.

Replies are model text, so reading is forgiving about form (case, markdown
emphasis, a code fence) but never guesses content: an input is a line marked
``INPUT:`` or, failing that, a line that is nothing but a parenthesised
literal; a reflection is a ``CONCLUDED: YES|NO`` line and a ``HYPOTHESIS:``
section. A model's hidden thinking (``<think>...</think>``) is not part of
the reply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Reflection", "parse_input", "parse_reflection", "visible_text"]

_THINKING = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_INPUT = re.compile(r"^[\s>*_`-]*input[\s*_`]*:[\s*_`]*(?P<rest>.*)$", re.IGNORECASE)
_CONCLUDED = re.compile(r"^[\s>*_`-]*concluded[\s*_`]*:[\s*_`]*(?P<decision>yes|no)\b", re.IGNORECASE | re.MULTILINE)
_HYPOTHESIS = re.compile(r"^[\s>*_`-]*hypothesis[\s*_`]*:[\s*_`]*", re.IGNORECASE | re.MULTILINE)


def visible_text(reply: str) -> str:
    """The reply without a model's thinking: anything in ``<think>`` blocks, or before a lone ``</think>``."""
    text = _THINKING.sub("", reply or "")
    if "</think>" in text.lower():
        text = text[text.lower().rindex("</think>") + len("</think>") :]
    return text.strip()


def parse_input(reply: str) -> str | None:
    """The argument literal a reply proposes, or None when it proposes none.

    The first line marked ``INPUT:`` wins (the rest of that line, without surrounding backticks); a reply
    without one may consist of a line that is only a parenthesised literal, e.g. ``(3, 'abc')``.
    Nothing here checks that the literal is valid: ``rules.call_arguments`` does.
    """
    lines = [line for line in visible_text(reply).splitlines() if line.strip() and not line.strip().startswith("```")]
    for line in lines:
        match = _INPUT.match(line)
        if match:
            literal = match["rest"].strip().strip("`").strip()
            return literal or None
    bare = [line.strip().strip("`").strip() for line in lines]
    for line in bare:
        if line.startswith("(") and line.endswith(")"):
            return line
    return None


@dataclass(frozen=True)
class Reflection:
    """What a reflection said.

    Attributes:
        concluded: True when it said ``CONCLUDED: YES``.
        hypothesis: The hypothesis (the whole reply when it gave none in the format).
        clean: True when the reply followed the format (a decision and a hypothesis).
    """

    concluded: bool
    hypothesis: str
    clean: bool


def parse_reflection(reply: str) -> Reflection:
    """Read a reflection: ``CONCLUDED: YES`` or ``NO`` and ``HYPOTHESIS: <description>`` (in either order)."""
    text = visible_text(reply)
    decision = _CONCLUDED.search(text)
    marker = _HYPOTHESIS.search(text)
    hypothesis = ""
    if marker:
        rest = text[marker.end() :]
        after = _CONCLUDED.search(rest)
        hypothesis = (rest[: after.start()] if after else rest).strip()
    concluded = bool(decision) and decision["decision"].lower() == "yes"  # type: ignore[index]
    clean = bool(decision) and bool(hypothesis)
    return Reflection(concluded=concluded, hypothesis=hypothesis or text, clean=clean)
