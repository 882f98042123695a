"""The agents the harness runs: the paper's loop, native tool calling, and a non-LLM probe baseline.

Every agent works only through its ``Environment`` (MCP tool calls), and
returns what it concluded; the runner submits and scores it.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..llm import Completion, LLMClient, Overrides, Usage
from ..manifests import call_text
from ..prompts import PromptSet, load_prompts
from ..server.catalog import KnownExample
from .environment import Environment, Observation

__all__ = ["AGENTS", "Agent", "AgentResult", "PaperAgent", "ProbeAgent", "ToolsAgent", "memorising_code"]


@dataclass
class AgentResult:
    """What an agent concluded.

    Attributes:
        description: The final description.
        code: Optional code the agent wrote itself.
        concluded: True when the agent decided it was done (not stopped by the budget or the turn limit).
        usage: Tokens the agent's model spent.
        cost_usd: What they cost.
        examples: What the agent observed, in its protocol's form, for the code writer; None: the
            environment's observed examples (``Environment.observed_examples``).
    """

    description: str
    code: str | None = None
    concluded: bool = False
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    examples: list[tuple[str, ...]] | None = None

    def count(self, completion: Completion) -> None:
        """Add one model reply's tokens and cost."""
        self.usage = self.usage + completion.spent
        self.cost_usd += completion.cost_usd


class Agent(Protocol):
    """An explorer of one hidden method."""

    name: str

    async def run(self, env: Environment, mode: str, budget: int) -> AgentResult:
        """Explore (``interactive``) or only read the examples (``incontext``), then conclude."""
        ...


def _arity_example(params: list[str]) -> str:
    inner = ", ".join(str(i + 1) for i in range(len(params)))
    return f"({inner},)" if len(params) == 1 else f"({inner})"


def _shown(observation: Observation) -> str:
    s = observation.structured
    if not observation.counted or not s:
        return f"(not run: {observation.text})"
    if s["status"] == "ok":
        return f"returned {s['value']}"
    if s["status"] == "error":
        return f"raised {s['error_type']}: {s['error_message']}"
    return f"stopped ({s['status']}): {s['error_message']}"


# -- the paper's loop -------------------------------------------------------------------------


