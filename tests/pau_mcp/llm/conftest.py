"""Fixtures for the LLM client layer: a scripted loopback server and clients that are closed after each test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest
from fakellm import FakeLLM

from pau_mcp.llm import LLMClient


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture
def make_client() -> Iterator[Callable[..., LLMClient]]:
    """Clients made by a test, closed afterwards as the commands close theirs."""
    made: list[LLMClient] = []

    def make(env: dict[str, str], **options: Any) -> LLMClient:
        options.setdefault("backoff_s", 0.01)
        client = LLMClient(env=env, **options)
        made.append(client)
        return client

    yield make
    while made:
        anyio.run(made.pop().aclose)


def _run(step: Callable[[], Any], seconds: float = 60) -> Any:
    async def bounded() -> Any:
        with anyio.fail_after(seconds):
            return await step()

    return anyio.run(bounded)


@pytest.fixture
def run() -> Callable[..., Any]:
    """``run(coroutine_function, seconds=60)``: run it in a fresh event loop, failing after ``seconds`` (a hang, not
    slowness: a busy machine must not fail a test)."""
    return _run
