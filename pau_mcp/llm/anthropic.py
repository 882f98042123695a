"""Claude through the official ``anthropic`` SDK (2.x): the Messages API, extended and adaptive thinking.

The 2.x SDK sends API version 2026-10-21, which refuses ``temperature`` (and
``top_p``, ``top_k``) on every Claude model and took the parameter out of
``messages.create``; what replaced it is ``output_config.effort`` and the
``thinking`` switch. A temperature is sent (in the body) only for a model whose
capability row says it is accepted, e.g. behind a gateway pinned to an older
API version.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..tls import shared_context
from .bounds import capped_client
from .errors import LLMError, LLMNotConfigured
from .provider import (
    _DUMMY_KEY,
    CUT_STREAM_HINT,
    USER_AGENT,
    Failure,
    Provider,
    Request,
    UnreadableReply,
    classify_sdk_error,
    excerpt,
)
from .replies import Reply, ToolCall, Usage, read_json

__all__ = ["AnthropicProvider"]

_DEFAULT_MAX_TOKENS = 4096  # the Messages API requires a limit; the OpenAI API does not
_MIN_BUDGET = 1024  # the smallest extended-thinking budget the API takes
_BUDGET_SCALE = {"minimal": 0.0, "low": 0.25, "medium": 1.0, "high": 2.0, "xhigh": 3.0, "max": 4.0}
_EFFORT = {"minimal": "low"}  # the nearest effort the Messages API accepts
_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length", "stop_sequence": "stop"}


def _sdk() -> Any:
    try:
        import anthropic
    except ImportError:
        raise LLMNotConfigured(
            "anthropic/ models need the anthropic SDK, which is not installed: pip install 'pau-mcp[anthropic]'"
        ) from None
    return anthropic


def _tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    converted = []
    for tool in tools:
        function = tool.get("function", tool)
        converted.append(
            {
                "name": function["name"],
                "description": function.get("description", ""),
                "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
            }
        )
    return converted


def _tool_choice(choice: Any, thinking: bool) -> dict[str, Any] | None:
    if choice is None:
        return None
    if thinking and choice != "none":
        return {"type": "auto"}  # while thinking, the API takes only auto or none
    if isinstance(choice, str):
        return {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}.get(
            choice, {"type": "auto"}
        )
    name = (choice.get("function") or {}).get("name") if isinstance(choice, Mapping) else None
    return {"type": "tool", "name": name} if name else {"type": "auto"}


def _messages(messages: Sequence[Mapping[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """OpenAI-style messages as Anthropic's: system apart, tool calls, results and thinking as content blocks."""
    system: list[str] = []
    out: list[dict[str, Any]] = []

    def append(role: str, blocks: list[dict[str, Any]]) -> None:
        # The Messages API wants user and assistant turns to alternate: merge neighbours of one role.
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for message in messages:
        role = message.get("role")
        content = message.get("content")
        text = (
            content
            if isinstance(content, str)
            else "".join(part.get("text", "") for part in content or () if isinstance(part, Mapping))
        )
        if role == "system":
            system.append(text)
        elif role == "tool":
            append("user", [{"type": "tool_result", "tool_use_id": message.get("tool_call_id", ""), "content": text}])
        elif role == "assistant":
            blocks: list[dict[str, Any]] = [dict(block) for block in message.get("thinking_blocks") or ()]
            if text:
                blocks.append({"type": "text", "text": text})
            for call in message.get("tool_calls") or ():
                function = call.get("function", {})
                arguments = read_json(function.get("arguments") or "{}")
                if not isinstance(arguments, dict):
                    arguments = {}  # the API takes only an object as a tool call's input
                blocks.append(
                    {"type": "tool_use", "id": call.get("id", ""), "name": function.get("name", ""), "input": arguments}
                )
            append("assistant", blocks or [{"type": "text", "text": ""}])
        else:
            append("user", [{"type": "text", "text": text}])
    return ("\n\n".join(system) if system else None), out


async def _streamed(client: Any, body: dict[str, Any]) -> Any:
    """A message read as a stream; one that ends before its stop reason (or before it began) is a reply cut short."""
    try:
        async with client.messages.stream(**body) as stream:
            response = await stream.get_final_message()
    except AssertionError:  # the SDK asserts that the stream began with its message_start event
        raise UnreadableReply("the server's stream ended before its message began", CUT_STREAM_HINT) from None
    if isinstance(response, str | bytes):
        return response
    if getattr(response, "stop_reason", None) is None:
        raise UnreadableReply(
            "the server's stream ended before its message did (no stop reason)", CUT_STREAM_HINT
        )  # a stream cut cleanly mid-way: never taken as the whole reply
    return response


