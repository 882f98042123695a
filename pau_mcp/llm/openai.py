"""OpenAI's APIs through the official ``openai`` SDK: chat completions, the Responses API, and Azure OpenAI.

``openai/<model>`` goes to OpenAI or any OpenAI-compatible server (``OPENAI_BASE_URL``);
``azure/<deployment>`` to an Azure OpenAI resource (``AZURE_OPENAI_ENDPOINT``,
``AZURE_OPENAI_API_KEY`` or ``AZURE_OPENAI_AD_TOKEN``, ``OPENAI_API_VERSION``). A
model whose capability row says ``api: responses`` is asked through the Responses
API, whichever of the two it is. The SDK sends over its aiohttp transport
(``DefaultAioHttpClient``) with its own retries off: the client layer retries.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..tls import shared_context
from .bounds import capped_client
from .errors import LLMError, LLMNotConfigured
from .provider import (
    CUT_STREAM_HINT,
    USER_AGENT,
    Failure,
    Provider,
    Request,
    UnreadableReply,
    classify_sdk_error,
    excerpt,
)
from .replies import Reply, ToolCall, Usage, split_thinking

__all__ = ["AzureProvider", "OpenAIProvider"]

_EFFORT = {"max": "xhigh"}  # the nearest effort OpenAI accepts
_NO_LIST = {404, 405, 501}  # a server without a model list: the model cannot be checked, which is no failure


def _sdk() -> Any:
    try:
        import openai
    except ImportError:
        raise LLMNotConfigured(
            "openai/ and azure/ models need the openai SDK, which is not installed: pip install 'openai[aiohttp]'"
        ) from None
    return openai


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or () if isinstance(part, Mapping))


def _readable(response: Any) -> Any:
    """The SDK's typed reply; a body that was not JSON (the SDK then gives its text) is an unreadable reply."""
    if isinstance(response, str | bytes):
        shown = response if isinstance(response, str) else response.decode("utf-8", "replace")
        raise UnreadableReply(f"the server's reply is not JSON: {excerpt(shown) or '(an empty body)'!r}")
    return response


async def _readable_stream(stream: Any) -> Any:
    """The events of a stream; a server that answered with something else (a page, plain JSON) is unreadable."""
    if isinstance(stream, str | bytes):
        _readable(stream)
    async for event in stream:
        yield event


def _arguments(function: Any) -> str:
    """A tool call's arguments as JSON text (some servers send an object where the API says a string)."""
    arguments = function.arguments
    if arguments is None or arguments == "":
        return "{}"
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _chat_messages(messages: Sequence[Mapping[str, Any]], tag: str | None) -> list[Mapping[str, Any]]:
    """The conversation for chat completions: Claude's thinking blocks dropped, a ``/think`` tag where asked."""
    out: list[Mapping[str, Any]] = [
        {k: v for k, v in m.items() if k != "thinking_blocks"} if "thinking_blocks" in m else m for m in messages
    ]
    if tag:
        last = max((i for i, m in enumerate(out) if m.get("role") == "user"), default=None)
        if last is not None:
            out[last] = {**out[last], "content": f"{_text(out[last].get('content'))} {tag}"}
    return out


def _tool_choice_for_responses(choice: Any) -> Any:
    if isinstance(choice, Mapping):
        name = (choice.get("function") or {}).get("name") or choice.get("name")
        return {"type": "function", "name": name} if name else "auto"
    return choice


