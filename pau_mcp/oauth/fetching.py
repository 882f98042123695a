"""Bounded HTTP requests to the authorization server: a time limit on the whole exchange and a size limit on the
answer, so a slow or huge answer costs one waiting request a few seconds and a few hundred KiB, never the server."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx2

__all__ = ["FetchError", "fetch_json"]


class FetchError(RuntimeError):
    """The authorization server could not be asked (unreachable, too slow, an error status, too large, not JSON).

    Attributes:
        status: The HTTP status it answered with, if it answered with an error status.
        detail: Its OAuth error and description (RFC 6749 section 5.2) with a 400, if it gave them.
    """

    def __init__(self, message: str, status: int | None = None, detail: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


async def fetch_json(
    http: httpx2.AsyncClient, url: str, *, limit: int, timeout_s: float, form: dict[str, str] | None = None,
    auth: tuple[str, str] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """A JSON object from ``url`` (GET, or POST of ``form``), read within ``timeout_s`` and ``limit`` bytes.

    Raises:
        FetchError: one line saying what went wrong.
    """
    try:
        with anyio.fail_after(timeout_s):
            request = http.build_request("POST" if form is not None else "GET", url, data=form)
            basic = httpx2.BasicAuth(*auth) if auth is not None else None
            response = await http.send(request, stream=True, auth=basic)
            try:
                if response.status_code != 200:
                    detail = await _oauth_error(response) if response.status_code == 400 else None
                    raise FetchError(f"{url} answered HTTP {response.status_code}", response.status_code, detail)
                declared = response.headers.get("content-length")
                if declared is not None and declared.isdigit() and int(declared) > limit:
                    raise FetchError(f"{url} answered {int(declared):,} bytes, over the {limit:,} this server reads")
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > limit:
                        raise FetchError(f"{url} answered over {limit:,} bytes, the most this server reads")
            finally:
                await response.aclose()
    except TimeoutError:
        raise FetchError(f"{url} did not answer within {timeout_s:g} s") from None
    except httpx2.HTTPError as exc:
        raise FetchError(f"{url} could not be reached: {type(exc).__name__}: {str(exc)[:200]}") from None
    try:
        data = json.loads(bytes(body))
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise FetchError(f"{url} answered something that is not JSON") from None
    if not isinstance(data, dict):
        raise FetchError(f"{url} answered JSON that is not an object")
    return data


async def _oauth_error(response: httpx2.Response) -> str | None:
    """``error: error_description`` of an OAuth error answer (its first 4 KiB), or None."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > 4096:
            return None
    try:
        data = json.loads(bytes(body))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("error"), str):
        return None
    described = data.get("error_description")
    text = data["error"] + (f": {described}" if isinstance(described, str) else "")
    return "".join(c if c.isprintable() else "?" for c in text[:300])
