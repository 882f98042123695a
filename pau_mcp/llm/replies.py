"""What a model answered: its text, its thinking kept apart, tool calls and tokens, as every provider returns them."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Completion", "Reply", "ToolCall", "Usage", "split_thinking"]


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
        """The arguments as a dict, or None when the model wrote something that is not a JSON object."""
        try:
            value = json.loads(self.arguments or "{}")
        except ValueError:
            return None
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
    """

    text: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    finish_reason: str | None
    reasoning: str = ""
    thinking_blocks: tuple[dict[str, Any], ...] = ()

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


_CLOSE = re.compile(r"</think(?:ing)?>", re.IGNORECASE)
_OPEN = re.compile(r"<think(?:ing)?>", re.IGNORECASE)


def split_thinking(text: str) -> tuple[str, str]:
    """Split a reply into (answer, thinking): ``<think>...</think>`` blocks as open reasoning models write them.

    A reply may also start inside a block the chat template opened in the prompt (only ``</think>`` appears), or
    stop inside one (cut off by the token limit: only ``<think>`` appears); either way, the thinking is not answer.
    """
    if "think" not in text.lower():
        return text, ""
    thoughts, kept, position = [], [], 0
    # Each block from an opening tag to the first closing tag after it; every search starts where the last
    # ended, so the text is read once (a lazy ``<think>(.*?)</think>`` reads to the end from every unclosed tag).
    while (opening := _OPEN.search(text, position)) and (closing := _CLOSE.search(text, opening.end())):
        thoughts.append(text[opening.end() : closing.start()].strip())
        kept.append(text[position : opening.start()])
        position = closing.end()
    rest = "".join([*kept, text[position:]])
    closing = list(_CLOSE.finditer(rest))
    if closing:
        thoughts.insert(0, rest[: closing[-1].start()].strip())
        rest = rest[closing[-1].end() :]
    opening = _OPEN.search(rest)
    if opening:
        thoughts.append(rest[opening.end() :].strip())
        rest = rest[: opening.start()]
    return rest.strip() if thoughts else text, "\n\n".join(t for t in thoughts if t)
