"""The tools agent against a model server as strict as llama-server, over a real `pau-mcp serve` session: one
malformed tool call never poisons the episode, calls written as text are read or refused, and a call to the header's
function name is answered with the tool's real name."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from fakellm import FakeLLM, Reply

from pau_mcp.harness import Environment
from pau_mcp.harness.agents import AgentResult, ToolsAgent, written_tool_calls
from pau_mcp.llm import LLMClient, LLMError

if TYPE_CHECKING:
    from conftest import OpenEnvironment

MODEL = "openai/small-local-model"


@pytest.fixture
def strict() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        server.strict_history = True
        yield server


def _tools(body: dict[str, Any]) -> tuple[str, str]:
    names = [tool["function"]["name"] for tool in body.get("tools") or ()]
    return next(name for name in names if name != "submit"), "submit"


def _script(*steps: Callable[[str], Reply | str]) -> Callable[[dict[str, Any]], Reply | str]:
    """A model that answers its n-th request with ``steps[n](the method's tool name)``."""
    asked: list[int] = []

    def respond(body: dict[str, Any]) -> Reply | str:
        asked.append(1)
        return steps[min(len(asked), len(steps)) - 1](_tools(body)[0])

    return respond


def _play(vowels_environment: OpenEnvironment, fake: FakeLLM) -> tuple[AgentResult, Environment]:
    llm = LLMClient(env={"OPENAI_BASE_URL": fake.base_url}, retries=0)

    async def main() -> tuple[AgentResult, Environment]:
        try:
            async with vowels_environment() as env:
                with anyio.fail_after(60):
                    return await ToolsAgent(llm=llm, model=MODEL).run(env, "interactive", 3), env
        finally:
            await llm.aclose()

    return anyio.run(main)


def _call(name: str, arguments: Any) -> Reply:
    return Reply(tool_calls=[(name, arguments)])


def test_the_strict_server_refuses_a_history_that_echoes_invalid_arguments(strict: FakeLLM) -> None:
    # The control: what the agent used to send back is refused, for good, by a llama-server-like server.
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "fn", "arguments": '{"args": "(1,'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "not JSON"},
    ]  # fmt: skip
    llm = LLMClient(env={"OPENAI_BASE_URL": strict.base_url}, backoff_s=0.01)
    with pytest.raises(LLMError, match="Failed to parse tool call arguments as JSON.*fail the same way"):
        anyio.run(lambda: llm.complete(MODEL, history, temperature=0))
    assert len(strict.requests) == 1  # not retried: the same history fails the same way every time
    anyio.run(llm.aclose)


def test_a_malformed_tool_call_is_corrected_and_the_episode_goes_on(
    vowels_environment: OpenEnvironment, strict: FakeLLM
) -> None:
    strict.responder = _script(
        lambda tool: _call(tool, '{"args": "(\'hello\',)"'),  # not JSON: a closing brace is missing
        lambda tool: _call(tool, {"args": "('hello',)"}),
        lambda tool: _call("submit", {"method": tool, "description": "Counts the vowels."}),
    )
    result, env = _play(vowels_environment, strict)
    assert strict.refused == [] and result.concluded and result.description == "Counts the vowels."
    assert [o.arguments for o in env.observations] == [{"args": "('hello',)"}]
    second = strict.requests[1]["messages"]
    (echoed,) = [m for m in second if m.get("tool_calls")]
    arguments = json.loads(echoed["tool_calls"][0]["function"]["arguments"])
    assert arguments == {"unparsed_arguments": '{"args": "(\'hello\',)"'}  # valid JSON, the raw text beside it
    (correction,) = [m for m in second if m.get("role") == "tool"]
    assert "not a JSON object" in correction["content"] and "nothing was run" in correction["content"]


def test_a_tool_call_written_as_text_is_run_as_a_call(vowels_environment: OpenEnvironment, strict: FakeLLM) -> None:
    strict.responder = _script(
        lambda tool: f'<tool_call>\n{{"name": "{tool}", "arguments": {{"args": "(\'sky\',)"}}}}\n</tool_call>',
        lambda tool: (
            "<tool_call>"
            + json.dumps({"name": "submit", "arguments": {"method": tool, "description": "Vowels."}})
            + "</tool_call>"
        ),
    )
    result, env = _play(vowels_environment, strict)
    assert strict.refused == [] and result.concluded and result.description == "Vowels."
    assert [o.arguments for o in env.observations] == [{"args": "('sky',)"}] and env.observations[0].counted
    (native,) = [m for m in strict.requests[1]["messages"] if m.get("tool_calls")]
    assert native["tool_calls"][0]["function"]["name"] == _tools(strict.requests[0])[0]


