"""What every provider adapter shares: the request in neutral terms, how failures read, SDK clients per event loop."""

from __future__ import annotations

import abc
import asyncio
import contextlib
import email.utils
import json
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import __version__
from .bounds import DEFAULT_MAX_REPLY_BYTES, ReplyTooLarge
from .models import Capabilities
from .replies import Reply

__all__ = [
    "CONTEXT_HINT", "CUT_STREAM_HINT", "RETRYABLE", "Failure", "Provider", "Request", "UnreadableReply", "excerpt",
    "request_problem", "too_long",
]  # fmt: skip

RETRYABLE = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
_DUMMY_KEY = "pau-mcp-no-key"  # local servers (vLLM, Ollama, llama.cpp) ignore the key; the SDKs insist on one
USER_AGENT = f"pau-mcp/{__version__}"


@dataclass(frozen=True)
class Request:
    """One completion request in provider-neutral (OpenAI chat) terms, with the model's capabilities.

    Attributes:
        messages: OpenAI-style chat messages.
        tools: OpenAI-style function tools.
        tool_choice: ``auto``, ``required``, ``none`` or a named function.
        temperature: Asked temperature (sent only where the model accepts one).
        max_tokens: The longest visible reply; None for the provider's default.
        reasoning_effort: One of the efforts, or None for the model's default.
        extra: More body fields, sent as given.
        capabilities: What the model accepts.
        thinking_room: Add the model's thinking room to ``max_tokens`` when it thinks (False: the limit is the
            whole reply's, thinking included).
    """

    messages: Sequence[Mapping[str, Any]]
    tools: Sequence[Mapping[str, Any]] | None
    tool_choice: str | Mapping[str, Any] | None
    temperature: float | None
    max_tokens: int | None
    reasoning_effort: str | None
    extra: Mapping[str, Any] | None
    capabilities: Capabilities
    thinking_room: bool = True

    @property
    def effort(self) -> str | None:
        """The effort to ask for: the caller's, else the table's default for the model."""
        return self.reasoning_effort if self.reasoning_effort is not None else self.capabilities.reasoning_effort

    @property
    def thinks(self) -> bool:
        """Whether the model will think, so that its token limit needs room for that."""
        return self.capabilities.thinks(self.reasoning_effort)

    @property
    def sent_temperature(self) -> float | None:
        """The temperature to send: none when the model refuses one."""
        return self.temperature if self.capabilities.temperature else None

    def token_limit(self, default: int | None = None) -> int | None:
        """The limit to send: the visible reply's (or ``default``), plus the thinking room when the model thinks
        (and ``thinking_room`` asks for it)."""
        visible = self.max_tokens if self.max_tokens is not None else default
        if visible is None:
            return None
        return visible + self.capabilities.thinking_tokens if self.thinks and self.thinking_room else visible


@dataclass(frozen=True)
class Failure:
    """How a failed attempt ended, in provider-neutral terms.

    Attributes:
        retry: Whether another attempt may succeed.
        status: The HTTP status, when the server answered with one.
        message: What the server (or the connection) said.
        retry_after: Seconds the server asked to wait.
        connection: The server could not be reached at all (refused, unknown host).
        timeout: No answer (or no further part of a streamed one) within the timeout.
        unreadable: The server answered, but what came cannot be read: not JSON, or cut short.
        hint: What the server's words mean for this request, when it refused it for good (cannot parse it, too long
            for the model's context).
        too_long: The request is longer than the model's context.
        prompt_tokens: The request's tokens as the server counted them, when it said (llama-server does).
        context_tokens: The model's context as the server has it, when it said.
    """

    retry: bool
    status: int | None
    message: str
    retry_after: float | None = None
    connection: bool = False
    timeout: bool = False
    unreadable: bool = False
    hint: str | None = None
    too_long: bool = False
    prompt_tokens: int | None = None
    context_tokens: int | None = None