def _responses_input(messages: Sequence[Mapping[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """Chat messages as Responses API input items; system messages become the instructions."""
    system: list[str] = []
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        text = _text(message.get("content"))
        if role in ("system", "developer"):
            system.append(text)
        elif role == "tool":
            items.append({"type": "function_call_output", "call_id": message.get("tool_call_id", ""), "output": text})
        elif role == "assistant":
            if text:
                items.append({"role": "assistant", "content": text})
            for call in message.get("tool_calls") or ():
                function = call.get("function", {})
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call.get("id", ""),
                        "name": function.get("name", ""),
                        "arguments": function.get("arguments") or "{}",
                    }
                )
        else:
            items.append({"role": "user", "content": text})
    return ("\n\n".join(system) if system else None), items


class OpenAIProvider(Provider):
    """``openai/<model>``: OpenAI or any OpenAI-compatible server."""

    name = "openai"
    key_envs: tuple[str, ...] = ("OPENAI_API_KEY",)
    base_env = "OPENAI_BASE_URL"
    default_base = "https://api.openai.com/v1"

    def scope(self, request: Request) -> str:
        base = super().scope(request)
        # Chat requests keep the key they always had, so replies cached before the Responses API came stay valid.
        return base if request.capabilities.api == "chat" else f"{base} responses"

    def _settings(self) -> dict[str, Any]:
        _sdk()
        key = self._key_for_request()
        if key is None:
            raise LLMNotConfigured(
                "no OpenAI API key: set OPENAI_API_KEY, or OPENAI_BASE_URL to an OpenAI-compatible server "
                "(e.g. http://localhost:11434/v1 for Ollama, http://localhost:8000/v1 for vLLM)"
            )
        return {
            "api_key": key,
            "base_url": self.shown_base,
            "organization": self.env.get("OPENAI_ORG_ID") or None,
            "project": self.env.get("OPENAI_PROJECT_ID") or None,
        }

    def _client_type(self) -> Any:
        return _sdk().AsyncOpenAI

    def _new_client(self) -> Any:
        openai = _sdk()
        settings = self._settings()
        return self._client_type()(
            **settings,
            timeout=self.timeout_s,
            max_retries=0,  # the client layer retries, honouring Retry-After, with its own count and messages
            default_headers={"User-Agent": f"{USER_AGENT} openai-python/{openai.__version__}"},
            # aiohttp sets TCP_NODELAY (without it each request to a local server over plain HTTP can wait ~40 ms
            # for a delayed ACK) and costs less CPU per request than httpx's own transport (docs/benchmarks.md).
            # Every reply body stops at the size cap, streamed or not (pau_mcp.llm.bounds).
            http_client=capped_client(
                openai.DefaultAioHttpClient, self.max_reply_bytes, timeout=self.timeout_s, verify=shared_context()
            ),
        )

    # -- requests -----------------------------------------------------------------------

    def body(self, model: str, request: Request) -> dict[str, Any]:
        if request.capabilities.api == "responses":
            return self._responses_body(model, request)
        caps = request.capabilities
        effort = request.effort
        tag = None
        if effort is not None and caps.thinking_switch == "prompt":
            tag = "/no_think" if effort == "none" else "/think"
        body: dict[str, Any] = {"model": model, "messages": _chat_messages(request.messages, tag)}
        if request.tools:
            body["tools"] = request.tools
        if request.tool_choice is not None:
            body["tool_choice"] = request.tool_choice
        if request.sent_temperature is not None:
            body["temperature"] = request.sent_temperature
        limit = request.token_limit()
        if limit is not None:
            body[caps.token_limit] = limit
        if effort is not None:
            if caps.thinking_switch == "chat_template_kwargs":
                body["chat_template_kwargs"] = {"enable_thinking": effort != "none"}
            elif caps.thinking_switch is None:
                body["reasoning_effort"] = _EFFORT.get(effort, effort)
        if request.extra:
            body.update(request.extra)
        return body

    def _responses_body(self, model: str, request: Request) -> dict[str, Any]:
        instructions, items = _responses_input(request.messages)
        body: dict[str, Any] = {"model": model, "input": items, "store": False}
        if instructions is not None:
            body["instructions"] = instructions
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": tool.get("function", tool)["name"],
                    "description": tool.get("function", tool).get("description", ""),
                    "parameters": tool.get("function", tool).get("parameters") or {"type": "object", "properties": {}},
                    "strict": False,  # MCP tools' schemas are not written for strict mode
                }
                for tool in request.tools
            ]
        if request.tool_choice is not None:
            body["tool_choice"] = _tool_choice_for_responses(request.tool_choice)
        if request.sent_temperature is not None:
            body["temperature"] = request.sent_temperature
        limit = request.token_limit()
        if limit is not None:
            body["max_output_tokens"] = limit
        if request.effort is not None:
            body["reasoning"] = {"effort": _EFFORT.get(request.effort, request.effort)}
        if request.extra:
            body.update(request.extra)
        return body

    async def send(self, model: str, body: dict[str, Any], request: Request) -> Reply:
        # The SDK's documented way to post a body as it is: auth, headers, Azure's deployment routes, errors and
        # the typed reply all stay the SDK's, but not create()'s walk over every message against the parameter
        # types, which cost ~20 ms of CPU on a tools agent's 40-message conversation (docs/benchmarks.md).
        openai = _sdk()
        client = self._client.get()
        responses = request.capabilities.api == "responses"
        if self.streaming:
            return await (self._responses_stream if responses else self._chat_stream)(client, model, body)
        if responses:
            from openai.types.responses import Response

            return self._responses_reply(model, _readable(await client.post("/responses", body=body, cast_to=Response)))
        from openai.types.chat import ChatCompletion

        try:
            response = _readable(await client.post("/chat/completions", body=body, cast_to=ChatCompletion))
        except openai.APIResponseValidationError:
            response = None
        return self._chat_reply(model, response)

    async def _chat_stream(self, client: Any, model: str, body: dict[str, Any]) -> Reply:
        """A chat completion read as it is written (``stream: true``), put together as the whole reply would be."""
        from openai import AsyncStream
        from openai.types.chat import ChatCompletion, ChatCompletionChunk

        streamed = {**body, "stream": True, "stream_options": {"include_usage": True}}
        stream = await client.post(
            "/chat/completions", body=streamed, cast_to=ChatCompletion, stream=True,
            stream_cls=AsyncStream[ChatCompletionChunk],
        )  # fmt: skip
        texts: list[str] = []
        thoughts: list[str] = []
        own_parts: list[str] | None = None  # the reasoning field's parts, when the server sends that field
        calls: dict[int, dict[str, Any]] = {}
        finish: str | None = None
        usage: Any = None
        chunks = 0
        async for chunk in _readable_stream(stream):
            chunks += 1
            usage = getattr(chunk, "usage", None) or usage
            for choice in getattr(chunk, "choices", None) or ():
                delta = choice.delta
                if delta is None:
                    continue
                texts.append(delta.content or "")
                said = getattr(delta, "reasoning_content", None) or getattr(delta, "reasoning", None)
                thoughts.append(said if isinstance(said, str) else "")
                own = getattr(delta, "reasoning", None)
                if isinstance(own, str):
                    own_parts = own_parts if own_parts is not None else []
                    own_parts.append(own)
                for part in delta.tool_calls or ():
                    call = calls.setdefault(part.index, {"id": None, "name": None, "arguments": []})
                    call["id"] = part.id or call["id"]
                    if part.function is not None:
                        call["name"] = part.function.name or call["name"]
                        call["arguments"].append(part.function.arguments or "")
                finish = choice.finish_reason or finish
        if not chunks:
            raise UnreadableReply("the server's stream carried no chat completion chunks", CUT_STREAM_HINT)
        if finish is None:
            # A stream that ends before its finish reason is a reply cut short (a proxy or a restarting server closed
            # it cleanly), never the model's whole answer: retried like any reply that cannot be read.
            shown = sum(len(text) for text in texts)
            raise UnreadableReply(
                f"the server's stream ended before its reply did (no finish reason after {chunks} chunks, "
                f"{shown} characters)", CUT_STREAM_HINT,
            )  # fmt: skip
        made = [
            ToolCall(id=call["id"] or f"call_{index}", name=call["name"], arguments="".join(call["arguments"]) or "{}")
            for index, call in sorted(calls.items())
        ]
        if any(not isinstance(call.name, str) for call in made):
            raise self._not_a_reply(model, "a chat completion (a streamed tool call without a name)")
        written = "".join(texts)
        text, thought = split_thinking(written)
        return Reply(
            text=text,
            tool_calls=tuple(made),
            usage=Usage(int(getattr(usage, "prompt_tokens", 0) or 0), int(getattr(usage, "completion_tokens", 0) or 0)),
            finish_reason=finish,
            reasoning="\n\n".join(part for part in ("".join(thoughts), thought) if part),
            verbatim=written if written != text else None,
            reasoning_field="".join(own_parts) if own_parts is not None else None,
        )

    async def _responses_stream(self, client: Any, model: str, body: dict[str, Any]) -> Reply:
        """A Responses API reply read as it is written; the final event carries the whole response."""
        from openai import AsyncStream
        from openai.types.responses import Response, ResponseStreamEvent

        stream = await client.post(
            "/responses", body={**body, "stream": True}, cast_to=Response, stream=True,
            stream_cls=AsyncStream[ResponseStreamEvent],
        )  # fmt: skip
        final = None
        async for event in _readable_stream(stream):
            if getattr(event, "type", None) in ("response.completed", "response.incomplete", "response.failed"):
                final = event.response
        if final is None:
            raise UnreadableReply("the server's stream ended before its response did", CUT_STREAM_HINT)
        return self._responses_reply(model, final)

    def _not_a_reply(self, model: str, what: str) -> LLMError:
        return LLMError(
            f"{self.name}/{model}: the server's reply is not {what}; "
            "check that the base URL points at an OpenAI-compatible /v1 endpoint",
            model=f"{self.name}/{model}",
        )

    def _chat_reply(self, model: str, response: Any) -> Reply:
        try:
            choice = response.choices[0]
            message = choice.message
            calls = tuple(
                ToolCall(id=call.id or f"call_{index}", name=call.function.name, arguments=_arguments(call.function))
                for index, call in enumerate(message.tool_calls or ())
            )
            if any(not isinstance(call.name, str) for call in calls):
                raise TypeError("a tool call without a name")
            written = message.content or ""
            text, thought = split_thinking(written)
            # DeepSeek and vLLM's reasoning parsers say reasoning_content; OpenRouter, Ollama and recent vLLM say
            # reasoning (the only one the reference benchmark's client reads).
            said = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None)
            own = getattr(message, "reasoning", None)
            usage = response.usage
            return Reply(
                text=text,
                tool_calls=calls,
                usage=Usage(
                    int(getattr(usage, "prompt_tokens", 0) or 0), int(getattr(usage, "completion_tokens", 0) or 0)
                ),
                finish_reason=choice.finish_reason,
                reasoning="\n\n".join(part for part in (said if isinstance(said, str) else "", thought) if part),
                verbatim=written if written != text else None,
                reasoning_field=own if isinstance(own, str) else None,
            )
        except (AttributeError, IndexError, TypeError, KeyError, ValueError):
            raise self._not_a_reply(model, "a chat completion (no choices with a message)") from None

    def _responses_reply(self, model: str, response: Any) -> Reply:
        try:
            texts: list[str] = []
            thoughts: list[str] = []
            calls: list[ToolCall] = []
            for item in response.output or ():
                kind = getattr(item, "type", None)
                if kind == "message":
                    texts.extend(part.text for part in item.content or () if getattr(part, "type", "") == "output_text")
                elif kind == "function_call":
                    calls.append(ToolCall(id=item.call_id, name=item.name, arguments=item.arguments or "{}"))
                elif kind == "reasoning":
                    thoughts.extend(part.text for part in getattr(item, "summary", None) or ())
                    thoughts.extend(part.text for part in getattr(item, "content", None) or ())
            usage = response.usage
            details = getattr(response, "incomplete_details", None)
            if response.status == "incomplete" and getattr(details, "reason", None) == "max_output_tokens":
                finish = "length"
            else:
                finish = "tool_calls" if calls else "stop"
            written = "".join(texts)
            text, thought = split_thinking(written)
            return Reply(
                text=text,
                tool_calls=tuple(calls),
                usage=Usage(int(getattr(usage, "input_tokens", 0) or 0), int(getattr(usage, "output_tokens", 0) or 0)),
                finish_reason=finish,
                reasoning="\n\n".join(t for t in [*thoughts, thought] if t),
                verbatim=written if written != text else None,
            )
        except (AttributeError, TypeError, ValueError):
            raise self._not_a_reply(model, "a Responses API response") from None

    # -- checks and failures ------------------------------------------------------------

    async def probe(self, model: str, timeout_s: float) -> str | None:
        openai = _sdk()
        try:
            page = await self._client.get().models.list(timeout=timeout_s)
        except openai.APIStatusError as exc:
            if exc.status_code not in _NO_LIST:
                raise
            return f"{self.name}/{model}: {self.shown_base} lists no models (HTTP {exc.status_code}), so the name is not checked"
        listed = [entry.id for entry in page.data or ()]
        # Ollama's implicit tag; a gateway's wildcard routes (LiteLLM lists "openai/*").
        if (
            model in listed
            or f"{model}:latest" in listed
            or any(fnmatch.fnmatchcase(model, e) for e in listed if "*" in e)
        ):
            return None
        shown = ", ".join(listed[:10]) + (f", ... ({len(listed)} in all)" if len(listed) > 10 else "")
        raise LLMError(
            f"{self.name}/{model}: {self.shown_base} does not serve a model {model!r}; it lists {shown or 'none'} "
            f"(check the name after '{self.name}/' and {self.base_env})",
            model=f"{self.name}/{model}",
            status=404,
            fatal=True,
        )

    def classify(self, exc: BaseException) -> Failure | None:
        openai = _sdk()
        return classify_sdk_error(exc, openai, openai.OpenAIError)