class AnthropicProvider(Provider):
    """``anthropic/<model>``: Claude (``ANTHROPIC_API_KEY`` or ``ANTHROPIC_AUTH_TOKEN``, ``ANTHROPIC_BASE_URL``)."""

    name = "anthropic"
    key_envs = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
    base_env = "ANTHROPIC_BASE_URL"
    default_base = "https://api.anthropic.com"

    def _settings(self) -> dict[str, Any]:
        _sdk()
        settings: dict[str, Any] = {"base_url": self.shown_base}
        if self.env.get("ANTHROPIC_API_KEY"):
            settings["api_key"] = self.env["ANTHROPIC_API_KEY"]
        elif self.env.get("ANTHROPIC_AUTH_TOKEN"):
            settings["auth_token"] = self.env["ANTHROPIC_AUTH_TOKEN"]
        elif self.base_url:
            settings["api_key"] = _DUMMY_KEY
        else:
            raise LLMNotConfigured(
                "no Anthropic API key: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN), or ANTHROPIC_BASE_URL to a "
                "gateway that needs none"
            )
        return settings

    def _new_client(self) -> Any:
        anthropic = _sdk()
        return anthropic.AsyncAnthropic(
            **self._settings(),
            timeout=self.timeout_s,
            max_retries=0,  # the client layer retries, honouring Retry-After, with its own count and messages
            default_headers={"User-Agent": f"{USER_AGENT} anthropic-python/{anthropic.__version__}"},
            # Every reply body stops at the size cap, streamed or not (pau_mcp.llm.bounds).
            http_client=capped_client(
                anthropic.DefaultAsyncHttpxClient, self.max_reply_bytes, timeout=self.timeout_s, verify=shared_context()
            ),
        )

    def body(self, model: str, request: Request) -> dict[str, Any]:
        caps = request.capabilities
        effort = request.effort
        system, messages = _messages(request.messages)
        visible = request.max_tokens or _DEFAULT_MAX_TOKENS
        params: dict[str, Any] = {"model": model, "messages": messages, "max_tokens": visible}
        thinking = request.thinks
        if caps.thinking == "enabled":
            # A budget of thinking tokens must fit inside max_tokens (the API refuses one that does not), so an
            # effort asked of these models keeps its room even where the caller's limit is the whole reply's.
            if thinking and effort is not None:
                budget = max(_MIN_BUDGET, int(caps.thinking_tokens * _BUDGET_SCALE.get(effort, 1.0)))
                params["thinking"] = {"type": "enabled", "budget_tokens": budget}
                params["max_tokens"] = visible + budget
            else:
                thinking = False  # extended thinking is off unless asked for
        elif caps.thinking == "adaptive" or effort is not None:
            if effort == "none":
                params["thinking"] = {"type": "disabled"}
            elif effort is not None:
                params["thinking"] = {"type": "adaptive"}
                params["output_config"] = {"effort": _EFFORT.get(effort, effort)}
            if thinking and request.thinking_room:
                params["max_tokens"] = visible + caps.thinking_tokens
        if system:
            params["system"] = system
        if request.tools:
            params["tools"] = _tools(request.tools)
            asked = params.get("thinking", {}).get("type") in ("enabled", "adaptive")
            choice = _tool_choice(request.tool_choice, asked)
            if choice is not None:
                params["tool_choice"] = choice
        extra = dict(request.extra or {})
        if request.sent_temperature is not None:
            extra["temperature"] = request.sent_temperature  # 2.x has no parameter for it: body only
        if extra:
            params["extra_body"] = extra
        return params

    async def send(self, model: str, body: dict[str, Any], request: Request) -> Reply:
        client = self._client.get()
        if self.streaming:
            response = await _streamed(client, body)
        else:
            response = await client.messages.create(**body)
        if isinstance(response, str | bytes):  # the SDK gives a body that is not JSON as its text
            shown = response if isinstance(response, str) else response.decode("utf-8", "replace")
            raise UnreadableReply(f"the server's reply is not JSON: {excerpt(shown) or '(an empty body)'!r}")
        try:
            return self._reply(response)
        except (AttributeError, TypeError, ValueError):
            raise LLMError(
                f"anthropic/{model}: the server's reply is not a Messages API response; check that "
                f"{self.base_env} points at an Anthropic-compatible endpoint",
                model=f"anthropic/{model}",
            ) from None

    def _reply(self, response: Any) -> Reply:
        texts: list[str] = []
        thoughts: list[str] = []
        calls: list[ToolCall] = []
        keep: list[dict[str, Any]] = []
        for block in response.content or ():
            kind = getattr(block, "type", None)
            if kind == "text":
                texts.append(block.text)
            elif kind == "tool_use":
                calls.append(ToolCall(id=block.id, name=block.name, arguments=json.dumps(block.input)))
            elif kind == "thinking":
                thoughts.append(block.thinking)
                keep.append({"type": "thinking", "thinking": block.thinking, "signature": block.signature})
            elif kind == "redacted_thinking":
                keep.append({"type": "redacted_thinking", "data": block.data})
        usage = response.usage
        return Reply(
            text="".join(texts),
            tool_calls=tuple(calls),
            usage=Usage(int(getattr(usage, "input_tokens", 0) or 0), int(getattr(usage, "output_tokens", 0) or 0)),
            finish_reason=_FINISH.get(response.stop_reason or "", response.stop_reason),
            reasoning="\n\n".join(thoughts),
            thinking_blocks=tuple(keep),
            # What OpenRouter's reasoning field carries for Claude (the reference benchmark asks Claude there).
            reasoning_field="\n\n".join(thoughts) if thoughts else None,
        )

    async def probe(self, model: str, timeout_s: float) -> str | None:
        anthropic = _sdk()
        client = self._client.get()
        try:
            await client.models.retrieve(model, timeout=timeout_s)
            return None
        except anthropic.NotFoundError:
            pass
        try:  # a 404 for the model, or for the whole route (a gateway without one)?
            listed = [entry.id async for entry in client.models.list(limit=100, timeout=timeout_s)]
        except anthropic.NotFoundError:
            return f"anthropic/{model}: {self.shown_base} has no model list, so the name is not checked"
        raise LLMError(
            f"anthropic/{model}: {self.shown_base} does not know a model {model!r}; it lists "
            f"{', '.join(listed[:10]) or 'none'} (check the name after 'anthropic/')",
            model=f"anthropic/{model}",
            status=404,
            fatal=True,
        )

    def classify(self, exc: BaseException) -> Failure | None:
        anthropic = _sdk()
        return classify_sdk_error(exc, anthropic, anthropic.AnthropicError)
