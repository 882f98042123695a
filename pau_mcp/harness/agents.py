"""The agents the harness runs: the paper's loop, native tool calling, a non-LLM probe baseline, and the
self-checking observer (``observer``, which builds on these; ``runner.AGENTS`` lists them all).

Every agent works only through its ``Environment`` (MCP tool calls), and
returns what it concluded; the runner submits and scores it.
"""

from __future__ import annotations

import builtins
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

from wasm_runtime import literal_value

from ..contract import KnownExample, ToolStatus
from ..descriptions import description_problem, fenced_blocks
from ..grammar import read_input, read_reflection
from ..llm import Completion, LLMClient, Overrides, ToolCall, Usage, read_json
from ..llm.replies import MAX_JSON_DEPTH, nests_deeper_than
from ..manifests import call_text
from ..prompts import PromptSet, load_prompts
from .environment import Environment, Observation

__all__ = [
    "Agent", "AgentResult", "PaperAgent", "ProbeAgent", "ToolsAgent", "input_example", "memorising_code", "sample_key",
    "written_tool_calls",
]  # fmt: skip


@dataclass
class AgentResult:
    """What an agent concluded.

    Attributes:
        description: The final description.
        code: Optional code the agent wrote itself.
        concluded: True when the agent decided it was done (not stopped by the budget or the turn limit).
        usage: Tokens of the agent model's replies, those replayed from the cache included.
        cost_usd: What they cost (a cached reply costs nothing).
        examples: What the agent observed, in its protocol's form, for the code writer; None: the
            environment's observed examples (``Environment.observed_examples``).
        requests: Model requests made so far (the next one's sample index).
    """

    description: str
    code: str | None = None
    concluded: bool = False
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    examples: list[tuple[str, ...]] | None = None
    requests: int = 0

    def count(self, completion: Completion) -> None:
        """Add one model reply's tokens (whether it came from the cache or not: a resumed episode that replays its
        steps reports what an uninterrupted one does) and its cost (nothing for a cached reply)."""
        self.usage = self.usage + completion.usage
        self.cost_usd += completion.cost_usd
        self.requests += 1


def sample_key(env: Environment, result: AgentResult) -> str:
    """Which sample the agent's next request is, for the response cache: the method's tool and the request's
    index in the episode, so sampled replies are replayed only when the same run asks the same step again."""
    return f"{env.tool.name}/{result.requests}"


class Agent(Protocol):
    """An explorer of one hidden method."""

    name: str

    async def run(self, env: Environment, mode: str, budget: int) -> AgentResult:
        """Explore (``interactive``) or only read the examples (``incontext``), then conclude."""
        ...


def _arity_example(params: list[str]) -> str:
    inner = ", ".join(str(i + 1) for i in range(len(params)))
    return f"({inner},)" if len(params) == 1 else f"({inner})"


def input_example(env: Environment, step: int) -> str:
    """The format example an action prompt shows at ``step``: arguments of the function's count and of the initial
    examples' types, another one at every step and never one already run.

    A small model copies the example it is shown (24 of 33 calls were the fixed ``(1,)`` once); a varied example
    at least asks something new when copied. Deterministic: the same episode shows the same examples.
    """
    samples = _example_arguments(env.initial_examples)
    tried = {str(o.arguments.get("args", "")).replace(" ", "") for o in env.observations}
    arity = len(env.params)
    for probe in _probe_arguments(samples, arity, step + len(tried) + 1)[step:] or [()]:
        if len(probe) != arity:
            break
        literal = repr(probe) if arity != 1 else f"({probe[0]!r},)"
        if literal.replace(" ", "") not in tried:
            return literal
    return _arity_example(env.params)


def _shown(observation: Observation) -> str:
    result = observation.result
    if not observation.counted or result is None:
        return f"(not run: {observation.text})"
    if result.status == ToolStatus.OK:
        return f"returned {result.value}"
    if result.status == ToolStatus.ERROR:
        return f"raised {result.error_type}: {result.error_message}"
    return f"stopped ({result.status}): {result.error_message}"


