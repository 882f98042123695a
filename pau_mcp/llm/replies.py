"""What a model answered: its text, its thinking kept apart, tool calls and tokens, as every provider returns them."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from itertools import accumulate
from typing import Any

__all__ = [
    "MAX_JSON_DEPTH",
    "Completion",
    "Reply",
    "ToolCall",
    "Usage",
    "nests_deeper_than",
    "read_json",
    "split_thinking",
]

#: The deepest JSON a model's reply is read to (tool-call arguments, a call written as text): far beyond any
#: function's arguments, far below the depth at which parsing would exhaust the interpreter's stack.
MAX_JSON_DEPTH = 100

# A JSON string (escapes followed, possessively: no backtracking) or one bracket; anything else is skipped over.
_JSON_TOKEN = re.compile(r'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)|[\[\]{}]', re.DOTALL)
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def nests_deeper_than(text: str, limit: int) -> bool:
    """Whether JSON text nests deeper than ``limit`` levels, found by scanning its brackets outside strings rather
    than by parsing it (a parser recurses as deep as the text goes). Linear in the text."""
    if text.count("[") + text.count("{") <= limit:
        return False
    steps = (_STEP.get(token, 0) for token in _JSON_TOKEN.findall(text))
    return max(accumulate(steps), default=0) > limit


def read_json(text: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """JSON text a model wrote, as a value; None when it is not JSON or nests deeper than ``max_depth``.

    Never raises for any text: over-deep JSON is refused before it is parsed.
    """
    if nests_deeper_than(text, max_depth):
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


@dataclass(frozen=True)
class Usage:
    """Tokens of one or more requests."""

    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens)

    @property
    def total(self) -> int:
        """Input and output tokens together."""
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class ToolCall:
    """A function call the model asked for, in OpenAI's terms.

    Attributes:
        id: The call id to answer with a ``{"role": "tool", "tool_call_id": id}`` message.
        name: The tool's name.
        arguments: The arguments as the model wrote them (JSON text, not necessarily valid).
    """

    id: str
    name: str
    arguments: str

    def parsed_arguments(self) -> dict[str, Any] | None:
        """The arguments as a dict, or None when the model wrote something that is not a JSON object (or one nested
        deeper than ``MAX_JSON_DEPTH``: one unreadable call, never a crash)."""
        value = read_json(self.arguments or "{}")
        return value if isinstance(value, dict) else None


@dataclass(frozen=True)
class Reply:
    """A reply in provider-neutral terms, as the response cache stores it.

    Attributes:
        text: The answer, thinking removed.
        tool_calls: Function calls asked for.
        usage: Tokens as the provider counted them.
        finish_reason: ``stop``, ``tool_calls``, ``length``, ...
        reasoning: The thinking text the provider returned (reasoning fields, ``<think>`` blocks, thinking blocks).
        thinking_blocks: Opaque thinking blocks a provider wants back with the next turn (Claude's, signed).
        verbatim: The answer as the provider wrote it, ``<think>`` text included, when that is not ``text``
            (None: ``text`` is as written).
        reasoning_field: The reply's own ``reasoning`` field as the provider sent it (OpenRouter's, recent vLLM's;
            for Claude, its thinking), None when it sent none: what the reference benchmark's client reads.
    """

    text: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    finish_reason: str | None
    reasoning: str = ""
    thinking_blocks: tuple[dict[str, Any], ...] = ()
    verbatim: str | None = None
    reasoning_field: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The reply as JSON data."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Reply:
        """A reply stored by :meth:`to_json` (entries written before thinking was kept have none)."""
        return cls(
            text=data["text"],
            tool_calls=tuple(ToolCall(**call) for call in data["tool_calls"]),
            usage=Usage(**data["usage"]),
            finish_reason=data.get("finish_reason"),
            reasoning=data.get("reasoning") or "",
            thinking_blocks=tuple(data.get("thinking_blocks") or ()),
            verbatim=data.get("verbatim"),
            reasoning_field=data.get("reasoning_field"),
        )


@dataclass(frozen=True)
class Completion:
    """One model reply.

    Attributes:
        model: The model string asked for.
        text: The reply's text ("" when it only calls tools); never the model's thinking.
        tool_calls: Function calls the model asked for.
        usage: Tokens of the request as the provider counted them (also when replayed from the cache).
        cost_usd: What this call cost: 0 when it came from the cache or the model is unpriced.
        priced: False when the price table has no entry for the model.
        cached: True when the reply came from the response cache and no request was made.
        finish_reason: ``stop``, ``tool_calls``, ``length``, ... as the provider said.
        reasoning: What the model thought before answering, when the provider shows it (kept for the record; not
            an answer).
        thinking_blocks: Provider data that must go back with the next turn (see :meth:`message`).
        verbatim: The answer as the provider wrote it, ``<think>`` text included, when that is not ``text``.
        reasoning_field: The reply's own ``reasoning`` field, when the provider sent one (see ``Reply``).
    """

    model: str
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    priced: bool = True
    cached: bool = False
    finish_reason: str | None = None
    reasoning: str = ""
    thinking_blocks: tuple[dict[str, Any], ...] = ()
    verbatim: str | None = None
    reasoning_field: str | None = None

    @property
    def spent(self) -> Usage:
        """Tokens this call spent: none when it came from the cache."""
        return Usage() if self.cached else self.usage

    def message(self) -> dict[str, Any]:
        """The reply as an OpenAI-style assistant message, to append to the conversation.

        Claude's signed thinking blocks ride along under ``thinking_blocks`` (the Messages API wants them back
        when tools are used while thinking); the other providers' requests leave that key out.
        """
        message: dict[str, Any] = {"role": "assistant", "content": self.text or None}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
                for call in self.tool_calls
            ]
        if self.thinking_blocks:
            message["thinking_blocks"] = [dict(block) for block in self.thinking_blocks]
        return message

    @property
    def written(self) -> str:
        """The answer as the provider wrote it: ``<think>`` text included, nothing taken out."""
        return self.text if self.verbatim is None else self.verbatim


_TAG = re.compile(r"<(/?)think(?:ing)?>", re.IGNORECASE)


def split_thinking(text: str) -> tuple[str, str]:
    """Split a reply into (answer, thinking): ``<think>...</think>`` blocks as open reasoning models write them.

    A reply may also start inside a block the chat template opened in the prompt (only ``</think>`` appears), or
    stop inside one (cut off by the token limit: only ``<think>`` appears); either way, the thinking is not answer.
    One pass over the tags: linear in the reply however many there are (a reply is model text).
    """
    if "think" not in text.lower():
        return text, ""
    thoughts: list[str] = []
    rest: list[str] = []
    leading = ""  # everything before the last end tag that closes no block: the template opened that block
    position = 0
    opened: int | None = None
    lone = False
    for tag in _TAG.finditer(text):
        closing = tag.group(1) == "/"
        if opened is not None:
            if closing:
                thoughts.append(text[opened : tag.start()].strip())
                opened = None
                position = tag.end()
        elif closing:
            leading = "".join([leading, *rest, text[position : tag.start()]])
            rest = []
            lone = True
            position = tag.end()
        else:
            rest.append(text[position : tag.start()])
            opened = tag.end()
    if opened is not None:
        thoughts.append(text[opened:].strip())
    else:
        rest.append(text[position:])
    if lone:
        thoughts.insert(0, leading.strip())
    if not thoughts:
        return text, ""
    return "".join(rest).strip(), "\n\n".join(t for t in thoughts if t)