class UnreadableReply(Exception):
    """The server answered, but not with something the API's client can read (a gateway's page, JSON cut short, a
    stream that ended before its reply did): a provider failure like a 5xx, retried by the same rules.

    Attributes:
        hint: What to do when it persists (None: the client layer's advice for replies that cannot be read).
    """

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


#: What an incomplete stream means, for the error once the retries are spent.
CUT_STREAM_HINT = (
    "the server or a proxy ended the stream before the reply was complete: check the server's log (a restart, a "
    "crash, a proxy's read timeout), or try again later"
)


_EXCERPT_CHARS = 160


def excerpt(text: str) -> str:
    """The start of a body for a message: one line, at most 160 characters."""
    start = " ".join(text[: _EXCERPT_CHARS * 4].split())
    return start if len(start) <= _EXCERPT_CHARS else start[: _EXCERPT_CHARS - 3] + "..."


_MESSAGE_READ = 4096  # a provider message is matched against the phrases below only this far: linear and capped
_CONTEXT_PHRASES = (
    "context length", "context size", "context window", "maximum context", "available context",
    "context_length_exceeded", "prompt is too long", "too many tokens",
)  # fmt: skip
_PARSE_PHRASES = (
    "failed to parse", "parse error", "could not parse", "unable to parse", "cannot parse", "invalid json",
    "not valid json", "json.exception",
)  # fmt: skip


CONTEXT_HINT = (
    "the conversation no longer fits the model's context: lower --budget or --max-tokens, or serve the model with a "
    "longer context (llama-server -c, vLLM --max-model-len, Ollama num_ctx)"
)


def too_long(message: str) -> bool:
    """Whether a refusal says the request is longer than the model's context."""
    said = message[:_MESSAGE_READ].lower()
    return any(phrase in said for phrase in _CONTEXT_PHRASES)


def _token_counts(body: Any) -> tuple[int | None, int | None]:
    """``(request tokens, context tokens)`` from an error body that gives them (llama-server's ``n_prompt_tokens``
    and ``n_ctx``), else Nones."""
    inner = body.get("error", body) if isinstance(body, Mapping) else None
    if not isinstance(inner, Mapping):
        return None, None
    counts = [inner.get(key) for key in ("n_prompt_tokens", "n_ctx")]
    found = [
        value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None for value in counts
    ]
    return found[0], found[1]


def request_problem(message: str) -> str | None:
    """What a refusal says about the request itself, when retrying it cannot help (None: nothing of the kind).

    Servers that render a conversation through a chat template (llama-server) answer 500 when they cannot parse it;
    any server may say the conversation is longer than the model's context. The same request fails the same way
    every time, so it is not retried, and the hint says what would help.
    """
    said = message[:_MESSAGE_READ].lower()
    if too_long(message):
        return CONTEXT_HINT
    if any(phrase in said for phrase in _PARSE_PHRASES) and "upstream" not in said and "response" not in said:
        return "the server cannot parse this request, so every attempt would fail the same way"
    return None


def retry_after(headers: Any) -> float | None:
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


def body_message(body: Any, fallback: str) -> str:
    """The human part of an error body: ``{"error": {"message": ...}}`` and its variants."""
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
        if isinstance(body.get("message"), str):
            return str(body["message"])
    if isinstance(body, str) and body:
        return body
    return fallback