@dataclass
class PaperAgent:
    """The reference benchmark's reason, act, reflect loop, in this project's words.

    Each iteration: a reasoning step proposes what to test, an action step
    gives the exact input, the tool runs it, and a reflection step, which
    sees that output (the reference's reflection never did), updates the
    hypothesis and says whether it is settled. Only the last ``window``
    results are shown, as in the reference.

    The input is read from the action's ``INPUT:`` line; without one, from its
    last line that reads as an argument tuple or a call; failing that the
    action is asked for once more with a one-line reminder, and if that reply
    has none either, the step is recorded as a malformed action (a ``note``
    step in the trajectory) and no call is made. The model's thinking is never
    read for an input. The wording comes from the ``pau-mcp`` templates (``paper_*``).
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
        )
        result.count(completion)
        _note_reply(env, completion, prompt=prompt)
        return completion.text

    async def _action(self, result: AgentResult, env: Environment, prompt: str) -> str | None:
        example = _arity_example(env.params)
        reply = await self._ask(result, env, prompt)
        literal = _input_literal(reply, len(env.params))
        if literal is None:
            reply = await self._ask(
                result, env, self.prompts.render("paper_act_again", prompt=prompt, example=example, arity=len(env.params))
            )  # fmt: skip
            literal = _input_literal(reply, len(env.params))
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
            for _ in range(budget or 20):
                context = self._context(env, hypothesis, history)
                plan = await self._ask(result, env, self.prompts.render("paper_reason", context=context))
                literal = await self._action(
                    result, env,
                    self.prompts.render(
                        "paper_act", context=context, plan=plan, arity=len(env.params), example=_arity_example(env.params)
                    ),
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
                hypothesis = _after(reflection, "HYPOTHESIS:", stop="CONCLUDED:") or hypothesis
                if re.search(r"CONCLUDED:\s*YES", reflection, re.IGNORECASE):
                    result.concluded = True
                    break
                if observation.status == "over_budget":
                    break
        final = await self._ask(
            result, env, self.prompts.render("paper_final", context=self._context(env, hypothesis, history)), final=True
        )  # fmt: skip
        result.description = _after(final, "DESCRIPTION:") or hypothesis or final.strip()
        if mode == "incontext":
            result.concluded = True
        return result


def _temperature(overrides: Overrides) -> float:
    return overrides.temperature if overrides.temperature is not None else 0.0


def _note_reply(env: Environment, completion: Completion, **data: Any) -> None:
    """Record a model reply in the trajectory, its thinking (when the provider shows it) apart from its text."""
    if completion.reasoning:
        data["reasoning"] = completion.reasoning
    env.note("model", reply=completion.text, **data)


def _after(text: str, marker: str, stop: str | None = None) -> str:
    index = text.upper().find(marker.upper())
    if index < 0:
        return ""
    rest = text[index + len(marker) :]
    if stop:
        end = rest.upper().find(stop.upper())
        if end >= 0:
            rest = rest[:end]
    return rest.strip()


_INPUT = re.compile(r"INPUT:\s*(.*)", re.IGNORECASE)


def _input_literal(reply: str, arity: int) -> str | None:
    """The argument tuple an action reply gives: its last ``INPUT:`` line, else its last line that reads as one.

    An ``INPUT:`` line is taken as written (the server says what is wrong with it, without spending budget),
    less any prose after the arguments; ``INPUT: test_func(1, 2)`` becomes ``(1, 2)``. Without one, a line counts only if it is a literal tuple of the
    function's arity (any literal for one argument) or a call with literal arguments.
    """
    marked = [match.group(1).strip().strip("`").strip() for match in _INPUT.finditer(reply)]
    marked = [text for text in marked if text]
    if marked:
        return _leading_arguments(marked[-1], arity) or marked[-1]
    for line in reversed(reply.splitlines()):
        found = _as_arguments(line.strip().strip("`*-> ").strip(), arity)
        if found:
            return found
    return None


def _leading_arguments(text: str, arity: int) -> str | None:
    """The arguments at the start of ``text``, which may go on in prose (``(3,) to see the sign``)."""
    found = _as_arguments(text, arity)
    closing = [index for index, char in enumerate(text) if char == ")"]
    while found is None and closing:
        found = _as_arguments(text[: closing.pop() + 1], arity)
    return found


def _as_arguments(text: str, arity: int) -> str | None:
    if not text:
        return None
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    if isinstance(tree, ast.Call) and not tree.keywords:
        try:
            for argument in tree.args:
                ast.literal_eval(argument)
        except (ValueError, SyntaxError, TypeError):
            return None
        inner = ", ".join(ast.unparse(argument) for argument in tree.args)
        return f"({inner},)" if len(tree.args) == 1 else f"({inner})"
    try:
        value = ast.literal_eval(tree)
    except (ValueError, SyntaxError, TypeError):
        return None
    if isinstance(value, tuple) and len(value) == arity:
        return text
    if arity == 1:
        return f"({text},)"
    return None


# -- native tool calling ----------------------------------------------------------------------


@dataclass
class ToolsAgent:
    """The model calls the method's MCP tool and ``submit`` itself, through native function calling."""

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
        nudged = False
        for _ in range((budget or 20) + 10):
            completion = await self.llm.complete(
                self.model,
                messages,
                tools=tools,
                temperature=_temperature(self.overrides),
                max_tokens=self.overrides.max_tokens or self.max_tokens,
                reasoning_effort=self.overrides.reasoning_effort,
            )
            result.count(completion)
            _note_reply(env, completion, tool_calls=[c.__dict__ for c in completion.tool_calls])
            messages.append(completion.message())
            if not completion.tool_calls:
                if nudged:
                    result.description = completion.text.strip()
                    return result
                nudged = True
                messages.append({"role": "user", "content": self.prompts.text("tools_nudge")})
                continue
            for call in completion.tool_calls:
                arguments = call.parsed_arguments()
                if arguments is None:
                    reply = "Those arguments are not a JSON object; call the tool again with valid JSON."
                elif call.name == "submit":
                    result.description = str(arguments.get("description", "")).strip()
                    result.code = arguments.get("code") if isinstance(arguments.get("code"), str) else None
                    result.concluded = True
                    return result
                elif call.name == env.tool.name and mode == "interactive":
                    observation = await env.call(arguments)
                    reply = observation.text
                else:
                    reply = f"There is no tool {call.name!r} here."
                messages.append({"role": "tool", "tool_call_id": call.id, "content": reply})
        result.description = result.description or "(the agent did not submit a description)"
        return result


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
            value = ast.literal_eval(example.input)
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
            args = ast.literal_eval(literal)
        except (ValueError, SyntaxError):
            continue
        args = args if isinstance(args, tuple) else (args,)
        if shown.startswith("raises "):
            kind = shown[len("raises ") :].split(":")[0].strip()
            answer = ("raise", kind if hasattr(builtins, kind) else "Exception")
        else:
            try:
                answer = ("return", ast.literal_eval(shown))
            except (ValueError, SyntaxError):
                continue
        table[repr(args)] = answer
        results.append(repr(answer))
    fallback = ast.literal_eval(Counter(results).most_common(1)[0][0]) if results else ("return", None)
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


AGENTS = {"paper": PaperAgent, "tools": ToolsAgent, "probe": ProbeAgent}
