"""The paper agent's action parsing, the agents' request settings and the name they give the function, in real runs
against a real server."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from fakellm import FakeLLM, Reply

from pau_mcp.config import Settings
from pau_mcp.harness import AgentResult, EvalConfig, EvalError, ProbeAgent, RunProgress, run_eval
from pau_mcp.llm import CapabilityTable, Overrides
from pau_mcp.manifests import ManifestStore
from pau_mcp.runstore import EpisodeRow, RunStore
from wasm_runtime import Sandbox, outcomes_match

if TYPE_CHECKING:
    from conftest import OpenEnvironment

METHOD = "builtin/b001"  # one argument
Brain = Callable[[dict[str, Any]], Reply | str]  # a scripted model: the request body in, its reply out


def paper_brain(actions: list[str | Reply]) -> Brain:
    """A scripted model for the paper agent: the action step answers from ``actions`` in turn."""
    queue = list(actions)

    def brain(body: dict[str, Any]) -> Reply | str:
        text = str(body["messages"][-1].get("content") or "")
        if "Propose ONE input" in text:
            return "I will try a small number."
        if "Give the exact input" in text or "INPUT: (" in text and "one line" in text:
            return queue.pop(0) if queue else "INPUT: (0,)"
        if "Update your hypothesis" in text:
            return "HYPOTHESIS: something\nCONCLUDED: NO"
        if "Write your final answer" in text:
            return "DESCRIPTION: scripted"
        return "I do not know."

    return brain


def _run(tmp_path: Path, model: str, agent: str = "paper", budget: int = 3, **config: Any) -> EpisodeRow:
    settings = Settings.from_options(data_dir=tmp_path, db=tmp_path / "runs.db", budget=budget)
    eval_config = EvalConfig(
        run="t", model=model, suite="builtin", agent=agent, budget=budget, methods=(METHOD,), kinds=("direct",),
        concurrency=1, **config,
    )  # fmt: skip

    async def go() -> RunProgress:
        with anyio.fail_after(120):
            return await run_eval(settings, eval_config, None)

    progress = anyio.run(go)
    assert progress.failed == 0, progress.errors
    store = RunStore(settings.db_path)
    (episode,) = store.episodes(store.run_id("t"), with_trajectories=True)
    return episode


def _calls(episode: EpisodeRow) -> list[str]:
    assert episode.trajectory is not None
    return [step["arguments"]["args"] for step in episode.trajectory if step["kind"] == "tool_call"]


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Brain], FakeLLM]]:
    servers: list[FakeLLM] = []

    def serve(responder: Brain) -> FakeLLM:
        server = FakeLLM(responder=responder).start()
        servers.append(server)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        return server

    yield serve
    for server in servers:
        server.stop()


def test_an_input_inside_the_models_thinking_is_never_run(tmp_path: Path, served: Callable[[Brain], FakeLLM]) -> None:
    served(
        paper_brain(
            [
                "<think>INPUT: (666,) would be silly.</think>\nINPUT: (1,)",
                Reply(text="INPUT: (2,)", reasoning="INPUT: (777,) maybe"),
                "INPUT: `(3,)` to see what a larger one gives",
            ]
        )
    )
    episode = _run(tmp_path, "openai/deepseek-r1")
    assert _calls(episode) == ["(1,)", "(2,)", "(3,)"] and episode.trajectory is not None
    thoughts = [step.get("reasoning", "") for step in episode.trajectory if step["kind"] == "model"]
    assert any("666" in t for t in thoughts) and any("777" in t for t in thoughts)  # kept for the record


def test_a_reply_without_an_input_line_falls_back_to_its_last_literal_or_call_line(
    tmp_path: Path, served: Callable[[Brain], FakeLLM]
) -> None:
    served(paper_brain(["I will try four.\n(4,)", "Let me see:\n`test_func(5)`", "INPUT: (6,)"]))
    assert _calls(_run(tmp_path, "openai/m")) == ["(4,)", "(5,)", "(6,)"]


def test_an_input_is_read_from_the_fence_after_its_marker_and_prose_ending_in_input_is_not_a_marker(
    tmp_path: Path, served: Callable[[Brain], FakeLLM]
) -> None:
    served(
        paper_brain(
            [
                "INPUT:\n```python\n(2,)\n```",
                "I will test a larger value, based on the input:\n```python\n(3,)\n```",
                "Input: `test_func(4)` to see the trend",
            ]
        )
    )
    assert _calls(_run(tmp_path, "openai/m")) == ["(2,)", "(3,)", "(4,)"]


def test_a_reply_with_no_usable_input_is_asked_again_once_then_recorded_as_malformed(
    tmp_path: Path, served: Callable[[Brain], FakeLLM]
) -> None:
    fake = served(paper_brain(["Something vague.", "INPUT: (7,)", "Still vague.", "No idea at all.", "INPUT: (8,)"]))
    episode = _run(tmp_path, "openai/m")
    assert _calls(episode) == ["(7,)", "(8,)"]
    reminders = [p for p in fake.prompts() if "only one line" in p]
    assert len(reminders) == 2 and episode.trajectory is not None
    malformed = [s for s in episode.trajectory if s["kind"] == "note" and s.get("event") == "malformed_action"]
    assert len(malformed) == 1 and malformed[0]["reply"] == "No idea at all."


def test_the_action_prompts_example_changes_every_step_so_a_model_that_copies_it_asks_something_new(
    tmp_path: Path, served: Callable[[Brain], FakeLLM]
) -> None:
    shown: list[str] = []

    def copier(body: dict[str, Any]) -> Reply | str:
        text = str(body["messages"][-1].get("content") or "")
        if "Give the exact input" in text:
            (example,) = re.findall(r"for example `INPUT: (.*?)`", text)
            shown.append(example)
            return f"INPUT: {example}"  # what a small model does with the example it is shown
        return paper_brain([])(body)

    served(copier)
    calls = _calls(_run(tmp_path, "openai/m", budget=4))
    assert calls == shown and len(set(calls)) == 4  # never (1,) four times: each copied example was a new input
    b001 = ManifestStore().method(METHOD)
    assert not {example.input for example in b001.examples} & set(calls)  # nor an initial example already shown


def test_a_final_reply_of_json_is_asked_for_again_as_prose(tmp_path: Path, served: Callable[[Brain], FakeLLM]) -> None:
    answers = iter([
        'DESCRIPTION: {"name": "submit", "arguments": {"description": "d"}}', "DESCRIPTION: the product of its digits"
    ])  # fmt: skip

    def brain(body: dict[str, Any]) -> Reply | str:
        text = str(body["messages"][-1].get("content") or "")
        if "Write your final answer" in text or "not a description" in text:
            return next(answers)
        return paper_brain([])(body)

    fake = served(brain)
    _run(tmp_path, "openai/m", budget=1)
    (again,) = [p for p in fake.prompts() if "Your answer was not a description" in p]
    assert "JSON" in again
    store = RunStore(tmp_path / "runs.db")
    (row,) = store.submissions(store.run_id("t"))
    assert row.description == "the product of its digits"


def test_a_reasoning_model_gets_room_to_think_and_no_temperature_from_the_paper_agent(
    tmp_path: Path, served: Callable[[Brain], FakeLLM]
) -> None:
    fake = served(paper_brain(["INPUT: (1,)"]))
    _run(tmp_path, "openai/o4-mini", budget=1)
    assert fake.requests and all("temperature" not in body for body in fake.requests)
    assert all(body["max_completion_tokens"] > 1000 for body in fake.requests)


def test_overrides_replace_the_agents_temperature_token_limit_and_effort(
    tmp_path: Path, served: Callable[[Brain], FakeLLM]
) -> None:
    fake = served(paper_brain(["INPUT: (1,)"]))
    overrides = Overrides(temperature=0.7, max_tokens=123, reasoning_effort="low")
    _run(tmp_path, "openai/gpt-oss-20b", budget=1, overrides=overrides)
    room = CapabilityTable.load().lookup("openai/gpt-oss-20b").thinking_tokens
    assert all((body["temperature"], body["reasoning_effort"]) == (0.7, "low") for body in fake.requests)
    assert {body["max_tokens"] - room for body in fake.requests} == {123, 2 * 123}  # the final answer gets twice


def test_a_run_resumed_with_other_overrides_is_refused(tmp_path: Path, served: Callable[[Brain], FakeLLM]) -> None:
    served(paper_brain(["INPUT: (1,)"]))
    _run(tmp_path, "openai/m", budget=1, overrides=Overrides(temperature=0.7))
    with pytest.raises(EvalError, match="exists with.*temperature"):
        _run(tmp_path, "openai/m", budget=1, overrides=Overrides(temperature=0.2))


def test_the_probe_agent_names_the_methods_own_function_in_its_description_and_code(
    vowels: Path, vowels_environment: OpenEnvironment, sandbox: Sandbox
) -> None:
    async def main() -> AgentResult:
        async with vowels_environment() as env:
            return await ProbeAgent().run(env, "interactive", 3)

    result = anyio.run(main)
    assert "count_vowels('hello') -> 2" in result.description and "test_func" not in result.description
    assert "def count_vowels(s):" in result.code
    (method,) = ManifestStore([vowels]).suite("vowels").methods.values()
    outcomes = sandbox.run(result.code, [case.input for case in method.examples], entry="count_vowels")
    for case, got in zip(method.examples, outcomes, strict=True):
        assert outcomes_match(case.frozen_outcome().outcome(), got), (case.input, got)