def without_lone_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings replaced by U+FFFD, which the SDKs' UTF-8 encoders refuse.

    A hidden function's output may hold one (``chr(0xD800)``); it must not stop the conversation that shows it.
    """
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, Mapping):
        return {key: without_lone_surrogates(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [without_lone_surrogates(item) for item in value]
    return value


def _refused(exc: BaseException) -> bool:
    """True when a "timeout" was really a failed connection (refused, unreachable).

    The openai SDK's aiohttp transport reports a refused connection as a connect timeout; the cause chain says which.
    """
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OSError) and not isinstance(cause, TimeoutError):
            return True
        if type(cause).__name__ == "ClientConnectorError":  # aiohttp's, whatever it wraps
            return True
        cause = cause.__cause__ or cause.__context__
    return False


_CONNECT_ERRORS = frozenset({"ClientConnectorError", "ConnectError"})  # aiohttp's (and subclasses), httpx's


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and all(cause is not other for other in seen) and len(seen) < 32:
        seen.append(cause)
        cause = cause.__cause__ or cause.__context__
    return seen


def _could_not_connect(exc: BaseException) -> bool:
    """True when no connection was made at all (refused, unknown host), as opposed to one that broke mid-reply."""
    for cause in _chain(exc):
        if isinstance(cause, ConnectionRefusedError | socket.gaierror):
            return True
        if any(kind.__name__ in _CONNECT_ERRORS for kind in type(cause).__mro__):
            return True
    return False


def _transport(exc: BaseException) -> bool:
    """True for an HTTP library's own error (httpx, httpcore, aiohttp): raised where the SDK does not wrap it, as
    while reading a stream."""
    return any(type(cause).__module__.split(".")[0].rstrip("0123456789") in ("httpx", "httpcore", "aiohttp")
               for cause in _chain(exc))  # fmt: skip


def classify_sdk_error(exc: BaseException, sdk: Any, base_error: type[BaseException]) -> Failure | None:
    """How an exception of the openai or anthropic SDK reads: both follow the same (Stainless) exception shapes.

    Also what the SDKs let through unwrapped: a body that is not JSON (``json.JSONDecodeError`` from reading it), a
    stream whose connection broke or went quiet (the HTTP library's own errors).
    """
    for cause in _chain(exc):  # wrapped by the SDK when it was raised while reading a whole body
        if isinstance(cause, ReplyTooLarge):
            return Failure(False, None, str(cause), unreadable=True, hint=cause.hint)
        if isinstance(cause, RecursionError):
            return Failure(
                False, None, "the server's reply nests deeper than it can be read", unreadable=True,
                hint="the server sent JSON nested thousands of levels deep: check the server, or try again later",
            )  # fmt: skip
    if isinstance(exc, UnreadableReply):
        return Failure(True, None, str(exc), unreadable=True, hint=exc.hint)
    if isinstance(exc, sdk.APIStatusError):
        status = exc.status_code
        message = body_message(exc.body, exc.message)
        # A rate limit may speak of tokens too ("too many tokens per minute"): only other refusals describe the request.
        hint = request_problem(message) if status not in (408, 409, 429) else None
        retry = (status in RETRYABLE or status >= 500) and hint is None
        overflow = hint == CONTEXT_HINT
        prompt, context = _token_counts(exc.body) if overflow else (None, None)
        return Failure(
            retry, status, message, retry_after(exc.response.headers), hint=hint, too_long=overflow,
            prompt_tokens=prompt, context_tokens=context,
        )  # fmt: skip
    if isinstance(exc, sdk.APITimeoutError) and not _refused(exc):  # before APIConnectionError, its base class
        return Failure(True, None, str(exc) or "timed out", timeout=True)
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__
        said = str(cause.__cause__ or cause) if cause is not None else ""
        said = said or str(exc) or type(exc).__name__
        if _could_not_connect(exc):
            return Failure(True, None, said, connection=True)
        return _broken(said)
    if isinstance(exc, base_error):
        return Failure(False, None, str(exc))
    if isinstance(exc, json.JSONDecodeError):
        return Failure(
            True, None, f"the server's reply is not JSON: {excerpt(exc.doc) or '(an empty body)'!r}", unreadable=True
        )
    if isinstance(exc, UnicodeDecodeError):
        return Failure(True, None, f"the server's reply is not UTF-8 text ({exc.reason})", unreadable=True)
    if isinstance(exc, TimeoutError):
        return Failure(True, None, "no further part of the reply came in time", timeout=True)
    if _transport(exc):
        if any(isinstance(c, TimeoutError) or "Timeout" in type(c).__name__ for c in _chain(exc)):
            return Failure(True, None, "no further part of the reply came in time", timeout=True)
        return _broken(str(exc) or type(exc).__name__)
    return None


def _broken(said: str) -> Failure:
    return Failure(
        True, None, f"the connection broke before the reply was complete ({said})", unreadable=True,
        hint="the server or a proxy closed it mid-reply: check the server's log, or try again later",
    )  # fmt: skip


class LoopBound:
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


def close_orphan(client: Any) -> None:
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


class Provider(abc.ABC):
    """One provider's API through its official SDK: request bodies, replies, failures, and a cheap check.

    Args:
        env: Where the provider's variables are read.
        timeout_s: Seconds to wait for one response (and then for each further part of a streamed one).
        max_reply_bytes: The most bytes of one reply's body read (``pau_mcp.llm.bounds``).
    """

    name = ""
    key_envs: tuple[str, ...] = ()
    base_env = ""
    default_base = ""

    def __init__(
        self, env: Mapping[str, str], timeout_s: float, max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES
    ) -> None:
        self.env = env
        self.timeout_s = timeout_s
        self.max_reply_bytes = max_reply_bytes
        #: Read replies as a stream: set once a reply did not come whole within the timeout, so that a slow but
        #: live server (a model on a CPU) is waited for as long as it keeps sending, and not cut off.
        self.streaming = False
        self.base_url = env.get(self.base_env) or None
        self.api_key = next((env[name] for name in self.key_envs if env.get(name)), None)
        self._client = LoopBound(self._new_client, close_orphan)

    @property
    def shown_base(self) -> str:
        """The base URL requests go to, for messages and the cache key."""
        return self.base_url or self.default_base

    def scope(self, request: Request) -> str:
        """Where a request is answered, for the cache key: provider, base URL and (when not chat) the API."""
        return f"{self.name} {self.shown_base}"

    def _key_for_request(self) -> str | None:
        if self.api_key:
            return self.api_key
        if self.base_url:
            return _DUMMY_KEY
        return None

    def ready(self) -> None:
        """Check, without a request or an event loop, that a request could be made (key, settings, SDK).

        Raises:
            LLMNotConfigured: naming what to set or install.
        """
        self._settings()

    @abc.abstractmethod
    def _settings(self) -> dict[str, Any]:
        """The SDK client's arguments; raises LLMNotConfigured when something is missing."""

    @abc.abstractmethod
    def _new_client(self) -> Any:
        """The SDK's async client (made once per event loop)."""

    @abc.abstractmethod
    def body(self, model: str, request: Request) -> dict[str, Any]:
        """The request as this provider's API takes it (what the cache key is made of)."""

    @abc.abstractmethod
    async def send(self, model: str, body: dict[str, Any], request: Request) -> Reply:
        """One request to the provider: ``body`` from :meth:`body`."""

    @abc.abstractmethod
    async def probe(self, model: str, timeout_s: float) -> str | None:
        """One cheap request that shows the key, the base URL and the model are good.

        Returns:
            A warning when the model could not be checked (the server lists none), else None.

        Raises:
            Exception: the SDK's own, for :meth:`classify`; ``LLMError`` for a model the server does not know.
        """

    @abc.abstractmethod
    def classify(self, exc: BaseException) -> Failure | None:
        """How an SDK exception reads: retryable or not, its status and message; None when it is not the provider's."""

    def __del__(self) -> None:
        # Dropped without aclose() (a test, a script): settle the HTTP session if its loop is gone.
        bound = getattr(self, "_client", None)
        if bound is not None and bound._value is not None and (bound._loop is None or bound._loop.is_closed()):
            with contextlib.suppress(Exception):
                close_orphan(bound._value)

    async def aclose(self) -> None:
        """Close the SDK client."""
        bound, self._client = self._client, LoopBound(self._new_client, close_orphan)
        client = bound._value
        if client is None:
            return
        if bound._loop is not None and bound._loop.is_closed():  # its loop is gone, and its sockets with it
            close_orphan(client)
            return
        with contextlib.suppress(RuntimeError, OSError):
            await client.close()
