"""One thin client layer over the LLM providers: chat completions, tools, retries, a cache and costs.

Models are named ``provider/model``: ``openai/<model>`` speaks the OpenAI
chat completions protocol over HTTP (aiohttp) to any OpenAI-compatible
server (OpenAI, OpenRouter, Together, DeepSeek, vLLM, SGLang, Ollama,
llama.cpp, a LiteLLM proxy: set ``OPENAI_BASE_URL``); ``anthropic/<model>``
goes through the ``anthropic`` SDK, an optional extra imported only when
such a model is used. The usual variables (``OPENAI_BASE_URL``,
``OPENAI_API_KEY``, ``OPENAI_ORG_ID``, ``OPENAI_PROJECT_ID``,
``ANTHROPIC_BASE_URL``, ``ANTHROPIC_API_KEY``) are read here.

Every request goes through ``LLMClient.complete``: at most ``concurrency``
requests in flight, retries with exponential backoff on 429, 5xx and lost
connections (honouring Retry-After), a SQLite response cache keyed by
everything that shapes the reply, and token and cost accounting from a
user-editable price table. Requests the provider refuses for good (400, 401,
403, 404, ...) raise ``LLMError`` with the provider's own message.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import email.utils
import hashlib
import json
import os
import random
import re
import sqlite3
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from . import __version__

__all__ = [
    "DEFAULT_PRICING",
    "PROVIDERS",
    "Completion",
    "LLMClient",
    "LLMError",
    "LLMNotConfigured",
    "Price",
    "Pricing",
    "ResponseCache",
    "Spend",
    "ToolCall",
    "Usage",
    "parse_model",
]

#: The price table used unless ``--pricing`` / the settings name another.
DEFAULT_PRICING = Path(__file__).with_name("pricing.json")

#: The providers a model string may name.
PROVIDERS = ("openai", "anthropic")

_DUMMY_KEY = (
    "pau-mcp-no-key"  # local servers (vLLM, Ollama, llama.cpp) ignore the key; the anthropic SDK insists on one
)
_RETRYABLE = {408, 409, 429, 500, 502, 503, 504, 529}
_FATAL = {401, 403, 404}  # every later request would fail the same way: stop a batch instead of recording N errors
_MAX_RETRY_AFTER_S = 300.0
_ANTHROPIC_MAX_TOKENS = 4096  # the Messages API requires a limit; the OpenAI API does not


class LLMError(RuntimeError):
    """A model request failed for good; the message carries the provider's own words and what to do next.

    Attributes:
        model: The model string (``provider/model``).
        status: The HTTP status, when the provider answered.
        provider_message: What the provider said, verbatim.
        fatal: True when every further request would fail the same way (bad key,
            unknown model, unreachable server): callers scoring a batch stop.
    """

    def __init__(
        self,
        message: str,
        *,
        model: str | None = None,
        status: int | None = None,
        provider_message: str | None = None,
        fatal: bool = False,
    ) -> None:
        super().__init__(message)
        self.model = model
        self.status = status
        self.provider_message = provider_message
        self.fatal = fatal


class LLMNotConfigured(LLMError):
    """A model is missing, malformed, or its provider cannot be used here; the message names the setting."""

    def __init__(self, message: str, *, model: str | None = None) -> None:
        super().__init__(message, model=model, fatal=True)


def parse_model(model: str | None) -> tuple[str, str]:
    """Split ``provider/model`` (only at the first ``/``: ``openai/meta-llama/Llama-3-8B`` names an OpenAI-compatible model).

    Raises:
        LLMNotConfigured: the string names no known provider.
    """
    provider, sep, name = (model or "").partition("/")
    if not sep or not name.strip() or provider not in PROVIDERS:
        raise LLMNotConfigured(
            f"model {model!r} must be written provider/model: openai/<model> for OpenAI or any OpenAI-compatible server "
            "(OpenRouter, vLLM, Ollama, ...: set OPENAI_BASE_URL), or anthropic/<model>",
            model=model,
        )
    return provider, name.strip()


# -- results --------------------------------------------------------------------------------


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
class Completion:
    """One model reply.

    Attributes:
        model: The model string asked for.
        text: The reply's text ("" when it only calls tools).
        tool_calls: Function calls the model asked for.
        usage: Tokens of the request as the provider counted them (also when replayed from the cache).
        cost_usd: What this call cost: 0 when it came from the cache or the model is unpriced.
        priced: False when the price table has no entry for the model.
        cached: True when the reply came from the response cache and no request was made.
        finish_reason: ``stop``, ``tool_calls``, ``length``, ... as the provider said.
    """

    model: str
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    priced: bool = True
    cached: bool = False
    finish_reason: str | None = None

    @property
    def spent(self) -> Usage:
        """Tokens this call spent: none when it came from the cache."""
        return Usage() if self.cached else self.usage

    def message(self) -> dict[str, Any]:
        """The reply as an OpenAI-style assistant message, to append to the conversation."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text or None}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
                for call in self.tool_calls
            ]
        return message