def test_a_tool_call_written_as_text_that_cannot_be_read_is_refused_not_submitted(
    vowels_environment: OpenEnvironment, strict: FakeLLM
) -> None:
    unreadable = '<tool_call>{"name": "fn", "arguments": {"args": </tool_call>'
    strict.responder = _script(
        lambda tool: unreadable,
        lambda tool: "It counts the vowels of its argument.",
        lambda tool: "It counts the vowels of its argument, in either case.",
    )
    result, env = _play(vowels_environment, strict)
    assert "tool_call" not in result.description and result.description.startswith("It counts the vowels")
    hint = strict.requests[1]["messages"][-1]
    assert hint["role"] == "user" and "could not be read" in hint["content"] and "function calling" in hint["content"]
    assert any(step.data.get("event") == "unreadable_text_tool_call" for step in env.trajectory)


def test_calling_the_headers_function_name_is_answered_with_the_tools_real_name(
    vowels_environment: OpenEnvironment, strict: FakeLLM
) -> None:
    strict.responder = _script(
        lambda tool: _call("count_vowels", {"s": "hello"}),
        lambda tool: _call(tool, {"args": "('hello',)"}),
        lambda tool: _call("submit", {"method": tool, "description": "Counts vowels."}),
    )
    result, env = _play(vowels_environment, strict)
    assert result.description == "Counts vowels." and len(env.observations) == 1
    tool = _tools(strict.requests[0])[0]
    answer = next(m for m in strict.requests[1]["messages"] if m.get("role") == "tool")["content"]
    assert "no tool 'count_vowels'" in answer and repr(tool) in answer and "Nothing was run" in answer


@pytest.mark.parametrize(
    ("reply", "calls"),
    [
        ('<tool_call>{"name": "fn", "arguments": {"args": "(1,)"}}</tool_call>', [("fn", {"args": "(1,)"})]),
        ('```json\n{"name": "submit", "arguments": {"description": "d"}}\n```', [("submit", {"description": "d"})]),
        ('<tool_call>{"name": "fn", "arguments": "{\\"args\\": \\"(2,)\\"}"}</tool_call>', [("fn", {"args": "(2,)"})]),
        ('<tool_call>{"name": "fn", "arguments": {"args": </tool_call>', []),
        ("It counts vowels.", None),
        # The shapes small models improvise: the arguments beside the name, OpenAI's own, a list, a fence in prose.
        ('{"name": "submit", "description": "Counts vowels."}', [("submit", {"description": "Counts vowels."})]),
        ('{"name": "count_vowels", "description": "counts"}', [("count_vowels", {"description": "counts"})]),
        ('{"function": {"name": "fn", "arguments": "{\\"args\\": \\"(4,)\\"}"}}', [("fn", {"args": "(4,)"})]),
        (
            '[{"name": "fn", "arguments": {"args": "(1,)"}}, {"name": "fn", "parameters": {"args": "(2,)"}}]',
            [("fn", {"args": "(1,)"}), ("fn", {"args": "(2,)"})],
        ),
        ('I will test it:\n```json\n{"name": "fn", "arguments": {"args": "(3,)"}}\n```', [("fn", {"args": "(3,)"})]),
        ('{"name": "fn", "arguments": {"args": "(1,)"', []),  # a call cut short: refused, never a description
        ('{"name": "fn", "arguments": ' + "[" * 60_000, []),  # nested far too deep: refused, not a crash
        ('{"vowels": 2}', None),  # JSON that is no call: the agent refuses it as a description
    ],
)
def test_tool_calls_written_as_text_are_read_or_marked_unreadable(
    reply: str, calls: list[tuple[str, dict[str, str]]] | None
) -> None:
    found = written_tool_calls(reply, "t")
    assert (None if found is None else [(c.name, c.parsed_arguments()) for c in found]) == calls
    assert found is None or all(c.id == f"t_{i}" for i, c in enumerate(found))


