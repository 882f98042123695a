"""Every HTTP client pau-mcp makes in a process shares one TLS context: making a context reads the whole CA bundle
(about 30 ms of CPU), and a model client is made for every event loop that scores or explores."""

from __future__ import annotations

import functools
from typing import Any

import anyio
import httpcore2
import pytest
from fakellm import FakeLLM

from pau_mcp.harness.client import connection_pool
from pau_mcp.llm import LLMClient
from pau_mcp.tls import shared_context

USER = [{"role": "user", "content": "Say something."}]


@pytest.fixture
def bundle_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry for each TLS context made with the CA bundle from now on (httpx makes them all this way)."""
    reads: list[int] = []
    real = httpcore2.default_ssl_context

    def counted(*args: Any, **options: Any) -> Any:
        reads.append(1)
        return real(*args, **options)

    monkeypatch.setattr(httpcore2, "default_ssl_context", counted)
    shared_context.cache_clear()  # made afresh here, so that the count starts from none
    return reads


def test_model_clients_of_every_event_loop_and_provider_read_the_ca_bundle_once(bundle_reads: list[int]) -> None:
    with FakeLLM() as fake:
        for _ in range(4):
            fake.say("hello")
        env = {"OPENAI_BASE_URL": fake.base_url, "ANTHROPIC_BASE_URL": fake.root_url}
        llm = LLMClient(env=env, backoff_s=0.01)
        try:
            for model in ("openai/m", "anthropic/claude-x", "openai/m", "anthropic/claude-x"):
                # Each in an event loop of its own: the provider makes a new SDK client for each.
                reply = anyio.run(functools.partial(llm.complete, model, USER, temperature=0))
                assert reply.text == "hello"
        finally:
            anyio.run(llm.aclose)
    assert len(bundle_reads) == 1


def test_each_runs_episode_pool_reuses_the_processes_tls_context(bundle_reads: list[int]) -> None:
    pools = [connection_pool() for _ in range(3)]
    assert len(bundle_reads) == 1
    for pool in pools:
        anyio.run(pool.aclose)
