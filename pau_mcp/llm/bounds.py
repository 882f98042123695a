"""How much of a model's reply is read: a size cap on every reply's body, decoded, whatever the API or transport.

A model server is trusted with nothing: one that keeps streaming, or sends a compressed body that inflates without
end, must not take the harness's memory with it. The SDK clients are given HTTP clients whose every transport (the
direct one and any proxy's) hands the SDK a body that stops at the cap: past ``max_bytes`` of decoded bytes, reading
raises ``ReplyTooLarge``, which the client layer counts as one failed request and does not retry (the same request
would bring the same flood). Bodies are asked for uncompressed; a server that compresses anyway is decoded here,
under the same cap (gzip and deflate), so a small compressed body cannot inflate past it.

The other bound, a deadline on each attempt's whole reply, is the client layer's (``LLMClient``): a server that
drips a part every few seconds never trips the timeout between parts.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator
from typing import Any

import httpx2

__all__ = ["DEFAULT_DEADLINE_S", "DEFAULT_MAX_REPLY_BYTES", "ReplyTooLarge", "capped_client"]

#: The largest reply body read (decoded): far above a step's reply, even streamed (a few hundred bytes per token
#: of server-sent events) or a thinking model's 16,000 tokens of thought.
DEFAULT_MAX_REPLY_BYTES = 16 * 1024 * 1024
#: The longest one attempt at a reply may take, from sending the request to its last byte.
DEFAULT_DEADLINE_S = 1800.0

_DECODED = ("gzip", "x-gzip", "deflate")


class ReplyTooLarge(Exception):
    """A reply's body went past the size cap (or came in an encoding that cannot be read under it): read no further.

    Attributes:
        hint: What to do about it, for the error the caller shows.
    """

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def _too_large(limit: int) -> ReplyTooLarge:
    return ReplyTooLarge(
        f"the reply was cut at {limit / (1 << 20):g} MiB, the most read of one reply",
        "the server kept sending: check that it honours max_tokens, or raise --llm-max-reply-mb / PAU_LLM_MAX_REPLY_MB",
    )


class _CappedBody(httpx2.AsyncByteStream):
    """A response body that ends in ``ReplyTooLarge`` past ``limit`` decoded bytes; decodes gzip and deflate itself."""

    def __init__(self, inner: Any, limit: int, encoding: str) -> None:
        self._inner = inner
        self._limit = limit
        self._encoding = encoding

    def _decoder(self) -> Any:
        if self._encoding in ("gzip", "x-gzip"):
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        if self._encoding == "deflate":
            return _Deflate()
        return None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        decoder = self._decoder()
        read = 0
        async for chunk in self._inner:
            if decoder is None:
                read += len(chunk)
                if read > self._limit:
                    raise _too_large(self._limit)
                yield chunk
                continue
            data = chunk
            while data:
                # At most what is left under the cap (and one byte more, to know it was passed): a small compressed
                # chunk that would inflate to gigabytes is never inflated past it.
                part = decoder.decompress(data, self._limit - read + 1)
                read += len(part)
                if read > self._limit:
                    raise _too_large(self._limit)
                if part:
                    yield part
                data = decoder.unconsumed_tail
        if decoder is not None:
            rest = decoder.flush()
            if read + len(rest) > self._limit:
                raise _too_large(self._limit)
            if rest:
                yield rest

    async def aclose(self) -> None:
        close = getattr(self._inner, "aclose", None)
        if close is not None:
            await close()


class _Deflate:
    """The ``deflate`` content coding: zlib-wrapped as the RFC says, or raw as some servers send it."""

    def __init__(self) -> None:
        self._decoder: Any = None
        self.unconsumed_tail = b""

    def decompress(self, data: bytes, max_length: int) -> bytes:
        if self._decoder is None:
            wrapped = len(data) >= 2 and (data[0] & 0x0F) == 8 and int.from_bytes(data[:2], "big") % 31 == 0
            self._decoder = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
        part = self._decoder.decompress(data, max_length)
        self.unconsumed_tail = self._decoder.unconsumed_tail
        return bytes(part)

    def flush(self) -> bytes:
        return bytes(self._decoder.flush()) if self._decoder is not None else b""


class _CappedTransport(httpx2.AsyncBaseTransport):
    """A transport whose responses' bodies stop at the cap (see ``_CappedBody``)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["Accept-Encoding"] = "identity"
        response = await self._inner.handle_async_request(request)
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity", *_DECODED):
            await response.aclose()
            raise ReplyTooLarge(
                f"the server sent its reply in the {encoding!r} encoding, which is not read (asked for none)",
                "serve the API uncompressed, or through a proxy that decodes it",
            )
        headers = response.headers
        if encoding in _DECODED:
            headers = httpx2.Headers([(k, v) for k, v in headers.multi_items()
                                      if k.lower() not in ("content-encoding", "content-length")])  # fmt: skip
        return httpx2.Response(
            response.status_code, headers=headers, stream=_CappedBody(response.stream, self._limit, encoding),
            request=request, extensions=response.extensions,
        )  # fmt: skip

    async def aclose(self) -> None:
        await self._inner.aclose()


def capped_client(base: type[httpx2.AsyncClient], limit: int, **options: Any) -> httpx2.AsyncClient:
    """An HTTP client of an SDK's kind (``base``: its default client class) whose every reply body stops at ``limit``
    decoded bytes, through its own transport and any proxy's.

    Args:
        base: The SDK's HTTP client class (``openai.DefaultAioHttpClient``, ``anthropic.DefaultAsyncHttpxClient``).
        limit: The most bytes of one reply read.
        options: The client's own arguments (``timeout``, ...).
    """

    class Capped(base):  # type: ignore[valid-type,misc]
        # httpx builds each transport through these two methods (its own way to choose another transport): every
        # route, the proxies from the environment included, gets the cap.
        def _init_transport(self, *args: Any, **kwargs: Any) -> Any:
            return _CappedTransport(super()._init_transport(*args, **kwargs), limit)

        def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> Any:
            return _CappedTransport(super()._init_proxy_transport(*args, **kwargs), limit)

    return Capped(**options)
