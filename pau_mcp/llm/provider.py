"""What every provider adapter shares: the request in neutral terms, how failures read, SDK clients per event loop."""

from __future__ import annotations

import abc
import asyncio
import contextlib
import email.utils
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import __version__
from .models import Capabilities
from .replies import Reply

__all__ = ["RETRYABLE", "Failure", "Provider", "Request"]

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
    """

    messages: Sequence[Mapping[str, Any]]
    tools: Sequence[Mapping[str, Any]] | None
    tool_choice: str | Mapping[str, Any] | None
    temperature: float | None
    max_tokens: int | None
    reasoning_effort: str | None
    extra: Mapping[str, Any] | None
    capabilities: Capabilities

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
        """The limit to send: the visible reply's (or ``default``), plus the thinking room when the model thinks."""
        visible = self.max_tokens if self.max_tokens is not None else default
        if visible is None:
            return None
        return visible + self.capabilities.thinking_tokens if self.thinks else visible


@dataclass(frozen=True)
class Failure:
    """How a failed attempt ended, in provider-neutral terms."""

    retry: bool
    status: int | None
    message: str
    retry_after: float | None = None
    connection: bool = False
    timeout: bool = False


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
            return inner["message"]
        if isinstance(inner, str):
            return inner
        if isinstance(body.get("message"), str):
            return body["message"]
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


def classify_sdk_error(exc: BaseException, sdk: Any, base_error: type[BaseException]) -> Failure | None:
    """How an exception of the openai or anthropic SDK reads: both follow the same (Stainless) exception shapes."""
    if isinstance(exc, sdk.APIStatusError):
        status = exc.status_code
        message = body_message(exc.body, exc.message)
        return Failure(status in RETRYABLE or status >= 500, status, message, retry_after(exc.response.headers))
    if isinstance(exc, sdk.APITimeoutError) and not _refused(exc):  # before APIConnectionError, its base class
        return Failure(True, None, str(exc) or "timed out", timeout=True)
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__
        said = str(cause.__cause__ or cause) if cause is not None else ""
        return Failure(True, None, said or str(exc) or type(exc).__name__, connection=True)
    if isinstance(exc, base_error):
        return Failure(False, None, str(exc))
    return None


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
        timeout_s: Seconds to wait for one response.
    """

    name = ""
    key_envs: tuple[str, ...] = ()
    base_env = ""
    default_base = ""

    def __init__(self, env: Mapping[str, str], timeout_s: float) -> None:
        self.env = env
        self.timeout_s = timeout_s
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