# -- the paper's loop -------------------------------------------------------------------------


@dataclass
class PaperAgent:
    """The reference benchmark's reason, act, reflect loop, in this project's words.

    Each iteration: a reasoning step proposes what to test, an action step
    gives the exact input, the tool runs it, and a reflection step, which
    sees that output (the reference's reflection never did), updates the
    hypothesis and says whether it is settled. Only the last ``window``
    results are shown, as in the reference.

    Replies are read by the paper loop's grammar (``pau_mcp.grammar``, shared
    with the RL environment): the input from the action's last ``INPUT:`` line
    (the literal after it, on the next line or in the fence that opens there);
    without one, from its last line that reads as an argument tuple or a call;
    failing that the action is asked for once more with a one-line reminder,
    and if that reply has none either, the step is recorded as a malformed
    action (a ``note`` step in the trajectory) and no call is made. The model's
    thinking is never read for an input. The wording comes from the ``pau-mcp``
    templates (``paper_*``).
    """

    llm: LLMClient
    model: str
    max_tokens: int = 300
    window: int = 10
    name: str = "paper"
    overrides: Overrides = field(default_factory=Overrides)
    prompts: PromptSet = field(default_factory=load_prompts)

    async def _ask(self, result: AgentResult, env: Environment, prompt: str, final: bool = False) -> str:
        messages = [
            {"role": "system", "content": self.prompts.text("agent_system")},
            {"role": "user", "content": prompt},
        ]
        step = self.overrides.max_tokens or self.max_tokens
        completion = await self.llm.complete(
            self.model,
            messages,
            temperature=_temperature(self.overrides),
            max_tokens=2 * step if final else step,
            reasoning_effort=self.overrides.reasoning_effort,
            sample=sample_key(env, result),
        )
        result.count(completion)
        _note_reply(env, completion, prompt=prompt)
        return completion.text

    async def _action(self, result: AgentResult, env: Environment, prompt: str, example: str) -> str | None:
        reply = await self._ask(result, env, prompt)
        literal = read_input(reply, len(env.params))
        if literal is None:
            reply = await self._ask(
                result, env, self.prompts.render("paper_act_again", prompt=prompt, example=example, arity=len(env.params))
            )  # fmt: skip
            literal = read_input(reply, len(env.params))
            if literal is None:
                env.note("note", event="malformed_action", reply=reply)
        return literal

    def _context(self, env: Environment, hypothesis: str, history: list[str]) -> str:
        examples = "\n".join(f"  {line}" for line in env.examples) or "  (none)"
        recent = "\n".join(history[-self.window :]) or "  (no experiments yet)"
        return self.prompts.render(
            "paper_context", header=env.header, examples=examples, recent=recent, hypothesis=hypothesis or "(none yet)"
        )

    async def run(self, env: Environment, mode: str, budget: int) -> AgentResult:
        result = AgentResult(description="")
        hypothesis = ""
        history: list[str] = []
        if mode == "interactive":
            for step in range(budget or 20):
                context = self._context(env, hypothesis, history)
                plan = await self._ask(result, env, self.prompts.render("paper_reason", context=context))
                example = input_example(env, step)
                literal = await self._action(
                    result, env,
                    self.prompts.render("paper_act", context=context, plan=plan, arity=len(env.params), example=example),
                    example,
                )  # fmt: skip
                if literal is None:
                    history.append("  (an action that gave no input: nothing was run)")
                    continue
                observation = await env.call({"args": literal})
                line = f"  {env.entry}{literal} -> {_shown(observation)}"
                history.append(line)
                reflection = await self._ask(
                    result, env,
                    self.prompts.render(
                        "paper_reflect", context=self._context(env, hypothesis, history), call=f"{env.entry}{literal}",
                        shown=_shown(observation),
                    ),
                )  # fmt: skip
                read = read_reflection(reflection)
                hypothesis = read.hypothesis if read.marked else hypothesis
                if read.concluded:
                    result.concluded = True
                    break
                if observation.status == "over_budget":
                    break
        prompt = self.prompts.render("paper_final", context=self._context(env, hypothesis, history))
        final = await self._ask(result, env, prompt, final=True)
        description = _after(final, "DESCRIPTION:") or hypothesis or final.strip()
        problem = description_problem(description)
        if problem is not None:  # JSON or a call where the description belongs: asked once more, never submitted
            env.note("note", event="not_a_description", problem=problem, reply=final[:4096])
            again = await self._ask(
                result, env, self.prompts.render("paper_final_again", prompt=prompt, problem=problem), final=True
            )
            description = _after(again, "DESCRIPTION:") or again.strip()
            if description_problem(description) is not None:
                description = hypothesis if description_problem(hypothesis) is None else ""
        result.description = description
        if mode == "incontext":
            result.concluded = True
        return result


