"""What a model's replies do to a whole `pau-mcp eval` run against a real `pau-mcp serve`: replies cut short on the
wire, JSON where a description belongs, and tool-call arguments nested far too deep. The model is a scripted
loopback server that misbehaves as a CPU-served model behind a flaky proxy did."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fakellm import FakeLLM, Reply, Responder

from pau_mcp.config import Settings
from pau_mcp.documentation import learned_docs
from pau_mcp.harness import EvalConfig, RunProgress, run_eval
from pau_mcp.runstore import EpisodeRow, RunStore
from pau_mcp.scoring import Scorer

MODEL = "openai/cpu-served"
METHODS = ("builtin/b001",)


def _paper(
    text: str,
    final: str = "DESCRIPTION: returns its argument's sign as -1, 0 or 1",
    reflection: str = "HYPOTHESIS: returns the sign of its argument\nCONCLUDED: NO",
) -> str:
    """The paper agent's model: plans, an input per step (counting up), a reflection, a description."""
    if "Propose ONE input" in text:
        return "To test the function I will try the next small number."
    if "Give the exact input" in text:
        tried = len(re.findall(r"^  test_func", text.split("Your latest experiments:")[1], re.M))
        return f"INPUT: ({tried + 1},)"
    if "Update your hypothesis" in text:
        return reflection
    if "Write your final answer" in text or "not a description" in text:
        return final
    if "Rating:" in text:
        return "Rating: 3"
    return "```python\ndef test_func(x):\n    return 0\n```"


def _settings(tmp_path: Path, **extra: Any) -> Settings:
    return Settings.from_options(data_dir=tmp_path, db=tmp_path / "runs.db", judge_model=MODEL, **extra)


def _run(settings: Settings, agent: str = "paper", run: str = "t", budget: int = 2) -> RunProgress:
    config = EvalConfig(
        run=run, model=MODEL, suite="builtin", agent=agent, budget=budget, methods=METHODS, concurrency=1,
        kinds=("judge", "direct"),
    )  # fmt: skip

    async def go() -> RunProgress:
        scorer = Scorer.from_settings(settings)
        try:
            with anyio.fail_after(240):
                return await run_eval(settings, config, scorer, None)
        finally:
            await scorer.aclose()

    return anyio.run(go)


def _episode(settings: Settings, run: str = "t") -> EpisodeRow:
    store = RunStore(settings.db_path)
    try:
        (episode,) = store.episodes(store.run_id(run), with_trajectories=True)
        return episode
    finally:
        store.close()


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Responder], FakeLLM]]:
    servers: list[FakeLLM] = []

    def serve(responder: Responder) -> FakeLLM:
        server = FakeLLM(responder=responder).start()
        servers.append(server)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        return server

    yield serve
    for server in servers:
        server.stop()


def test_replies_cut_short_on_a_cpu_served_model_are_asked_again_and_only_whole_ones_recorded(
    tmp_path: Path, served: Callable[[Responder], FakeLLM]
) -> None:
    # The first reply comes too late (the client then reads replies as a stream), and every second streamed reply is
    # cut cleanly after its first words, as a proxy in front of a CPU-served model did.
    asked: list[int] = []

    def cpu_model(body: dict[str, Any]) -> Reply:
        asked.append(1)
        text = _paper(str(body["messages"][-1]["content"]))
        if len(asked) == 1:
            return Reply(text=text, delay_s=1.5)
        return Reply(text=text, chunks=6, cut_after=3 if len(asked) % 2 == 0 else None)

    fake = served(cpu_model)
    settings = _settings(tmp_path, llm_timeout_s=1.0, llm_retries=3)
    progress = _run(settings)
    assert (progress.done, progress.failed) == (1, 0)
    episode = _episode(settings)
    assert episode.trajectory is not None
    replies = [step["reply"] for step in episode.trajectory if step["kind"] == "model"]
    wanted = {_paper(prompt) for prompt in fake.prompts()}
    assert replies and all(reply in wanted for reply in replies)  # never "To test the", "HYPOTH" or "INPUT: ("
    calls = [step["arguments"]["args"] for step in episode.trajectory if step["kind"] == "tool_call"]
    assert calls == ["(1,)", "(2,)"]
    submitted = sqlite3.connect(settings.db_path).execute("SELECT description FROM submissions").fetchall()
    assert submitted == [("returns its argument's sign as -1, 0 or 1",)]
    assert sum(1 for body in fake.requests if body.get("stream")) > len(replies)  # the cut ones were asked again


def test_a_final_reply_of_json_is_asked_again_and_never_submitted_exported_or_judged(
    tmp_path: Path, served: Callable[[Responder], FakeLLM]
) -> None:
    call = '{"name": "submit", "arguments": {"description": "returns the sign"}}'
    # No hypothesis to fall back on either: the reflections only say they are not done.
    fake = served(lambda body: _paper(str(body["messages"][-1]["content"]), final=call, reflection="CONCLUDED: NO"))
    settings = _settings(tmp_path)
    progress = _run(settings)
    assert (progress.done, progress.failed) == (1, 0)
    episode = _episode(settings)
    assert episode.submission_id is None and episode.scores == {} and episode.trajectory is not None
    events = [step.get("event") for step in episode.trajectory if step["kind"] == "note"]
    assert events.count("not_a_description") == 1 and events[-1] == "no_description"
    assert sqlite3.connect(settings.db_path).execute("SELECT COUNT(*) FROM submissions").fetchone() == (0,)
    assert not any("Rating:" in prompt and "<reference-" in prompt for prompt in fake.prompts())  # no judge asked
    again = [prompt for prompt in fake.prompts() if "not a description" in prompt]
    assert len(again) == 1 and "JSON" in again[0]
    store = RunStore(settings.db_path)
    docs, skipped = learned_docs(store, "t")
    store.close()
    assert docs == [] and set(skipped) == set(METHODS)


def test_a_tool_call_nested_fifty_thousand_deep_is_one_failed_step_and_reruns_replay_it_from_the_cache(
    tmp_path: Path, served: Callable[[Responder], FakeLLM]
) -> None:
    asked: list[int] = []

    def model(body: dict[str, Any]) -> Reply:
        if not body.get("tools"):
            return Reply(text="Rating: 3")  # the judge
        asked.append(1)
        tool = next(t["function"]["name"] for t in body["tools"] if t["function"]["name"].startswith("fn_"))
        if len(asked) == 1:
            return Reply(tool_calls=[(tool, '{"args": ' + "[" * 50_000 + "]" * 50_000 + "}")])
        if len(asked) == 2:
            return Reply(tool_calls=[(tool, {"args": "(3,)"})])
        return Reply(tool_calls=[("submit", {"method": tool, "description": "Returns the sign of its argument."})])

    fake = served(model)
    settings = _settings(tmp_path)
    progress = _run(settings, agent="tools", run="deep")
    assert (progress.done, progress.failed) == (1, 0)
    episode = _episode(settings, "deep")
    assert episode.state == "done" and episode.queries == 1 and episode.trajectory is not None
    refused = [s for s in episode.trajectory if s["kind"] == "tool_result" and s.get("refused")]
    assert len(refused) == 1 and "nested deeper than 100 levels" in refused[0]["text"]
    # Another run asks the same first request: the cached over-deep reply is replayed, and read as before.
    again = _run(settings, agent="tools", run="deep-again")
    assert (again.done, again.failed) == (1, 0)
    first_turns = [body for body in fake.requests if body.get("tools") and len(body["messages"]) == 2]
    assert len(first_turns) == 1  # the second run's first turn came from the cache