class AzureProvider(OpenAIProvider):
    """``azure/<deployment>``: an Azure OpenAI resource, with the variables the SDK reads."""

    name = "azure"
    key_envs = ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN")
    base_env = "AZURE_OPENAI_ENDPOINT"
    default_base = ""

    def _settings(self) -> dict[str, Any]:
        _sdk()
        missing = [name for name in ("AZURE_OPENAI_ENDPOINT", "OPENAI_API_VERSION") if not self.env.get(name)]
        if not self.api_key:
            missing.append("AZURE_OPENAI_API_KEY (or AZURE_OPENAI_AD_TOKEN)")
        if missing:
            raise LLMNotConfigured(
                f"azure/ models need {', '.join(missing)}: the resource's endpoint (https://<resource>.openai.azure.com), "
                "its key and the API version (e.g. 2024-10-21)"
            )
        settings: dict[str, Any] = {
            "azure_endpoint": self.env["AZURE_OPENAI_ENDPOINT"],
            "api_version": self.env["OPENAI_API_VERSION"],
            "organization": self.env.get("OPENAI_ORG_ID") or None,
            "project": self.env.get("OPENAI_PROJECT_ID") or None,
        }
        if self.env.get("AZURE_OPENAI_API_KEY"):
            settings["api_key"] = self.env["AZURE_OPENAI_API_KEY"]
        else:
            settings["azure_ad_token"] = self.env["AZURE_OPENAI_AD_TOKEN"]
        return settings

    def _client_type(self) -> Any:
        return _sdk().AsyncAzureOpenAI

    async def probe(self, model: str, timeout_s: float) -> str | None:
        # The resource lists base models, not deployments: this shows the endpoint, key and version are good.
        await self._client.get().models.list(timeout=timeout_s)
        return f"azure/{model}: Azure lists models, not deployments, so the deployment name is not checked"