def _temperature(overrides: Overrides) -> float:
    return overrides.temperature if overrides.temperature is not None else 0.0


class _Noting(Protocol):
    """What keeps a trajectory: an exploration's ``Environment`` or a task run's ``TaskEnvironment``."""

    def note(self, kind: str, **data: Any) -> None: ...


def _note_reply(env: _Noting, completion: Completion, **data: Any) -> None:
    """Record a model reply in the trajectory, its thinking (when the provider shows it) apart from its text."""
    if completion.reasoning:
        data["reasoning"] = completion.reasoning
    env.note("model", reply=completion.text, **data)


def _after(text: str, marker: str) -> str:
    """The text after the first ``marker`` (any case), or "" without one.

    Matched as a literal, so linear; unlike ``str.upper().find`` the index is the text's own (upper-casing can change
    a string's length: ``"ß".upper()`` is ``"SS"``).
    """
    found = re.search(re.escape(marker), text, re.IGNORECASE)
    return text[found.end() :].strip() if found else ""


# -- native tool calling ----------------------------------------------------------------------


@dataclass
class ToolsAgent:
    """The model calls the method's MCP tool and ``submit`` itself, through native function calling.

    What goes back to the model is always a conversation every API accepts: a call whose arguments are not a JSON
    object stays in the history with its text under ``unparsed_arguments`` (servers that render history through a
    chat template, llama-server among them, refuse the whole conversation otherwise), and is answered with what was
    wrong. A call to a tool that does not exist is answered with the tools that do (the function's own name from
    the header is not a tool: the answer names the tool that calls it). Tool calls a model writes as text (the
    ``<tool_call>`` JSON small models emit) are read as calls, or refused with a hint; never taken for the
    description.
    """

    llm: LLMClient
    model: str
    max_tokens: int = 800
    name: str = "tools"
    overrides: Overrides = field(default_factory=Overrides)
    prompts: PromptSet = field(default_factory=load_prompts)

    async def run(self, env: Environment, mode: str, budget: int) -> AgentResult:
        result = AgentResult(description="")
        tools = [_openai_tool(env.submit_tool)]
        if mode == "interactive":
            tools.insert(0, _openai_tool(env.tool))
        examples = "\n".join(f"  {line}" for line in env.examples) or "  (none)"
        if mode == "interactive":
            task = self.prompts.render(
                "tools_task_interactive", header=env.header, examples=examples, tool=env.tool.name, budget=budget
            )
        else:
            task = self.prompts.render("tools_task_incontext", header=env.header, examples=examples, tool=env.tool.name)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self.prompts.text("agent_system")},
            {"role": "user", "content": task},
        ]
        offered = [tool["function"]["name"] for tool in tools]
        nudged = False
        for _ in range((budget or 20) + 10):
            completion = await self.llm.complete(
                self.model,
                messages,
                tools=tools,
                temperature=_temperature(self.overrides),
                max_tokens=self.overrides.max_tokens or self.max_tokens,
                reasoning_effort=self.overrides.reasoning_effort,
                sample=sample_key(env, result),
            )
            result.count(completion)
            _note_reply(env, completion, tool_calls=[c.__dict__ for c in completion.tool_calls])
            calls = completion.tool_calls
            message = completion.message()
            if not calls:
                written = written_tool_calls(completion.text, f"call_text_{result.requests}")
                if written is None:  # plain text: the description, once the model has been asked to submit
                    messages.append(message)
                    problem = description_problem(completion.text)
                    if problem is not None:  # JSON, a placeholder, nothing: never taken for the description
                        env.note("note", event="not_a_description", problem=problem, reply=completion.text[:4096])
                        messages.append({"role": "user", "content": _PROSE_HINT.format(problem=problem)})
                        continue
                    if nudged:
                        result.description = completion.text.strip()
                        return result
                    nudged = True
                    messages.append({"role": "user", "content": self.prompts.text("tools_nudge")})
                    continue
                if not written:
                    env.note("note", event="unreadable_text_tool_call", reply=completion.text)
                    messages.append(message)
                    messages.append({"role": "user", "content": _TEXT_CALL_HINT.format(tools=_listed(offered))})
                    continue
                calls = tuple(written)
                message = {"role": "assistant", "content": None, "tool_calls": _native(written)}
                env.note("note", event="text_tool_call", calls=[c.__dict__ for c in written])
            messages.append(_valid_history(message))
            for call in calls:
                arguments = call.parsed_arguments()
                if call.name not in offered:
                    reply = _refused(env, call, _unknown_tool(call.name, env, offered, mode))
                elif arguments is None:
                    reply = _refused(env, call, _ARGUMENTS_HINT.format(
                        problem=_json_problem(call.arguments), tool=call.name,
                        example=json.dumps({"args": _arity_example(env.params)} if call.name == env.tool.name
                                           else {"description": "..."}),
                    ))  # fmt: skip
                elif call.name == env.submit_tool.name:
                    description = arguments.get("description")
                    problem = description_problem(description if isinstance(description, str) else None)
                    if problem is not None:
                        reply = _refused(env, call, _SUBMIT_HINT.format(problem=problem))
                    else:
                        result.description = str(description).strip()
                        result.code = arguments.get("code") if isinstance(arguments.get("code"), str) else None
                        result.concluded = True
                        return result
                else:
                    observation = await env.call(arguments)
                    reply = observation.text
                messages.append({"role": "tool", "tool_call_id": call.id, "content": reply})
        return result  # no description: the run submits nothing rather than a placeholder