@dataclass
class Spend:
    """What a client's requests have cost so far.

    Attributes:
        calls: Completions returned (including cached ones).
        cached_calls: Of those, answered from the cache.
        usage: Tokens actually spent (cached replies excluded).
        cost_usd: Dollars actually spent.
        unpriced: Models used that have no price.
    """

    calls: int = 0
    cached_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    unpriced: set[str] = field(default_factory=set)

    def add(self, completion: Completion) -> None:
        """Count one completion."""
        self.calls += 1
        self.cached_calls += int(completion.cached)
        self.usage = self.usage + completion.spent
        self.cost_usd += completion.cost_usd
        if not completion.priced:
            self.unpriced.add(completion.model)


# -- prices ---------------------------------------------------------------------------------


class Price(BaseModel):
    """US dollars per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)


class _PriceFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    note: str = ""
    models: dict[str, Price]


_DATED = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


class Pricing:
    """A price table: model string to price per million input and output tokens.

    Args:
        prices: Prices by model string (``openai/gpt-4o-mini``).
        source: Where they came from, for messages.
    """

    def __init__(self, prices: Mapping[str, Price], source: str = "") -> None:
        self.prices = dict(prices)
        self.source = source

    @classmethod
    def load(cls, path: Path | None = None) -> Pricing:
        """Read a price file (the packaged ``pricing.json`` when ``path`` is None).

        Raises:
            LLMNotConfigured: the file is missing or malformed; the message names the file and the field.
        """
        try:
            path = DEFAULT_PRICING if path is None else Path(path).expanduser()
            text = path.read_text(encoding="utf-8")
            source = str(path)
        except OSError as exc:
            raise LLMNotConfigured(f"cannot read the price file {path}: {exc.strerror or exc}; fix --pricing") from None
        try:
            parsed = _PriceFile.model_validate_json(text)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "(file)"
            raise LLMNotConfigured(
                f"{source}: invalid price file at {where}: {first['msg']}; "
                'expected {"models": {"openai/gpt-4o-mini": {"input": 0.15, "output": 0.6}}} (dollars per million tokens)'
            ) from None
        return cls(parsed.models, source)

    def price(self, model: str) -> Price | None:
        """The price of a model: an exact entry, else the entry without a date or ``-latest`` suffix."""
        if model in self.prices:
            return self.prices[model]
        undated = _DATED.sub("", model)
        return self.prices.get(undated)

    def cost(self, model: str, usage: Usage) -> float | None:
        """Dollars for ``usage`` tokens of ``model``; None when the model is unpriced."""
        price = self.price(model)
        if price is None:
            return None
        return (usage.input_tokens * price.input + usage.output_tokens * price.output) / 1_000_000


# -- the response cache ---------------------------------------------------------------------


class ResponseCache:
    """Replies by request, in a SQLite file shared safely by concurrent processes (WAL).

    Args:
        path: The cache file (created with its directory).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT NOT NULL, created_at REAL NOT NULL, response TEXT NOT NULL)"
            )
        except (OSError, sqlite3.Error) as exc:
            raise LLMNotConfigured(
                f"cannot open the LLM response cache {self.path}: {exc}; point --data-dir at a writable directory or pass --no-cache"
            ) from None

    @staticmethod
    def key(where: str, body: bytes) -> str:
        """A digest of everything that shapes a reply: where it is asked (provider, base URL) and the request body."""
        return hashlib.sha256(f"v2 {where}\n".encode() + body).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored reply for a key, or None."""
        with self._lock:
            row = self._conn.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, model: str, response: Mapping[str, Any]) -> None:
        """Store a reply (replacing an older one)."""
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO responses (key, model, created_at, response) VALUES (?, ?, ?, ?)",
                (key, model, time.time(), json.dumps(response)),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._conn.close()


# -- providers ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Reply:
    text: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    finish_reason: str | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> _Reply:
        return cls(
            text=data["text"],
            tool_calls=tuple(ToolCall(**call) for call in data["tool_calls"]),
            usage=Usage(**data["usage"]),
            finish_reason=data.get("finish_reason"),
        )


@dataclass(frozen=True)
class _Failure:
    """How a failed attempt ended, in provider-neutral terms."""

    retry: bool
    status: int | None
    message: str
    retry_after: float | None = None
    connection: bool = False
    timeout: bool = False


def _retry_after(headers: Any) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms``, ``Retry-After`` in seconds, or an HTTP date."""
    if headers is None:
        return None
    try:
        millis = headers.get("retry-after-ms")
        if millis is not None:
            return max(0.0, float(millis) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


def _body_message(body: Any, fallback: str) -> str:
    """The human part of an error body: ``{"error": {"message": ...}}`` and its variants."""
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and isinstance(inner.get("message"), str):
            return inner["message"]
        if isinstance(inner, str):
            return inner
        if isinstance(body.get("message"), str):
            return body["message"]
    if isinstance(body, str) and body:
        return body
    return fallback


class _LoopBound:
    """Objects tied to an event loop (connection pools, limiters): made again when the loop changes.

    A client is often built outside any loop (``feedback_for``) and used in
    the server's; a test may run several loops one after another.
    """

    def __init__(self, make: Callable[[], Any], orphan: Callable[[Any], None] | None = None) -> None:
        self._make = make
        self._orphan = orphan
        self._loop: Any = None
        self._value: Any = None

    def get(self) -> Any:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if self._value is None or loop is not self._loop:
            old, old_loop = self._value, self._loop
            self._loop, self._value = loop, self._make()
            if old is not None and self._orphan is not None and (old_loop is None or old_loop.is_closed()):
                self._orphan(old)
        return self._value


def _close_orphan(client: Any) -> None:
    """Close an SDK client whose event loop has ended, without a loop.

    Its connections died with the loop; closing settles the HTTP session's
    bookkeeping, which aiohttp would otherwise report as unclosed. Closing
    needs no I/O then, so the coroutine finishes in one step; if it would
    wait, it is abandoned.
    """
    closing = client.close()
    try:
        closing.send(None)
    except StopIteration:
        pass
    except Exception:  # noqa: BLE001 - a client that cannot close without its loop is simply dropped
        pass
    finally:
        closing.close()


def _classify_sdk_error(exc: BaseException, sdk: Any, base_error: type[BaseException]) -> _Failure | None:
    """How an exception of the anthropic SDK reads (its exception shapes follow the Stainless SDK pattern)."""
    if isinstance(exc, sdk.APIStatusError):
        status = exc.status_code
        message = _body_message(exc.body, exc.message)
        return _Failure(status in _RETRYABLE or status >= 500, status, message, _retry_after(exc.response.headers))
    if isinstance(exc, sdk.APITimeoutError):  # before APIConnectionError, its base class
        return _Failure(True, None, str(exc) or "timed out", timeout=True)
    if isinstance(exc, sdk.APIConnectionError):
        return _Failure(True, None, str(exc) or type(exc).__name__, connection=True)
    if isinstance(exc, base_error):
        return _Failure(False, None, str(exc))
    return None


class _Provider(abc.ABC):
    """How one provider's SDK is called and how its failures read."""

    name = ""
    key_envs: tuple[str, ...] = ()
    base_env = ""
    default_base = ""

    def __init__(self, env: Mapping[str, str], timeout_s: float) -> None:
        self.env = env
        self.timeout_s = timeout_s
        self.base_url = env.get(self.base_env) or None
        self.api_key = next((env[name] for name in self.key_envs if env.get(name)), None)
        self._client = _LoopBound(self._new_client, _close_orphan)

    @property
    def shown_base(self) -> str:
        return self.base_url or self.default_base

    def _key_for_request(self) -> str | None:
        if self.api_key:
            return self.api_key
        if self.base_url:
            return _DUMMY_KEY
        return None

    def ready(self) -> None:
        """Make the SDK client now, so a missing key or SDK is reported before any work starts."""
        self._client.get()

    @abc.abstractmethod
    def _new_client(self) -> Any:
        """The SDK's async client (made once per event loop)."""

    @abc.abstractmethod
    def body(self, model: str, request: Mapping[str, Any]) -> dict[str, Any]:
        """The request as this provider's API takes it (what the cache key is made of)."""

    @abc.abstractmethod
    async def send(self, model: str, body: dict[str, Any], encoded: bytes) -> _Reply:
        """One request to the provider: ``body`` from :meth:`body`, and the same as canonical JSON."""

    @abc.abstractmethod
    def classify(self, exc: BaseException) -> _Failure | None:
        """How an SDK exception reads: retryable or not, its status and message; None when it is not the provider's."""

    def __del__(self) -> None:
        # Dropped without aclose() (a test, a script): settle the HTTP session if its loop is gone.
        bound = getattr(self, "_client", None)
        if bound is not None and bound._value is not None and (bound._loop is None or bound._loop.is_closed()):
            with contextlib.suppress(Exception):
                _close_orphan(bound._value)

    async def aclose(self) -> None:
        bound, self._client = self._client, _LoopBound(self._new_client, _close_orphan)
        client = bound._value
        if client is None:
            return
        if bound._loop is not None and bound._loop.is_closed():  # its loop is gone, and its sockets with it
            _close_orphan(client)
            return
        with contextlib.suppress(RuntimeError, OSError):
            await client.close()


def _proxy_for(url: str) -> str | None:
    """The proxy the environment names for this URL (``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``, ``NO_PROXY``)."""
    parts = urllib.parse.urlsplit(url)
    if parts.hostname and urllib.request.proxy_bypass(parts.hostname):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(parts.scheme) or proxies.get("all")


class _StatusError(Exception):
    """An HTTP error reply from an OpenAI-compatible server."""

    def __init__(self, status: int, body: Any, headers: Mapping[str, str]) -> None:
        self.status = status
        self.body = body
        self.headers = headers
        super().__init__(f"HTTP {status}")


class _OpenAI(_Provider):
    """The OpenAI chat completions protocol, spoken over aiohttp.

    One JSON POST per completion, read back as plain JSON: the ``openai`` SDK
    built and parsed the same request through three HTTP layers and cost
    about three times the CPU per request, which was a third of the
    harness's work per episode (docs/benchmarks.md).
    """

    name = "openai"
    key_envs = ("OPENAI_API_KEY",)
    base_env = "OPENAI_BASE_URL"
    default_base = "https://api.openai.com/v1"

    def ready(self) -> None:
        # An aiohttp session belongs to a running event loop, and this check may run before any: check the key only.
        self._headers()

    def _headers(self) -> dict[str, str]:
        key = self._key_for_request()
        if key is None:
            raise LLMNotConfigured(
                "no OpenAI API key: set OPENAI_API_KEY, or OPENAI_BASE_URL to an OpenAI-compatible server "
                "(e.g. http://localhost:11434/v1 for Ollama, http://localhost:8000/v1 for vLLM)"
            )
        headers = {
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"pau-mcp/{__version__}",
        }
        for variable, header in (("OPENAI_ORG_ID", "OpenAI-Organization"), ("OPENAI_PROJECT_ID", "OpenAI-Project")):
            if self.env.get(variable):
                headers[header] = self.env[variable]
        return headers

    def _new_client(self) -> Any:
        import aiohttp

        headers = self._headers()
        # aiohttp sets TCP_NODELAY: without it each request to a local server over plain HTTP (vLLM, Ollama,
        # llama.cpp) can wait for the server's delayed ACK (~40 ms). The proxy (HTTPS_PROXY, NO_PROXY, ...) is
        # looked up once here: aiohttp's trust_env looks it up in a thread on every request.
        return aiohttp.ClientSession(
            headers=headers, timeout=aiohttp.ClientTimeout(total=self.timeout_s), proxy=_proxy_for(self.shown_base)
        )

    def body(self, model: str, request: Mapping[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, "messages": request["messages"]}
        if request.get("tools"):
            body["tools"] = request["tools"]
        if request.get("tool_choice") is not None:
            body["tool_choice"] = request["tool_choice"]
        if request.get("temperature") is not None:
            body["temperature"] = request["temperature"]
        if request.get("max_tokens") is not None:
            body["max_tokens"] = request["max_tokens"]
        if request.get("extra"):
            body.update(request["extra"])
        return body

    async def send(self, model: str, body: dict[str, Any], encoded: bytes) -> _Reply:
        url = self.shown_base.rstrip("/") + "/chat/completions"
        async with self._client.get().post(url, data=encoded) as response:
            raw = await response.read()
            if response.status >= 400:
                try:
                    parsed: Any = json.loads(raw)
                except ValueError:
                    parsed = raw.decode("utf-8", "replace").strip()
                raise _StatusError(response.status, parsed, response.headers)
        try:
            data = json.loads(raw)
            choice = data["choices"][0]
            message = choice.get("message") or {}
            calls = tuple(
                ToolCall(
                    id=call.get("id") or f"call_{index}",
                    name=call["function"]["name"],
                    arguments=call["function"].get("arguments") or "{}",
                )
                for index, call in enumerate(message.get("tool_calls") or ())
                if isinstance(call.get("function"), dict)
            )
            usage = data.get("usage") or {}
            return _Reply(
                text=message.get("content") or "",
                tool_calls=calls,
                usage=Usage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)),
                finish_reason=choice.get("finish_reason"),
            )
        except (KeyError, IndexError, TypeError, AttributeError, ValueError):
            raise LLMError(
                f"openai/{model}: the server's reply is not a chat completion (no choices with a message); "
                "check that the base URL points at an OpenAI-compatible /v1 endpoint",
                model=f"openai/{model}",
            ) from None

    def classify(self, exc: BaseException) -> _Failure | None:
        import aiohttp

        if isinstance(exc, _StatusError):
            status = exc.status
            message = _body_message(exc.body, f"HTTP {status}")
            return _Failure(status in _RETRYABLE or status >= 500, status, message, _retry_after(exc.headers))
        if isinstance(exc, TimeoutError):  # aiohttp's own timeouts derive from it too
            return _Failure(True, None, str(exc) or "timed out", timeout=True)
        if isinstance(exc, aiohttp.InvalidURL):
            return _Failure(False, None, f"invalid URL {exc}", connection=True)
        if isinstance(exc, aiohttp.ClientConnectorError):
            return _Failure(True, None, str(exc.os_error) or "could not connect", connection=True)
        if isinstance(exc, aiohttp.ClientError):  # the connection broke mid-request, or the reply was cut short
            return _Failure(True, None, str(exc) or type(exc).__name__, connection=True)
        return None


