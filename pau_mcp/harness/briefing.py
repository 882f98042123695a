"""What a task agent's model is told about a suite's tools: what every tool's documentation says, once, and each
tool's own part beside it.

A server documents each tool for a client that may see it alone, so every description repeats how to call it, how
many calls it allows, what to do when done; and each input schema repeats the same properties. Task mode offers a
suite's tools all at once: 66 builtin tools, each repeating the same few sentences, made a first request of about
22,000 tokens that no 8k-context model served on a CPU could read. The briefing states the common sentences once,
and once that every tool takes one parameter, ``args`` (all the arguments as a Python literal tuple, which the
server takes for every tool), so each tool's schema is a bare object; each tool keeps what is its own: its header,
its documentation or examples.

Nothing is parsed by the server's wording: a sentence is common when every tool's description has it, read after
the tool's own parameter names are set aside, and long enough to be an instruction rather than a heading. Sentences
about tools the task does not offer (``submit``), or about ``args`` (the briefing's own rule says how to call), are
left out. Linear in the descriptions.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from ..contract import FACTS_KEY

__all__ = ["ARGS_RULE", "Briefing", "brief"]

#: How every tool of a briefing is called (the one parameter it is offered with).
ARGS_RULE = (
    "Call every tool with one parameter, `args`: all of its arguments as one Python literal tuple, e.g. "
    '{"args": "(3, \'a\')"} for two arguments, {"args": "([1, 2],)"} for one.'
)
#: A sentence shorter than this is a heading ("Known examples:"), kept with its tool.
_MIN_COMMON_CHARS = 40
_OWN_PARAMETERS = "\x00parameters\x00"  # where a sentence named the tool's own parameters
_HEADER = "\x00header\x00"  # where a sentence holds the tool's header: never common
_SENTENCE_END = ". "
#: How a common sentence shows where each tool's header stood (each tool's description starts with its own).
_SHOWN_HEADER = "HEADER (the header its description gives)"


@dataclass(frozen=True)
class Briefing:
    """A suite's tools as a task agent's model sees them.

    Attributes:
        common: What every tool's description says, once (empty when nothing is common).
        tools: Each tool in OpenAI's function form: its name and its own part of the description (its parameter,
            ``args``, is the introduction's to state).
    """

    common: str
    tools: list[dict[str, Any]]

    def introduction(self) -> str:
        """The text the first request states once: how every tool is called, and what every tool's description
        says."""
        said = f"\nWhat the description of every tool also says (of that tool): {self.common}" if self.common else ""
        return f"{ARGS_RULE}{said}"


def _parameters(tool: types.Tool) -> list[str]:
    properties = (tool.input_schema or {}).get("properties") or {}
    return [name for name in properties if name != "args"]


def _header(tool: types.Tool) -> str | None:
    """The function's header the tool publishes in its facts (``_meta``), when it does."""
    facts = (tool.meta or {}).get(FACTS_KEY)
    header = facts.get("header") if isinstance(facts, Mapping) else None
    return header if isinstance(header, str) and header else None


def _sentences(line: str) -> list[str]:
    """A line's sentences: it is split after a period followed by a blank and a capital (``e.g. {...}`` is not an
    end). One pass."""
    parts: list[str] = []
    start = 0
    position = line.find(_SENTENCE_END)
    while position >= 0:
        after = position + len(_SENTENCE_END)
        if after < len(line) and line[after].isupper():
            parts.append(line[start : position + 1])
            start = after
        position = line.find(_SENTENCE_END, after)
    parts.append(line[start:])
    return parts


def _lines(tool: types.Tool) -> list[list[str]]:
    """A tool's description as lines of sentences, its header and its own parameter list set aside (a sentence that
    holds the header is the tool's own; one that only names its parameters may be common)."""
    text = tool.description or ""
    header = _header(tool)
    if header:
        text = text.replace(header, _HEADER)
    own = ", ".join(_parameters(tool))
    if own:
        text = text.replace(own, _OWN_PARAMETERS)
    return [_sentences(line) for line in text.split("\n")]


def _restored(text: str, tool: types.Tool) -> str:
    return text.replace(_HEADER, _header(tool) or "").replace(_OWN_PARAMETERS, ", ".join(_parameters(tool)))


def _own(sentence: str, common: Collection[str]) -> str:
    """What of a sentence a tool keeps: nothing when it is common, its header alone when it is common round it."""
    if sentence not in common:
        return sentence
    return f"`{_HEADER}`" if _HEADER in sentence else ""


def _left_out(sentence: str, others: Collection[str]) -> bool:
    """A common sentence not stated: about a tool the task does not offer, or about ``args`` (``ARGS_RULE`` says how
    every tool is called here)."""
    return "`args`" in sentence or any(f"`{name}`" in sentence for name in others)


def brief(tools: Mapping[str, types.Tool], not_offered: Collection[str] = ()) -> Briefing:
    """The briefing of ``tools`` (by name): the sentences every description has, once; each tool's own part.

    Args:
        tools: The tools the task offers, as the server lists them.
        not_offered: Names of tools the server lists that the task does not offer (``submit``): a common sentence
            that names one is left out, not stated.
    """
    split = {name: _lines(tool) for name, tool in tools.items()}
    counts: dict[str, int] = {}
    for lines in split.values():
        for sentence in {s.strip() for line in lines for s in line}:
            if len(sentence) >= _MIN_COMMON_CHARS or _HEADER in sentence:
                counts[sentence] = counts.get(sentence, 0) + 1
    common = {sentence for sentence, count in counts.items() if count == len(tools) and len(tools) > 1}
    stated: list[str] = []
    offered = []
    for name, lines in split.items():
        # A common sentence is dropped; one that holds the header (the same words round each tool's own header) is
        # stated once as a pattern, and each tool keeps only its header.
        kept = [" ".join(_own(s.strip(), common) for s in line if _own(s.strip(), common)).strip() for line in lines]
        own = _restored("\n".join(line for line in kept if line), tools[name])
        if not stated:
            stated = [s.strip() for line in lines for s in line if s.strip() in common]
        offered.append(
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": own,
                    # The one parameter every tool takes is said once (ARGS_RULE), not in 66 schemas.
                    "parameters": {"type": "object"},
                },
            }
        )
    said = [s.replace(_OWN_PARAMETERS, "its parameters").replace(_HEADER, _SHOWN_HEADER) for s in dict.fromkeys(stated)]
    return Briefing(" ".join(s for s in said if not _left_out(s, not_offered)), offered)