_ARGUMENTS_HINT = (
    "Those arguments are not a JSON object ({problem}); nothing was run. Call {tool} again with a JSON object, "
    "e.g. {example}."
)
_PROSE_HINT = (
    "That is not a description ({problem}); nothing was submitted. Describe in words what the function does, "
    "precisely, and give that description to `submit`."
)
_SUBMIT_HINT = (
    "Not submitted: the description {problem}. Call `submit` again with a description in words of what the function "
    "does, precisely, covering every case."
)
_TEXT_CALL_HINT = (
    'Your reply wrote a tool call as text, and it could not be read as one (a JSON object with "name" and '
    '"arguments"); nothing was run. Call the tools through function calling: {tools}.'
)
_MAX_WRITTEN_CHARS = 64 * 1024  # a reply longer than this is not searched for written tool calls
_MAX_SHOWN_CHARS = 4096  # the most of a malformed call's text kept in the history


def _listed(names: list[str]) -> str:
    return ", ".join(repr(name) for name in names)


def _unknown_tool(name: str, env: Environment, offered: list[str], mode: str) -> str:
    """What a call to a tool that does not exist is answered with: the tools that do, and which one to use."""
    if name == env.entry or name.lower() == env.entry.lower():
        if env.tool.name in offered:
            example = json.dumps({"args": _arity_example(env.params)})
            return (
                f"There is no tool {name!r}: {env.entry} is the hidden function, which you call through the tool "
                f"{env.tool.name!r}, e.g. {env.tool.name} with {example}. Nothing was run."
            )
        return f"There is no tool {name!r}: in this mode the function cannot be called; submit your description."
    return f"There is no tool {name!r} here; the tools are {_listed(offered)}. Nothing was run."