def _anthropic_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
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


def _anthropic_tool_choice(choice: Any) -> dict[str, Any] | None:
    if choice is None:
        return None
    if isinstance(choice, str):
        return {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}.get(
            choice, {"type": "auto"}
        )
    name = (choice.get("function") or {}).get("name") if isinstance(choice, Mapping) else None
    return {"type": "tool", "name": name} if name else {"type": "auto"}


def _anthropic_messages(messages: Sequence[Mapping[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """OpenAI-style messages as Anthropic's: system apart, tool calls and results as content blocks."""
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
            blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
            for call in message.get("tool_calls") or ():
                function = call.get("function", {})
                try:
                    arguments = json.loads(function.get("arguments") or "{}")
                except ValueError:
                    arguments = {}
                blocks.append(
                    {"type": "tool_use", "id": call.get("id", ""), "name": function.get("name", ""), "input": arguments}
                )
            append("assistant", blocks or [{"type": "text", "text": ""}])
        else:
            append("user", [{"type": "text", "text": text}])
    return ("\n\n".join(system) if system else None), out


class _Anthropic(_Provider):
    name = "anthropic"
    key_envs = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
    base_env = "ANTHROPIC_BASE_URL"
    default_base = "https://api.anthropic.com"

    def _new_client(self) -> Any:
        try:
            import anthropic
        except ImportError:
            raise LLMNotConfigured(
                "anthropic/ models need the anthropic SDK, which is not installed: pip install 'pau-mcp[anthropic]'"
            ) from None
        key = self._key_for_request()
        kwargs: dict[str, Any] = {"timeout": self.timeout_s, "max_retries": 0}
        if key is not None:
            kwargs["api_key"] = key
        if self.base_url:
            kwargs["base_url"] = self.base_url
        try:
            return anthropic.AsyncAnthropic(**kwargs)
        except anthropic.AnthropicError as exc:
            raise LLMNotConfigured(f"cannot set up the Anthropic client ({exc}); set ANTHROPIC_API_KEY") from None

    def body(self, model: str, request: Mapping[str, Any]) -> dict[str, Any]:
        system, messages = _anthropic_messages(request["messages"])
        params: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "max_tokens": request.get("max_tokens") or _ANTHROPIC_MAX_TOKENS,
        }
        if system:
            params["system"] = system
        if request.get("tools"):
            params["tools"] = _anthropic_tools(request["tools"])
        choice = _anthropic_tool_choice(request.get("tool_choice"))
        if choice is not None and request.get("tools"):
            params["tool_choice"] = choice
        if request.get("temperature") is not None:
            params["temperature"] = request["temperature"]
        if request.get("extra"):
            params["extra_body"] = dict(request["extra"])
        return params

    async def send(self, model: str, body: dict[str, Any], encoded: bytes) -> _Reply:
        response = await self._client.get().messages.create(**body)
        texts, calls = [], []
        for block in response.content or ():
            kind = getattr(block, "type", None)
            if kind == "text":
                texts.append(block.text)
            elif kind == "tool_use":
                calls.append(ToolCall(id=block.id, name=block.name, arguments=json.dumps(block.input)))
        usage = response.usage
        finish = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length", "stop_sequence": "stop"}
        return _Reply(
            text="".join(texts),
            tool_calls=tuple(calls),
            usage=Usage(int(getattr(usage, "input_tokens", 0) or 0), int(getattr(usage, "output_tokens", 0) or 0)),
            finish_reason=finish.get(response.stop_reason or "", response.stop_reason),
        )

    def classify(self, exc: BaseException) -> _Failure | None:
        try:
            import anthropic
        except ImportError:
            return None
        return _classify_sdk_error(exc, anthropic, anthropic.AnthropicError)


_PROVIDER_TYPES: dict[str, type[_Provider]] = {"openai": _OpenAI, "anthropic": _Anthropic}


# -- the client -----------------------------------------------------------------------------


class LLMClient:
    """Chat completions for every model string, with retries, a concurrency limit, a cache and costs.

    Args:
        env: Where the SDK variables are read (default: the process environment).
        cache_path: The response cache file; None for no cache at all.
        pricing: The price table (default: the packaged one).
        concurrency: Requests in flight at once, over all models.
        timeout_s: Seconds to wait for one response.
        retries: Further attempts after a 429, a 5xx or a lost connection.
        backoff_s: The first retry's delay when the server names none; doubled each time.
        max_backoff_s: The longest delay between attempts (a server's Retry-After may ask for up to 5 minutes).

    Example:
        >>> client = LLMClient(cache_path=Path("llm-cache.db"))
        >>> reply = await client.complete("openai/gpt-4o-mini", [{"role": "user", "content": "Say hi"}])
        >>> reply.text, reply.usage, reply.cost_usd, reply.cached
    """

    def __init__(
        self,
        *,
        env: Mapping[str, str] | None = None,
        cache_path: Path | None = None,
        pricing: Pricing | None = None,
        concurrency: int = 8,
        timeout_s: float = 120.0,
        retries: int = 5,
        backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
    ) -> None:
        self.env = dict(os.environ if env is None else env)
        self.cache_path = cache_path
        self.pricing = pricing or Pricing.load()
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.spend = Spend()
        self._cache: ResponseCache | None = None
        self._providers: dict[str, _Provider] = {}
        self._limiter = _LoopBound(lambda: anyio.CapacityLimiter(concurrency))
        self._inflight: dict[str, tuple[anyio.Lock, int]] = {}

    @classmethod
    def from_settings(cls, settings: Any, use_cache: bool = True, env: Mapping[str, str] | None = None) -> LLMClient:
        """A client configured by ``Settings``: cache in ``DATA_DIR/llm-cache.db`` unless ``use_cache`` is False."""
        return cls(
            env=env,
            cache_path=settings.data_dir / "llm-cache.db" if use_cache else None,
            pricing=Pricing.load(settings.pricing),
            concurrency=settings.llm_concurrency,
            timeout_s=settings.llm_timeout_s,
            retries=settings.llm_retries,
        )

    def provider(self, model: str) -> _Provider:
        """The provider behind a model string (its SDK client is made on first request)."""
        name, _ = parse_model(model)
        if name not in self._providers:
            self._providers[name] = _PROVIDER_TYPES[name](self.env, self.timeout_s)
        return self._providers[name]

    def check(self, model: str) -> None:
        """Fail now, not at the first request, when a model cannot be used (bad string, no key, SDK missing).

        Raises:
            LLMNotConfigured: with what to set.
        """
        self.provider(model).ready()

    def _response_cache(self) -> ResponseCache | None:
        if self.cache_path is None:
            return None
        if self._cache is None:
            self._cache = ResponseCache(self.cache_path)
        return self._cache

    async def complete(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        extra: Mapping[str, Any] | None = None,
        cache: bool = True,
    ) -> Completion:
        """One chat completion.

        Args:
            model: ``provider/model``.
            messages: OpenAI-style chat messages (``system``, ``user``, ``assistant`` with ``tool_calls``, ``tool``).
            tools: OpenAI-style tools (``{"type": "function", "function": {"name", "description", "parameters"}}``).
            tool_choice: ``auto``, ``required``, ``none`` or a named function, as in the OpenAI API.
            temperature: Sampling temperature; None leaves the provider's default (some models accept no other).
            max_tokens: Longest reply; None for the provider's default.
            extra: More body fields for the provider (``seed``, ``reasoning_effort``, ...); part of the cache key.
            cache: False to neither read nor write the cache for this call.

        Returns:
            The reply, with tokens, cost and whether it came from the cache.

        Raises:
            LLMNotConfigured: the model string, key or SDK is missing.
            LLMError: the provider refused the request, or kept failing after every retry.
        """
        _, name = parse_model(model)
        provider = self.provider(model)
        request = {
            "messages": messages,
            "tools": tools,
            "tool_choice": tool_choice,
            "temperature": temperature,
            "max_tokens": max_tokens,
            "extra": extra,
        }
        body = provider.body(name, request)
        # Encoded once, canonically: the same bytes are the cache key and (for OpenAI-compatible servers) the request.
        # ASCII escapes keep text that is not valid Unicode (a lone surrogate from a function's output) sendable.
        encoded = json.dumps(body, sort_keys=True, separators=(",", ":")).encode("ascii")
        store = self._response_cache() if cache else None
        if store is None:
            reply = await self._attempts(provider, model, name, body, encoded)
            return self._account(model, reply, cached=False)
        key = ResponseCache.key(f"{provider.name} {provider.shown_base}", encoded)
        async with self._once(key):  # identical requests in flight at once make one call
            stored = store.get(key)
            if stored is not None:
                return self._account(model, _Reply.from_json(stored), cached=True)
            reply = await self._attempts(provider, model, name, body, encoded)
            store.put(key, model, reply.to_json())
            return self._account(model, reply, cached=False)

    @asynccontextmanager
    async def _once(self, key: str) -> AsyncIterator[None]:
        lock, users = self._inflight.get(key, (None, 0))
        if lock is None:
            lock = anyio.Lock()
        self._inflight[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._inflight[key]
            if users <= 1:
                del self._inflight[key]
            else:
                self._inflight[key] = (lock, users - 1)

    def _account(self, model: str, reply: _Reply, cached: bool) -> Completion:
        cost = self.pricing.cost(model, reply.usage)
        completion = Completion(
            model=model,
            text=reply.text,
            tool_calls=reply.tool_calls,
            usage=reply.usage,
            cost_usd=0.0 if cached or cost is None else cost,
            priced=cost is not None,
            cached=cached,
            finish_reason=reply.finish_reason,
        )
        self.spend.add(completion)
        return completion

    def _delay(self, attempt: int, failure: _Failure) -> float:
        if failure.retry_after is not None:
            return min(failure.retry_after, _MAX_RETRY_AFTER_S)
        # Full jitter: many workers hitting one rate limit must not retry in lockstep.
        ceiling = min(self.max_backoff_s, self.backoff_s * 2**attempt)
        return ceiling * (0.5 + random.random() / 2)

    async def _attempts(
        self, provider: _Provider, model: str, name: str, body: dict[str, Any], encoded: bytes
    ) -> _Reply:
        attempt = 0
        while True:
            try:
                async with self._limiter.get():
                    return await provider.send(name, body, encoded)
            except LLMError:
                raise
            except Exception as exc:
                failure = provider.classify(exc)
                if failure is None:
                    raise
                if not failure.retry or attempt >= self.retries:
                    raise self._error(provider, model, failure, attempt + 1) from None
                await anyio.sleep(self._delay(attempt, failure))
                attempt += 1

    def _error(self, provider: _Provider, model: str, failure: _Failure, attempts: int) -> LLMError:
        where = provider.shown_base
        said = failure.message.strip() or "no message"
        status = failure.status
        if failure.connection:
            return LLMError(
                f"{model}: cannot reach {where} after {attempts} attempt{'s' * (attempts != 1)} ({said}); "
                f"check {provider.base_env} and that the server is running",
                model=model, provider_message=said, fatal=True,
            )  # fmt: skip
        if failure.timeout:
            return LLMError(
                f"{model}: no response within {self.timeout_s:g} s, {attempts} time{'s' * (attempts != 1)} "
                "(raise --llm-timeout, or lower --llm-concurrency if the server is overloaded)",
                model=model, provider_message=said,
            )  # fmt: skip
        if status == 401:
            hint = f"check {' or '.join(provider.key_envs)}"
        elif status == 403:
            hint = "the key is not allowed to use this model"
        elif status == 404:
            hint = f"check the model name after '{provider.name}/' and the base URL {where}"
        elif failure.retry:
            hint = f"gave up after {attempts} attempts; try again later, lower --llm-concurrency or raise --llm-retries"
        else:
            hint = "the provider refused this request"
        shown = f"{status}: {said}" if status is not None else said
        return LLMError(
            f"{model}: {shown} ({hint})", model=model, status=status, provider_message=said, fatal=status in _FATAL
        )

    async def aclose(self) -> None:
        """Close the SDK clients and the cache file."""
        for provider in self._providers.values():
            await provider.aclose()
        if self._cache is not None:
            self._cache.close()
            self._cache = None