def test_a_submission_written_as_a_json_object_is_read_as_the_submit_call(
    vowels_environment: OpenEnvironment, strict: FakeLLM
) -> None:
    strict.responder = _script(
        lambda tool: _call(tool, {"args": "('hello',)"}),
        lambda tool: json.dumps({"name": "submit", "method": tool, "description": "Counts the vowels."}),
    )
    result, env = _play(vowels_environment, strict)
    assert result.concluded and result.description == "Counts the vowels."
    assert any(step.data.get("event") == "text_tool_call" for step in env.trajectory)


def test_json_where_the_description_belongs_is_refused_with_feedback_and_never_taken(
    vowels_environment: OpenEnvironment, strict: FakeLLM
) -> None:
    strict.responder = _script(
        lambda tool: _call(tool, {"args": "('hello',)"}),
        lambda tool: '```json\n{"vowels": 2, "input": "hello"}\n```',
        lambda tool: "It counts the vowels of its argument.",
        lambda tool: "It counts the vowels a, e, i, o and u of its argument, in either case.",
    )
    result, env = _play(vowels_environment, strict)
    assert result.description == "It counts the vowels a, e, i, o and u of its argument, in either case."
    feedback = strict.requests[2]["messages"][-1]
    assert feedback["role"] == "user" and "not a description" in feedback["content"] and "JSON" in feedback["content"]
    (refused,) = [step for step in env.trajectory if step.data.get("event") == "not_a_description"]
    assert "JSON" in refused.data["problem"]


def test_a_submit_call_whose_description_is_json_is_refused_and_the_model_submits_prose(
    vowels_environment: OpenEnvironment, strict: FakeLLM
) -> None:
    strict.responder = _script(
        lambda tool: _call("submit", {"method": tool, "description": '{"name": "count_vowels", "arguments": {}}'}),
        lambda tool: _call("submit", {"method": tool, "description": "Counts the vowels."}),
    )
    result, env = _play(vowels_environment, strict)
    assert result.description == "Counts the vowels."
    answer = next(m for m in strict.requests[1]["messages"] if m.get("role") == "tool")["content"]
    assert answer.startswith("Not submitted: the description") and "in words" in answer


def test_an_agent_that_never_gives_prose_ends_with_no_description_rather_than_a_placeholder(
    vowels_environment: OpenEnvironment, strict: FakeLLM
) -> None:
    strict.responder = _script(lambda tool: '{"result": "vowels"}')
    result, env = _play(vowels_environment, strict)
    assert result.description == "" and not result.concluded


def test_the_harness_answers_to_unknown_and_malformed_calls_are_in_the_trajectory(
    vowels_environment: OpenEnvironment, strict: FakeLLM
) -> None:
    strict.responder = _script(
        lambda tool: _call("count_vowels", {"s": "hello"}),
        lambda tool: _call(tool, '{"args": "(1,'),
        lambda tool: _call("submit", {"method": tool, "description": "Counts vowels."}),
    )
    _, env = _play(vowels_environment, strict)
    steps = [(step.kind, step.data) for step in env.trajectory if step.kind in ("tool_call", "tool_result")]
    assert [kind for kind, _ in steps] == ["tool_call", "tool_result", "tool_call", "tool_result"]
    assert steps[0][1] == {"tool": "count_vowels", "arguments": {"s": "hello"}}
    assert "no tool 'count_vowels'" in steps[1][1]["text"] and steps[1][1]["refused"] and steps[1][1]["is_error"]
    assert steps[2][1]["arguments"] == {"unparsed_arguments": '{"args": "(1,'}
    assert "not a JSON object" in steps[3][1]["text"] and steps[3][1]["refused"]


def test_arguments_nested_a_megabyte_deep_are_one_corrected_call_and_the_episode_goes_on(
    vowels_environment: OpenEnvironment, strict: FakeLLM
) -> None:
    strict.responder = _script(
        lambda tool: _call(tool, '{"args": ' + "[" * (1 << 20)),
        lambda tool: _call(tool, {"args": "('hello',)"}),
        lambda tool: _call("submit", {"method": tool, "description": "Counts the vowels."}),
    )
    result, env = _play(vowels_environment, strict)
    assert result.description == "Counts the vowels." and [o.arguments for o in env.observations] == [
        {"args": "('hello',)"}
    ]
    answer = next(m for m in strict.requests[1]["messages"] if m.get("role") == "tool")["content"]
    assert "nested deeper than 100 levels" in answer and "nothing was run" in answer