def _json_problem(text: str) -> str:
    if nests_deeper_than(text or "", MAX_JSON_DEPTH):
        return f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
    try:
        value = json.loads(text or "{}")
    except (ValueError, RecursionError) as exc:
        return f"not valid JSON: {str(exc)[:200]}"
    return f"JSON of type {type(value).__name__}, not an object"


def _refused(env: _Noting, call: ToolCall, reply: str) -> str:
    """Record a call the harness answered itself (an unknown tool, arguments that are not an object, a refused
    submission) in the trajectory, as a call and its result that never reached the server; ``reply`` back."""
    arguments = call.parsed_arguments()
    shown = arguments if arguments is not None else {"unparsed_arguments": str(call.arguments)[:_MAX_SHOWN_CHARS]}
    env.note("tool_call", tool=call.name, arguments=shown)
    env.note("tool_result", text=reply, structured=None, is_error=True, refused=True)
    return reply


def _valid_history(message: dict[str, Any]) -> dict[str, Any]:
    """The assistant message with every tool call's arguments a JSON object, as every API and chat template accepts.

    Arguments that are not one are kept, as text, under ``unparsed_arguments`` (at most a few KiB of them).
    """
    calls = message.get("tool_calls")
    if not calls:
        return message
    fixed = []
    for call in calls:
        function = call["function"]
        if ToolCall(call["id"], function["name"], function["arguments"]).parsed_arguments() is None:
            raw = str(function["arguments"])[:_MAX_SHOWN_CHARS]
            function = {**function, "arguments": json.dumps({"unparsed_arguments": raw})}
        fixed.append({**call, "function": function})
    return {**message, "tool_calls": fixed}


