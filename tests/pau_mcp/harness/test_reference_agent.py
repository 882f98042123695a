"""`--protocol reference`: the paper agent runs the reference's loop with the imported wording, against a real server.

The reference's prompts come from a fake checkout (tests/fakereference.py: its layout and placeholders,
none of its text); the model is a scripted loopback server.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from fakellm import FakeLLM, Reply
from fakereference import write_checkout

from pau_mcp.config import Settings
from pau_mcp.harness import AgentResult, Environment, EvalConfig, EvalError, RunProgress, run_eval
from pau_mcp.harness.reference_agent import ReferenceAgent, reference_input
from pau_mcp.llm import LLMClient
from pau_mcp.manifests import ManifestStore
from pau_mcp.prompts import import_reference
from pau_mcp.protocol import load_protocol
from pau_mcp.runstore import EpisodeRow, RunStore
from pau_mcp.scoring import Scorer

if TYPE_CHECKING:
    from conftest import OpenEnvironment

METHOD = "builtin/b001"  # one integer argument: the product of its non-zero digits
MODEL = "openai/fake-model"
ACTIONS = ["Suggested Input: (2,)", "I would like to see what happens with (5,) next", "no idea at all"]


def brain(body: dict[str, Any]) -> Reply | str:
    text = str(body["messages"][-1]["content"])
    if text.startswith("\nREASON"):
        return "Try a small number. [STOP] anything after the stop marker is dropped"
    if text.startswith("\nACT"):
        return ACTIONS[text.count("=> Output:") - 2] if text.count("=> Output:") - 2 < len(ACTIONS) else "none"
    if text.startswith("\nREFLECT"):
        if text.count("=> Output:") < 4:
            return "NO\nSummary: It Might Double"
        return "YES\nSummary: Returns The Product Of Its Digits\n[STOP]"
    if text.startswith("\nINCONTEXT"):
        return "It Multiplies Digits. [STOP] extra"
    if text.startswith("\nJUDGE"):
        return "Close enough; Rating: 4 and later rating: 2 [STOP]"
    if text.startswith("\nCODER"):
        return "Reasoning: short\nCode:\n```python\ndef test_func(arg0):\n    return arg0\n```\n[STOP]"
    return "unexpected"


@pytest.fixture
def reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    import_reference(write_checkout(tmp_path / "checkout"), tmp_path)
    with FakeLLM(responder=brain) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        yield server


def _run(tmp_path: Path, mode: str = "interactive") -> tuple[EpisodeRow, dict[str, Any]]:
    settings = Settings.from_options(
        data_dir=tmp_path, db=tmp_path / "runs.db", judge_model=MODEL, coder_model=MODEL, protocol="reference"
    )
    config = EvalConfig(
        run="ref", model=MODEL, suite="builtin", agent="paper", mode=mode, methods=(METHOD,), concurrency=1,
        protocol="reference",
    )  # fmt: skip

    async def go() -> RunProgress:
        scorer = Scorer.from_settings(settings)
        try:
            with anyio.fail_after(120):
                return await run_eval(settings, config, scorer, None)
        finally:
            await scorer.aclose()

    progress = anyio.run(go)
    assert progress.failed == 0, progress.errors
    store = RunStore(settings.db_path)
    run_id = store.run_id("ref")
    (episode,) = store.episodes(run_id, with_trajectories=True)
    return episode, store.run_config(run_id)


def test_the_agent_sends_the_imported_prompts_alone_with_the_references_token_limit_and_no_temperature(
    tmp_path: Path, reference: FakeLLM
) -> None:
    _run(tmp_path)
    agent = [b for b in reference.requests if not b["messages"][0]["content"].startswith(("\nJUDGE", "\nCODER"))]
    assert len(agent) == 9  # three iterations of reason, act, reflect; no final-description request
    for body in agent:
        assert [m["role"] for m in body["messages"]] == ["user"]
        assert body.get("max_tokens", body.get("max_completion_tokens")) == 300
        assert "temperature" not in body
    first = agent[0]["messages"][0]["content"]
    assert first == (
        "\nREASON header=def test_func(arg0): \nprev=[\n  Input: (234,) => Output: 24, Error: None\n"
        "  Input: (57,) => Output: 35, Error: None\n]\nhyp=Not yet formed\nReasoning:"
    )


def test_inputs_are_read_by_the_references_rules_and_the_reflection_sees_only_the_input_it_tried(
    tmp_path: Path, reference: FakeLLM
) -> None:
    episode, _ = _run(tmp_path)
    assert episode.trajectory is not None
    calls = [s["arguments"]["args"] for s in episode.trajectory if s["kind"] == "tool_call"]
    assert calls == ["(2,)", "(5,)"]  # an "input:" line, then the first "(...)" of a line; the third gave none
    assert any(s.get("event") == "malformed_action" for s in episode.trajectory if s["kind"] == "note")
    reflections = [
        b["messages"][0]["content"] for b in reference.requests if b["messages"][0]["content"].startswith("\nREFLECT")
    ]
    assert "why=Try a small number.\nlast=Input: (2,)\n" in reflections[0]
    assert "Input: (2,) => Output" not in reflections[0]  # its list is from before the call, as the reference's is
    assert "Input: (2,) => Output: 2, Error: None" in reflections[1]
    assert "last=None => Output: None, Error: the input is not a valid Python literal" in reflections[2]


def test_the_last_hypothesis_lower_cased_is_the_description_and_scores_follow_the_reference(
    tmp_path: Path, reference: FakeLLM
) -> None:
    episode, config = _run(tmp_path)
    assert episode.concluded == 1
    submitted = RunStore(tmp_path / "runs.db").submissions(RunStore(tmp_path / "runs.db").run_id("ref"))
    assert submitted[0].description == "returns the product of its digits"
    judge = episode.scores["judge"]
    assert judge.value == 4.0 and judge.detail["protocol"] == "reference"  # the first rating before [STOP]
    (judge_request,) = [b for b in reference.requests if b["messages"][0]["content"].startswith("\nJUDGE")]
    gold = ManifestStore().method(METHOD).description
    assert judge_request["messages"] == [
        {
            "role": "user",
            "content": f"\nJUDGE true={gold}\nhyp=returns the product of its digits\nExplanation (very short):",
        }
    ]
    (coder_request,) = [b for b in reference.requests if b["messages"][0]["content"].startswith("\nCODER")]
    examples = coder_request["messages"][0]["content"].split("examples=")[1]
    # The examples as the reference stores them: each part's repr, the initial examples' outputs included.
    assert examples.startswith("[\n  Input: '(234,)' => Output: '24', Error: None\n")
    assert "  Input: '(2,)' => Output: 2, Error: None\n" in examples
    assert "  Input: None => Output: None, Error: 'the input is not a valid Python literal'\n" in examples
    assert episode.scores["codematch"].detail["protocol"] == "reference"
    assert config["protocol"] == "reference"
    assert config["prompts"] == load_protocol("reference", tmp_path).prompts.digest


def test_in_context_the_agent_asks_once_and_its_reply_is_the_description(tmp_path: Path, reference: FakeLLM) -> None:
    episode, _ = _run(tmp_path, mode="incontext")
    agent = [b for b in reference.requests if b["messages"][0]["content"].startswith("\nINCONTEXT")]
    assert len(agent) == 1
    assert agent[0]["messages"][0]["content"] == (
        "\nINCONTEXT header=def test_func(arg0):\nprev=[\n  Input: (234,) => Output: 24, Error: None\n"
        "  Input: (57,) => Output: 35, Error: None\n]\nDescription: "
    )
    store = RunStore(tmp_path / "runs.db")
    assert store.submissions(store.run_id("ref"))[0].description == "It Multiplies Digits."
    assert episode.queries == 0


def test_a_run_and_its_scorer_on_different_protocols_is_refused(tmp_path: Path, reference: FakeLLM) -> None:
    settings = Settings.from_options(data_dir=tmp_path, db=tmp_path / "runs.db", coder_model=MODEL)
    config = EvalConfig(run="mixed", model=MODEL, suite="builtin", methods=(METHOD,), protocol="reference")

    async def go() -> None:
        scorer = Scorer.from_settings(settings)  # this project's protocol
        try:
            await run_eval(settings, config, scorer, None)
        finally:
            await scorer.aclose()

    with pytest.raises(EvalError, match="the scorer follows the pau-mcp protocol and the run reference"):
        anyio.run(go)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Suggested Input: (1, 2)", "(1, 2)"),
        ("Suggested Input:\n(3, 4) to see", "(3, 4)"),  # an empty input: line is passed over
        ("my input: [1] and your input: [2]\nInput: (9,)", "(9,)"),  # two 'input:' on one line: not read there
        ("try f(1) and g(2) then", "(1) and g(2)"),  # first '(' to the last ')' of the line
        ("nothing to run", None),
    ],
)
def test_an_action_is_read_as_the_reference_reads_it(reply: str, expected: str | None) -> None:
    assert reference_input(reply) == expected


def test_a_budget_the_server_says_is_spent_ends_the_loop_and_the_refused_call_is_no_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, vowels_environment: OpenEnvironment
) -> None:
    import_reference(write_checkout(tmp_path / "checkout"), tmp_path)

    def steady(body: dict[str, Any]) -> str:
        text = str(body["messages"][-1]["content"])
        if text.startswith("\nACT"):
            return "input: ('aeiou',)"
        return "NO\nSummary: counts vowels" if text.startswith("\nREFLECT") else "Try a word."

    with FakeLLM(responder=steady) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        agent = ReferenceAgent(llm=LLMClient(), model=MODEL, prompts=load_protocol("reference", tmp_path).prompts)

        async def main() -> tuple[Environment, AgentResult]:
            async with vowels_environment() as env:  # the server allows 3 calls; the loop would make 6
                return env, await agent.run(env, "interactive", 6)

        env, result = anyio.run(main)
        asked = [b["messages"][0]["content"].split(" ", 1)[0] for b in fake.requests]
    assert [o.status for o in env.observations] == ["ok", "ok", "ok", "over_budget"]
    assert asked == ["\nREASON", "\nACT", "\nREFLECT"] * 3 + ["\nREASON", "\nACT"]  # no reflection on a refusal
    assert result.examples is not None and len(result.examples) == 3 + 3  # the initial examples and the calls that ran
    assert result.description == "counts vowels" and not result.concluded


THINKING = "openai/Qwen3-8B"  # thinks by default: this project gives it 8,192 tokens of room on top of each limit


def thinking_brain(body: dict[str, Any]) -> Reply | str:
    """A thinking model: its thinking comes back as the reasoning field (OpenRouter's, recent vLLM's) or as
    ``<think>`` text, and says other things than its answer."""
    text = str(body["messages"][-1]["content"])
    calls = text.count("=> Output:") - 2
    if text.startswith("\nREASON"):
        return Reply(text="Try two.", reasoning="small numbers first", reasoning_as="reasoning")
    if text.startswith("\nACT") and calls == 0:
        return Reply(text="Suggested Input: (2,)", reasoning="I could try\nInput: (7,)", reasoning_as="reasoning")
    if text.startswith("\nACT"):
        return "<think>\nwhat about\nInput: (5,)\n</think>\nSuggested Input: (3,)"
    if text.startswith("\nREFLECT") and calls == 0:
        return Reply(text="NO\nSummary: It Might Double", reasoning="not sure", reasoning_as="reasoning")
    if text.startswith("\nREFLECT"):
        return Reply(text="YES\nSummary: Multiplies Digits", reasoning="sure", reasoning_as="reasoning")
    if text.startswith("\nJUDGE"):
        return Reply(text="Close. Rating: 4", reasoning="at first glance rating: 2", reasoning_as="reasoning")
    return "Code:\n```python\ndef test_func(arg0):\n    return arg0\n```"


def test_a_thinking_models_reasoning_and_think_text_are_read_whole_within_the_references_token_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import_reference(write_checkout(tmp_path / "checkout"), tmp_path)
    with FakeLLM(responder=thinking_brain) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        settings = Settings.from_options(
            data_dir=tmp_path, db=tmp_path / "runs.db", judge_model=THINKING, coder_model=THINKING,
            protocol="reference",
        )  # fmt: skip
        config = EvalConfig(
            run="think", model=THINKING, suite="builtin", mode="interactive", methods=(METHOD,), concurrency=1,
            protocol="reference",
        )  # fmt: skip

        async def go() -> RunProgress:
            scorer = Scorer.from_settings(settings)
            try:
                with anyio.fail_after(120):
                    return await run_eval(settings, config, scorer, None)
            finally:
                await scorer.aclose()

        assert anyio.run(go).failed == 0
        limits = {str(b["messages"][0]["content"]).split(" ", 1)[0]: b["max_tokens"] for b in fake.requests}
        acts = [p for p in fake.prompts() if p.startswith("\nACT")]
    # The reference's limits, thinking included: 300 for each step and the judge, 600 for the code writer.
    assert limits == {"\nREASON": 300, "\nACT": 300, "\nREFLECT": 300, "\nJUDGE": 300, "\nCODER": 600}
    store = RunStore(tmp_path / "runs.db")
    (episode,) = store.episodes(store.run_id("think"), with_trajectories=True)
    assert episode.trajectory is not None
    # The first line with one "Input:" of the whole reply: in the reasoning field, then inside <think>.
    assert [s["arguments"]["args"] for s in episode.trajectory if s["kind"] == "tool_call"] == ["(7,)", "(5,)"]
    assert "why=Reasoning: small numbers first\nResponse:  Try two.\n" in acts[0]
    replies = [s["reply"] for s in episode.trajectory if s["kind"] == "model"]
    assert replies[1] == "Reasoning: I could try\nInput: (7,)\nResponse:  Suggested Input: (2,)"
    assert replies[4] == "<think>\nwhat about\nInput: (5,)\n</think>\nSuggested Input: (3,)"
    assert store.submissions(store.run_id("think"))[0].description == "multiplies digits"
    judge = episode.scores["judge"]
    assert judge.value == 2.0  # the first rating of the whole reply is the one in its reasoning


def test_a_result_is_held_as_the_references_process_hands_it_back() -> None:
    from pau_mcp.contract import ToolResult
    from pau_mcp.harness.reference_agent import reference_result
    from pau_mcp.protocol import reference_triples

    def result(**fields: Any) -> ToolResult:
        return ToolResult(queries_used=1, queries_left=19, budget_scope="token", **fields)

    # An exception with an empty message: the reference writes `Error: ` (str of it); this read `Error: error`.
    assert reference_result(result(status="error", error_type="ValueError", error_message="")) == (None, "", "None")
    assert reference_result(result(status="error", error_type="KeyError", error_message="'k'"))[1] == "'k'"
    # A generator cannot be pickled out of the reference's forked process: its catch-all error, not the repr.
    generator = result(
        status="ok", value="<generator object test_func.<locals>.<genexpr> at 0x1>", value_type="generator"
    )
    assert reference_result(generator) == (None, "Unknown error during execution", "None")
    assert reference_result(result(status="ok", value="'ab'", value_type="str")) == ("ab", None, "'ab'")
    # The code writer's stored examples: an empty message is '' there too, never the exception's name.
    assert reference_triples([("(1,)", "raises ValueError")]) == [("'(1,)'", "None", "''")]
    assert reference_triples([("(1,)", "raises ValueError: bad")]) == [("'(1,)'", "None", "'bad'")]
