"""``LLMClient``: every model request goes through it: limits, retries, the response cache, costs, and preflight.

At most ``concurrency`` requests are in flight; 429, 5xx, lost connections,
replies that cannot be read (not JSON, cut short) and timeouts are retried
with exponential backoff (honouring Retry-After) while the SDKs' own retries
stay off, so one count and one set of messages hold for every provider; each
retry is logged as it happens (one line, ``pau_mcp.llm``, WARNING). After a
timeout, replies are read as a stream, so a slow but live server is waited for
as long as it keeps sending, up to a deadline for the whole reply; a reply's
body is read up to a size cap (``pau_mcp.llm.bounds``), and a stream that
ends before its finish marker is a reply cut short, retried, never taken for
the answer. Identical requests are answered from a SQLite
cache keyed by everything that shapes the reply; a reply sampled at a
temperature above 0 only within its run (``sample_scope``). Tokens and dollars
are counted from a user-editable price table. Requests a provider refuses for
good (400, 401, 403, 404, a request the server cannot parse, a conversation
too long for the model) raise ``LLMError`` with the provider's own message.
"""

from __future__ import annotations

import json
import logging
import os
import random
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from .anthropic import AnthropicProvider
from .bounds import DEFAULT_DEADLINE_S, DEFAULT_MAX_REPLY_BYTES
from .cache import ResponseCache
from .errors import LLMError
from .models import CapabilityTable, check_effort, parse_model
from .openai import AzureProvider, OpenAIProvider
from .pricing import Pricing, Spend
from .provider import Failure, LoopBound, Provider, Request, without_lone_surrogates
from .replies import Completion, Reply

__all__ = ["LLMClient"]

_log = logging.getLogger("pau_mcp.llm")
_FATAL = {401, 403, 404}
#: Providers whose API takes a sampling ``seed`` in the request body (Anthropic's refuses unknown fields).
_SEEDED_PROVIDERS = frozenset(
    {"openai", "azure"}
)  # every later request would fail the same way: stop a batch instead of recording N errors
_MAX_RETRY_AFTER_S = 300.0
_PROVIDER_TYPES: dict[str, type[Provider]] = {
    "openai": OpenAIProvider,
    "azure": AzureProvider,
    "anthropic": AnthropicProvider,
}


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _counts(prompt: int | None, context: int | None) -> str:
    """``the request holds N tokens and the model's context M: `` when the server said, else nothing."""
    if prompt is None or context is None:
        return ""
    return f"the request holds {prompt:,} tokens and the model's context {context:,}; "


def _stored_reply(stored: Mapping[str, Any]) -> Reply | None:
    """A cached reply, or None when its entry is not one (written by another version, or damaged)."""
    try:
        return Reply.from_json(stored)
    except (KeyError, TypeError, ValueError):
        return None