def _native(calls: list[ToolCall]) -> list[dict[str, Any]]:
    return [
        {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
        for call in calls
    ]


_OPEN_CALL = "<tool_call>"
_CLOSE_CALL = "</tool_call>"


def written_tool_calls(text: str, id_prefix: str = "call_text") -> list[ToolCall] | None:
    """Tool calls a model wrote as text instead of calling them, each with the id ``<id_prefix>_<n>`` (the same reply,
    the same ids: a replayed conversation is the same request).

    Read as calls: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks (the Hermes and Qwen form small
    models fall back to); a reply that is all one such JSON object, or a list of them (fenced or not); the same in
    fenced blocks among prose; and the shapes models improvise: ``{"name": "submit", "description": ...}`` (the
    arguments beside the name), ``{"function": {"name": ..., "arguments": ...}}`` (OpenAI's own), ``"parameters"``
    for ``"arguments"``.

    Returns:
        None when the reply writes no tool call; the calls when each reads as one; an empty list when the reply
        writes one that cannot be read (the caller refuses it with a hint rather than taking it for a description).
        Linear in the reply: blocks are found with ``str.find``, JSON is read depth-limited (``read_json``), and a
        reply longer than 64 KiB is not searched.
    """
    if len(text) > _MAX_WRITTEN_CHARS:
        return None
    lowered = text.lower()
    blocks: list[str] = []
    position = 0
    while (start := lowered.find(_OPEN_CALL, position)) >= 0:
        end = lowered.find(_CLOSE_CALL, start)
        blocks.append(text[start + len(_OPEN_CALL) : end if end >= 0 else len(text)])
        if end < 0:
            break
        position = end + len(_CLOSE_CALL)
    if blocks:
        calls = [_written_call(read_json(_unfenced(block)), explicit=True) for block in blocks]
        if any(call is None for call in calls):
            return []
        return _numbered([c for c in calls if c is not None], id_prefix)
    whole = _unfenced(text)
    if whole.startswith(("{", "[")):
        value = read_json(whole)
        if value is None:
            # JSON that does not parse, with a call's marks: a call gone wrong, not a description.
            return [] if whole.startswith("{") and '"name"' in whole else None
        found = _written_calls(value)
        return _numbered(found, id_prefix) if found is not None else None
    found_in_fences: list[tuple[str, dict[str, Any]]] = []
    for block in fenced_blocks(text):
        if block.strip().startswith(("{", "[")):
            found_in_fences += _written_calls(read_json(block.strip())) or []
    return _numbered(found_in_fences, id_prefix) if found_in_fences else None


def _written_calls(value: Any) -> list[tuple[str, dict[str, Any]]] | None:
    """The calls a JSON value writes (an object, or a list of objects); None when it is not shaped as calls."""
    items = value if isinstance(value, list) and value else [value]
    calls = [_written_call(item) for item in items]
    if any(call is None for call in calls):
        return None
    return [call for call in calls if call is not None]


def _written_call(value: Any, explicit: bool = False) -> tuple[str, dict[str, Any]] | None:
    """``(name, arguments)`` of one call written as a JSON object, or None when the object is not one (``explicit``:
    it was written as a call, in ``<tool_call>`` tags, so a name alone is a call without arguments)."""
    if not isinstance(value, dict):
        return None
    function = value.get("function")
    if isinstance(function, dict) and isinstance(function.get("name"), str):
        value = function
    name = value.get("name")
    if not isinstance(name, str) or not name:
        return None
    if "arguments" in value or "parameters" in value:
        arguments = value.get("arguments", value.get("parameters"))
        if isinstance(arguments, str):
            arguments = read_json(arguments)
    else:
        # The arguments written beside the name ({"name": "submit", "description": ...}).
        arguments = {k: v for k, v in value.items() if k not in ("name", "type", "id")}
        if not arguments and not explicit:
            return None
    return (name, arguments) if isinstance(arguments, dict) else None


def _numbered(calls: list[tuple[str, dict[str, Any]]], id_prefix: str) -> list[ToolCall]:
    return [ToolCall(f"{id_prefix}_{index}", name, json.dumps(args)) for index, (name, args) in enumerate(calls)]


def _unfenced(text: str) -> str:
    """``text`` without the code fence around it (```json ... ```), stripped."""
    inner = text.strip()
    if inner.startswith("```"):
        newline = inner.find("\n")
        inner = inner[newline + 1 :] if newline >= 0 else ""
        if inner.rstrip().endswith("```"):
            inner = inner.rstrip()[:-3]
    return inner.strip()


def _openai_tool(tool: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description or "", "parameters": tool.input_schema},
    }


# -- the probe baseline -------------------------------------------------------------------------

_PROBES: dict[type, list[Any]] = {
    bool: [True, False],
    int: [0, 1, -1, 2, 7, -12, 10, 100, 3, 1000, 5, -3],
    float: [0.0, 1.5, -2.25, 0.1, 1000000.0, 3.0, -0.5],
    str: ["", "a", "abc", "Hello World", "a1b2", "ABC", "racecar", "  x  ", "aaa", "12345"],
    list: [[], [1], [3, 1, 2], [1, 1, 2], [-1, 0, 5], [10, 20, 30, 40], [2, 2, 2]],
    tuple: [(), (1,), (3, 1, 2), (1, 1)],
    dict: [{}, {"a": 1}, {"a": 1, "b": 2}, {"x": 0, "y": -3}],
    set: [set(), {1}, {3, 1, 2}],
    type(None): [None],
}
_STR_LISTS = [[], ["a"], ["b", "a"], ["apple", "banana", "apple"], ["x", "yy", "zzz"]]


