"""Sampling is sampling: a reply sampled at a temperature above 0 is replayed from the cache only within the run that
sampled it (the same step asked again, as when a killed run resumes), never by another run unless asked."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fakellm import FakeLLM

from pau_mcp.llm import LLMClient

USER = [{"role": "user", "content": "Propose an input."}]


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "llm-cache.db"


def _client(make_client: Callable[..., LLMClient], fake: FakeLLM, cache: Path, **options: Any) -> LLMClient:
    return make_client({"OPENAI_BASE_URL": fake.base_url}, cache_path=cache, **options)


def test_a_sampled_reply_is_replayed_only_for_the_same_step_of_the_same_run(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any], cache: Path
) -> None:
    fake.responder = lambda body: f"sample {len(fake.requests)}"
    first_run = _client(make_client, fake, cache, sample_scope="run-a")
    one = run(lambda: first_run.complete("openai/m", USER, temperature=1.0, sample="b001/0"))
    again = run(lambda: first_run.complete("openai/m", USER, temperature=1.0, sample="b001/0"))
    assert again.cached and again.text == one.text  # a resumed run replays its own step
    other_step = run(lambda: first_run.complete("openai/m", USER, temperature=1.0, sample="b001/1"))
    assert not other_step.cached  # the same prompt at another step is another draw
    resumed = _client(make_client, fake, cache, sample_scope="run-a")
    assert run(lambda: resumed.complete("openai/m", USER, temperature=1.0, sample="b001/0")).cached
    second_run = _client(make_client, fake, cache, sample_scope="run-b")
    fresh = run(lambda: second_run.complete("openai/m", USER, temperature=1.0, sample="b001/0"))
    assert not fresh.cached and fresh.text != one.text and fresh.usage.total > 0
    assert len(fake.requests) == 3


def test_without_a_run_a_sampled_reply_is_neither_read_from_nor_written_to_the_cache(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any], cache: Path
) -> None:
    fake.responder = lambda body: "drawn"
    llm = _client(make_client, fake, cache)
    for _ in range(2):
        assert not run(lambda: llm.complete("openai/m", USER, temperature=0.7)).cached
    assert len(fake.requests) == 2
    assert run(lambda: _client(make_client, fake, cache, sample_scope="r").complete(
        "openai/m", USER, temperature=0.7)).cached is False  # fmt: skip


def test_asking_to_share_samples_replays_the_first_sample_any_run_drew(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any], cache: Path
) -> None:
    fake.responder = lambda body: f"draw {len(fake.requests)}"
    run(lambda: _client(make_client, fake, cache, sample_scope="run-a").complete(
        "openai/m", USER, temperature=1.0, sample="b001/0"))  # fmt: skip
    run(lambda: _client(make_client, fake, cache, sample_scope="run-b").complete(
        "openai/m", USER, temperature=1.0, sample="b001/0"))  # fmt: skip
    later = _client(make_client, fake, cache, sample_scope="run-c", share_samples=True)
    replayed = run(lambda: later.complete("openai/m", USER, temperature=1.0, sample="b001/3"))
    assert replayed.cached and replayed.text == "draw 1"
    assert len(fake.requests) == 2


def test_replies_at_temperature_zero_are_replayed_across_runs_as_before(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any], cache: Path
) -> None:
    fake.responder = lambda body: "greedy"
    run(lambda: _client(make_client, fake, cache, sample_scope="run-a").complete("openai/m", USER, temperature=0))
    other = _client(make_client, fake, cache, sample_scope="run-b")
    assert run(lambda: other.complete("openai/m", USER, temperature=0, sample="b001/7")).cached
    assert len(fake.requests) == 1


def test_no_temperature_is_the_providers_default_which_samples_unless_the_model_takes_none(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any], cache: Path
) -> None:
    fake.responder = lambda body: "default"
    llm = _client(make_client, fake, cache)
    run(lambda: llm.complete("openai/gpt-4o-mini", USER))
    assert not run(lambda: llm.complete("openai/gpt-4o-mini", USER)).cached
    # An o-series model takes no temperature: with or without one asked, the request and its caching are the same.
    run(lambda: llm.complete("openai/o4-mini", USER))
    assert run(lambda: llm.complete("openai/o4-mini", USER, temperature=0)).cached
    assert len(fake.requests) == 3


def test_a_seeded_client_sends_its_seed_and_never_replays_a_reply_drawn_under_another_seed(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any], cache: Path
) -> None:
    fake.responder = lambda body: f"greedy {len(fake.requests)}"
    first = _client(make_client, fake, cache, seed=0)
    one = run(lambda: first.complete("openai/m", USER, temperature=0))
    assert run(lambda: first.complete("openai/m", USER, temperature=0)).text == one.text  # its own, from the cache
    other = run(lambda: _client(make_client, fake, cache, seed=1).complete("openai/m", USER, temperature=0))
    unseeded = run(lambda: _client(make_client, fake, cache).complete("openai/m", USER, temperature=0))
    assert not other.cached and not unseeded.cached and len({one.text, other.text, unseeded.text}) == 3
    assert [body.get("seed") for body in fake.requests] == [0, 1, None]


def test_a_seed_is_kept_out_of_a_request_to_an_api_that_takes_none_but_still_keys_the_cache(
    fake: FakeLLM, make_client: Callable[..., LLMClient], run: Callable[..., Any], cache: Path
) -> None:
    fake.responder = lambda body: f"claude {len(fake.requests)}"
    env = {"ANTHROPIC_BASE_URL": fake.base_url, "ANTHROPIC_API_KEY": "test"}
    first = make_client(env, cache_path=cache, seed=0)
    run(lambda: first.complete("anthropic/claude-x", USER, max_tokens=50))
    second = make_client(env, cache_path=cache, seed=1)
    assert not run(lambda: second.complete("anthropic/claude-x", USER, max_tokens=50)).cached
    assert len(fake.requests) == 2 and all("seed" not in body for body in fake.requests)