class LLMClient:
    """Chat completions for every model string, with retries, a concurrency limit, a cache and costs.

    Args:
        env: Where the SDK variables are read (default: the process environment).
        cache_path: The response cache file; None for no cache at all.
        pricing: The price table (default: the packaged one).
        capabilities: What each model accepts (default: the packaged table).
        concurrency: Requests in flight at once, over all models.
        timeout_s: Seconds to wait for one response.
        retries: Further attempts after a 429, a 5xx or a lost connection.
        backoff_s: The first retry's delay when the server names none; doubled each time.
        max_backoff_s: The longest delay between attempts (a server's Retry-After may ask for up to 5 minutes).
        deadline_s: The longest one attempt at a reply may take, first byte to last (a server that drips a part
            every few seconds never trips ``timeout_s``); an attempt past it fails its request, not retried.
        max_reply_bytes: The most bytes of one reply's body read (decoded); a reply past it fails its request, not
            retried.
        sample_scope: Where sampled replies (a temperature above 0 asked for, or none asked of a model that takes
            one: the provider's default samples) may be replayed from the cache: a run's name, so that only the same run asking the same step again gets the
            same sample. None: sampled replies are neither read from nor written to the cache.
        share_samples: Replay sampled replies across runs too, as replies at temperature 0 are (asked for by
            ``--share-samples``): the first sample any run drew for the same request.
        seed: A sampling seed for every request (one epoch of ``eval --epochs``): sent as the request's ``seed``
            where the provider's API takes one (OpenAI's and compatible servers, Azure's), and always part of the
            cache key, so a reply is never replayed under another seed. None: no seed.

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
        capabilities: CapabilityTable | None = None,
        concurrency: int = 8,
        timeout_s: float = 120.0,
        retries: int = 5,
        backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
        sample_scope: str | None = None,
        share_samples: bool = False,
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
        seed: int | None = None,
    ) -> None:
        self.env = dict(os.environ if env is None else env)
        self.cache_path = cache_path
        self.pricing = pricing or Pricing.load()
        self.capabilities = capabilities or CapabilityTable.load()
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.sample_scope = sample_scope
        self.share_samples = share_samples
        self.deadline_s = deadline_s
        self.max_reply_bytes = max_reply_bytes
        self.seed = seed
        self.spend = Spend()
        self._cache: ResponseCache | None = None
        self._providers: dict[str, Provider] = {}
        self._limiter = LoopBound(lambda: anyio.CapacityLimiter(concurrency))
        self._inflight: dict[str, tuple[anyio.Lock, int]] = {}

    @classmethod
    def from_settings(
        cls,
        settings: Any,
        use_cache: bool = True,
        env: Mapping[str, str] | None = None,
        *,
        sample_scope: str | None = None,
        share_samples: bool = False,
        seed: int | None = None,
    ) -> LLMClient:
        """A client configured by ``Settings``: cache in ``DATA_DIR/llm-cache.db`` unless ``use_cache`` is False;
        sampled replies cached within ``sample_scope`` (a run's name), or across runs with ``share_samples``; every
        request under ``seed`` when given."""
        return cls(
            env=env,
            cache_path=settings.data_dir / "llm-cache.db" if use_cache else None,
            pricing=Pricing.load(settings.pricing),
            capabilities=CapabilityTable.load(settings.model_capabilities),
            concurrency=settings.llm_concurrency,
            timeout_s=settings.llm_timeout_s,
            retries=settings.llm_retries,
            sample_scope=sample_scope,
            share_samples=share_samples,
            deadline_s=settings.llm_deadline_s,
            max_reply_bytes=int(settings.llm_max_reply_mb * (1 << 20)),
            seed=seed,
        )

    def provider(self, model: str) -> Provider:
        """The provider behind a model string (its SDK client is made on first request)."""
        name, _ = parse_model(model)
        if name not in self._providers:
            self._providers[name] = _PROVIDER_TYPES[name](self.env, self.timeout_s, self.max_reply_bytes)
        return self._providers[name]

    def check(self, model: str) -> None:
        """Fail now, not at the first request, when a model cannot be used (bad string, no key, SDK missing).

        Makes no request; :meth:`preflight` also asks the server.

        Raises:
            LLMNotConfigured: with what to set.
        """
        self.provider(model).ready()

    async def preflight(self, models: Iterable[str], timeout_s: float = 10.0) -> list[str]:
        """One cheap request per distinct model, before a run: the key, the base URL and the model's name.

        A refused connection fails in about a second, a slow server after ``timeout_s``; nothing is retried.

        Args:
            models: Model strings (repeats are checked once).
            timeout_s: Seconds to wait for each check.

        Returns:
            Warnings, one line each, for models that could not be fully checked (a server that lists no models).

        Raises:
            LLMNotConfigured: a model string, key, setting or SDK is missing.
            LLMError: the server cannot be reached, refuses the key, or does not know the model (one line).
        """
        warnings: list[str] = []
        for model in dict.fromkeys(models):
            provider = self.provider(model)
            provider.ready()
            _, name = parse_model(model)
            try:
                with anyio.fail_after(timeout_s + 5):  # a last bound if an SDK's own timeout does not fire
                    warning = await provider.probe(name, timeout_s)
            except LLMError:
                raise
            except TimeoutError:
                failure = Failure(False, None, f"no answer within {timeout_s:g} s", timeout=True)
                raise self._error(provider, model, failure, 1, preflight=True) from None
            except Exception as exc:
                classified = provider.classify(exc)
                if classified is None:
                    raise
                raise self._error(provider, model, classified, 1, preflight=True) from None
            if warning:
                warnings.append(_one_line(warning))
        return warnings

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
        reasoning_effort: str | None = None,
        extra: Mapping[str, Any] | None = None,
        cache: bool = True,
        sample: str | None = None,
        thinking_room: bool = True,
    ) -> Completion:
        """One chat completion.

        What is sent follows the model's capabilities: a temperature only where the model accepts one, the token
        limit in the field its API wants, with room to think on top for a model that thinks (unless
        ``thinking_room`` is False).

        Args:
            model: ``provider/model``.
            messages: OpenAI-style chat messages (``system``, ``user``, ``assistant`` with ``tool_calls``, ``tool``).
            tools: OpenAI-style tools (``{"type": "function", "function": {"name", "description", "parameters"}}``).
            tool_choice: ``auto``, ``required``, ``none`` or a named function, as in the OpenAI API.
            temperature: Sampling temperature; None leaves the provider's default.
            max_tokens: The longest visible reply; None for the provider's default.
            reasoning_effort: ``none``, ``minimal``, ``low``, ``medium``, ``high``, ``xhigh`` or ``max``; None for
                the model's default.
            extra: More body fields for the provider (``seed``, ...); part of the cache key.
            cache: False to neither read nor write the cache for this call.
            sample: Which sample of its run this request is (an episode and step), when it is sampled (a
                temperature above 0, or none asked of a model that takes one): part of its cache key with the
                client's ``sample_scope``, so a repeated prompt in another step, another episode or another run
                gets a sample of its own.
            thinking_room: False: ``max_tokens`` bounds the whole reply, thinking included, as the reference
                benchmark sends its limits (a thinking model may spend them all on thinking). True: a model that
                thinks gets its ``thinking_tokens`` on top.

        Returns:
            The reply (its thinking in ``reasoning``, never in ``text``), with tokens, cost and whether it came
            from the cache.

        Raises:
            LLMNotConfigured: the model string, key or SDK is missing, or the effort is not one of the above.
            LLMError: the provider refused the request, or kept failing after every retry.
        """
        provider_name, name = parse_model(model)
        provider = self.provider(model)
        if self.seed is not None and provider_name in _SEEDED_PROVIDERS:
            extra = {"seed": self.seed, **(extra or {})}
        request = Request(
            messages=messages,
            tools=tools,
            tool_choice=tool_choice,
            temperature=temperature,
            max_tokens=max_tokens,
            reasoning_effort=check_effort(reasoning_effort),
            extra=extra,
            capabilities=self.capabilities.lookup(model),
            thinking_room=thinking_room,
        )
        provider.ready()
        body = provider.body(name, request)
        where = shared = provider.scope(request)
        if self.seed is not None:  # whether sent or not, a reply drawn under one seed is never another seed's
            where = shared = f"{where} seed {self.seed}"
        # Sampled: a temperature above 0 asked for, or none asked of a model that takes one (the provider's default
        # samples). A model that takes no temperature gets the same request either way, so the caller's 0 decides.
        sampled = temperature > 0 if temperature is not None else request.capabilities.temperature
        if sampled and not self.share_samples:
            # A sample is one draw: replaying it in another run would copy that run instead of sampling again.
            cache = cache and self.sample_scope is not None
            where = f"{where} sample {self.sample_scope}\n{sample or ''}"
        store = self._response_cache() if cache else None
        if store is None:
            reply = await self._attempts(provider, model, name, body, request)
            return self._account(model, reply, cached=False)
        # Canonical bytes: any difference in what is sent is a different key. ASCII escapes keep text that is not
        # valid Unicode (a lone surrogate from a function's output) encodable.
        encoded = json.dumps(body, sort_keys=True, separators=(",", ":")).encode("ascii")
        key = ResponseCache.key(where, encoded)
        async with self._once(key):  # identical requests in flight at once make one call
            stored = store.get(key)
            replayed = _stored_reply(stored) if stored is not None else None
            if replayed is not None:
                return self._account(model, replayed, cached=True)
            if stored is not None:
                store.drop(key)  # a reply that cannot be read is asked again, not replayed into every rerun
            reply = await self._attempts(provider, model, name, body, request)
            store.put(key, model, reply.to_json())
            if where != shared:  # each run's first sample is also on offer to runs that ask to share samples
                store.put_new(ResponseCache.key(shared, encoded), model, reply.to_json())
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

    def _account(self, model: str, reply: Reply, cached: bool) -> Completion:
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
            reasoning=reply.reasoning,
            thinking_blocks=reply.thinking_blocks,
            verbatim=reply.verbatim,
            reasoning_field=reply.reasoning_field,
        )
        self.spend.add(completion)
        return completion

    def _delay(self, attempt: int, failure: Failure) -> float:
        if failure.retry_after is not None:
            return min(failure.retry_after, _MAX_RETRY_AFTER_S)
        # Full jitter: many workers hitting one rate limit must not retry in lockstep.
        ceiling = min(self.max_backoff_s, self.backoff_s * 2**attempt)
        return float(ceiling * (0.5 + random.random() / 2))

    async def _attempts(
        self, provider: Provider, model: str, name: str, body: dict[str, Any], request: Request
    ) -> Reply:
        attempt = 0
        while True:
            try:
                async with self._limiter.get():
                    # The deadline covers the whole reply, not the wait for a free slot: a server that drips a part
                    # every few seconds never trips the timeout between parts, and must not hold a run forever.
                    with anyio.move_on_after(self.deadline_s) as deadline:
                        return await provider.send(name, body, request)
                if deadline.cancelled_caught:
                    raise self._late(model, attempt + 1)
            except LLMError:
                raise
            except UnicodeEncodeError:
                cleaned = without_lone_surrogates(body)
                if cleaned == body:
                    raise
                body = cleaned
            except Exception as exc:
                failure = provider.classify(exc)
                if failure is None:
                    raise
                if not failure.retry or attempt >= self.retries:
                    raise self._error(provider, model, failure, attempt + 1) from None
                delay = self._delay(attempt, failure)
                _log.warning(self._notice(provider, model, failure, attempt, delay))
                if failure.timeout:
                    provider.streaming = True  # a slow but live server: wait for it as long as it keeps sending
                await anyio.sleep(delay)
                attempt += 1

    def _notice(self, provider: Provider, model: str, failure: Failure, attempt: int, delay: float) -> str:
        """The line logged for a retry: what happened, what to do when it persists, and when the next attempt is."""
        if failure.timeout and not provider.streaming:
            what = (
                f"no response within {self.timeout_s:g} s (raise --llm-timeout / PAU_LLM_TIMEOUT for a slow server); "
                "replies are read as a stream from now on, so a slow but live reply is not cut off"
            )
        elif failure.timeout:
            what = f"no further part of the reply within {self.timeout_s:g} s (raise --llm-timeout / PAU_LLM_TIMEOUT)"
        elif failure.status is not None:
            what = f"{failure.status}: {_one_line(failure.message)[:300]}"
        else:
            what = _one_line(failure.message)[:300]
        return f"{model}: {what}; retrying in {delay:.1f} s (attempt {attempt + 2} of {self.retries + 1})"

    def _late(self, model: str, attempts: int) -> LLMError:
        """The error of a reply that did not come whole within the deadline (not retried: it would take as long)."""
        return LLMError(
            f"{model}: the reply did not come whole within {self.deadline_s:g} s, the deadline of one reply "
            f"(attempt {attempts}); raise --llm-deadline / PAU_LLM_DEADLINE for a slow server, or lower --max-tokens",
            model=model, provider_message="deadline",
        )  # fmt: skip

    def _error(
        self, provider: Provider, model: str, failure: Failure, attempts: int, preflight: bool = False
    ) -> LLMError:
        where = provider.shown_base
        said = _one_line(failure.message) or "no message"
        status = failure.status
        tries = "" if preflight else f" after {attempts} attempt{'s' * (attempts != 1)}"
        if failure.connection:
            return LLMError(
                f"{model}: cannot reach {where}{tries} ({said}); check {provider.base_env} and that the server is running",
                model=model, provider_message=said, fatal=True,
            )  # fmt: skip
        if failure.timeout and preflight:
            return LLMError(
                f"{model}: {where} did not answer a model check ({said}); check {provider.base_env} and the server",
                model=model, provider_message=said, fatal=True,
            )  # fmt: skip
        if failure.timeout:
            return LLMError(
                f"{model}: no response within {self.timeout_s:g} s, {attempts} time{'s' * (attempts != 1)} "
                "(raise --llm-timeout, or lower --llm-concurrency if the server is overloaded)",
                model=model, provider_message=said,
            )  # fmt: skip
        if failure.unreadable:
            hint = failure.hint or (
                f"check that {provider.base_env} ({where}) points at the API itself and not a page or proxy in front "
                "of it, or try again later"
            )
            return LLMError(f"{model}: {said}{tries} ({hint})", model=model, status=status, provider_message=said)
        if failure.too_long:
            counts = _counts(failure.prompt_tokens, failure.context_tokens)
            return LLMError(
                f"{model}: {status}: {said} ({counts}{failure.hint})", model=model, status=status,
                provider_message=said, too_long=True, prompt_tokens=failure.prompt_tokens,
                context_tokens=failure.context_tokens,
            )  # fmt: skip
        if failure.hint is not None:
            hint = failure.hint
        elif status == 401:
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