@dataclass
class ProbeAgent:
    """No model at all: type-appropriate probe inputs, then a memorising lookup table as code.

    The honest floor every real agent must beat: its description only lists
    what it saw, and its code answers the inputs it saw and guesses the most
    common output otherwise.
    """

    name: str = "probe"

    async def run(self, env: Environment, mode: str, budget: int) -> AgentResult:
        samples = _example_arguments(env.initial_examples)
        if mode == "interactive":
            for args in _probe_arguments(samples, len(env.params), budget or 20):
                observation = await env.call({"args": repr(args)})
                if observation.status == "over_budget":
                    break
        pairs = env.observed_examples()
        shown = "; ".join(f"{call_text(env.entry, inp)} -> {out}" for inp, out in pairs[:40])
        description = f"A function of {len(env.params)} argument(s). Observed behaviour: {shown}."
        return AgentResult(description=description, code=memorising_code(pairs, env.params, env.entry), concluded=True)


def _example_arguments(examples: list[KnownExample]) -> list[tuple[Any, ...]]:
    """The argument tuples of the initial examples, from their published literals."""
    found = []
    for example in examples:
        try:
            value = literal_value(example.input)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, tuple):
            found.append(value)
    return found


def _probe_arguments(samples: list[tuple[Any, ...]], arity: int, budget: int) -> list[tuple[Any, ...]]:
    """Probe values per parameter, chosen by the types seen in the examples, combined position by position."""
    columns = []
    for position in range(arity):
        seen = [s[position] for s in samples if len(s) > position]
        kinds = {type(v) for v in seen} or {int}
        values: list[Any] = []
        for kind in kinds:
            if kind is list and any(isinstance(x, str) for v in seen if isinstance(v, list) for x in v):
                values += _STR_LISTS
            else:
                values += _PROBES.get(kind, [None])
        values += [v for v in seen if v not in values]
        columns.append(values)
    probes: list[tuple[Any, ...]] = []
    for i in range(budget * 8):
        # Position p advances p extra steps each time its column wraps, so the combinations keep changing.
        args = tuple(column[(i + p * (i // len(column))) % len(column)] for p, column in enumerate(columns))
        if args not in probes and args not in samples:
            probes.append(args)
        if len(probes) >= budget:
            break
    return probes


def memorising_code(pairs: list[tuple[str, str]], params: list[str], entry: str = "test_func") -> str:
    """Python source defining ``entry``, which answers the observed inputs from a table and the most common result
    otherwise."""
    table: dict[str, tuple[str, Any]] = {}
    results = []
    for literal, shown in pairs:
        try:
            args = literal_value(literal)
        except (ValueError, SyntaxError):
            continue
        args = args if isinstance(args, tuple) else (args,)
        if shown.startswith("raises "):
            kind = shown[len("raises ") :].split(":")[0].strip()
            answer = ("raise", kind if hasattr(builtins, kind) else "Exception")
        else:
            try:
                answer = ("return", literal_value(shown))
            except (ValueError, SyntaxError):
                continue
        table[repr(args)] = answer
        results.append(repr(answer))
    fallback = literal_value(Counter(results).most_common(1)[0][0]) if results else ("return", None)
    signature = ", ".join(params)
    errors = sorted({value for kind, value in table.values() if kind == "raise"})
    return (
        f"_TABLE = {table!r}\n"
        f"_FALLBACK = {fallback!r}\n"
        f"_ERRORS = {{{', '.join(f'{name!r}: {name}' for name in errors)}}}\n\n"
        f"def {entry}({signature}):\n"
        f"    kind, value = _TABLE.get(repr(({signature}{',' if len(params) == 1 else ''})), _FALLBACK)\n"
        "    if kind == 'raise':\n"
        "        raise _ERRORS.get(value, Exception)('memorised')\n"
        "    return value\n"
    )
