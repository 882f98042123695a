"""The paper agent under the reference protocol: the reference benchmark's loop, its wording and its parse rules.

What it does, step for step, is what the reference benchmark's code does (its
prompts are the user's imported templates; see ``pau_mcp.prompts``):

- each iteration asks for reasoning, then for an input, then for a reflection, three
  single user messages with no system message, 300 new tokens each (a thinking model's
  thinking included, as its client sends the limit), every reply cut at ``[STOP]``; the
  results list shows the last 10 results, and the reflection sees the list from before
  the iteration's own call and only the input just tried;
- a reply is read whole, as the reference's client returns it: the provider's ``reasoning``
  field first (``Reasoning: ...`` then ``Response:``) and ``<think>`` text left in
  (``pau_mcp.protocol.reference_reply``), so an input or a summary written while thinking counts;
- the input is read from the first line holding exactly one ``input:`` (or ``Input:``)
  with text after it, else from the first line with a ``(`` followed by a ``)``,
  from the first ``(`` to the last ``)``; a tuple or a list is the argument list,
  anything else one argument (so ``[1, 2]`` is two arguments);
- the reflection concludes when the text before its one ``summary:`` says ``yes``; the
  hypothesis is the lower-cased text after it (or the whole reply when there is not
  exactly one), and the final description is the last hypothesis: no extra call;
- in-context, one request with the initial examples; its reply is the description;
- the initial examples are shown as the dataset writes them when the suite kept that text (``Case.original``,
  published in the tool's facts): the input as written and ``str`` of the stored output.

A call the server refuses because the budget is spent (a result's ``status``, ``over_budget``) ends the loop; the
reference has no such budget, and a run's own server never gives one smaller than the loop.

The agent still works only through MCP: the call goes to the server, which counts it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wasm_runtime import literal_value

from ..contract import ToolResult, ToolStatus
from ..llm import LLMClient, Overrides
from ..prompts import PromptSet
from ..protocol import cut_at_stop, reference_example, reference_reply, results_list
from .agents import AgentResult, sample_key
from .environment import Environment

__all__ = ["ReferenceAgent", "reference_input", "reference_result"]

#: What the results list says when an action gave no input, or one that is not a Python literal.
_NOT_A_LITERAL = "the input is not a valid Python literal"
_UNSET_HYPOTHESIS = "Not yet formed"


def reference_input(reply: str) -> str | None:
    """The input an action reply gives, by the reference's rules (see the module docstring), or None."""
    lines = reply.strip().split("\n")
    for line in lines:
        if line.count("input:") == 1:
            text = line.split("input:")[1].strip()
        elif line.count("Input:") == 1:
            text = line.split("Input:")[1].strip()
        else:
            continue
        if text:
            return text
    for line in lines:
        if "(" in line and ")" in line[line.index("(") :]:
            return line[line.index("(") : line.rindex(")") + 1].strip()
    return None


def _arguments(text: str) -> tuple[Any, ...] | None:
    """The argument tuple the reference calls with: a tuple or list unpacked, anything else as one argument."""
    try:
        value = literal_value(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


#: Types of values the reference's forked process cannot pickle back to its parent: there the call's result is its
#: catch-all error, where this sandbox shows the value's repr.
_UNPICKLABLE = frozenset({"generator", "coroutine", "async_generator"})
#: What the reference shows for a result it could not hand back.
_UNKNOWN_ERROR = "Unknown error during execution"


def reference_result(result: ToolResult) -> tuple[Any, Any, str]:
    """A counted call's result as the reference holds it: the value as ``str`` shows it (or None), the error (or
    None), and the ``repr`` of the value it stores.

    A function that raised shows its exception's message as Python's ``str`` gives it, empty for an empty one (the
    reference writes ``Error: ``; the status was shown before, ``Error: error``). A generator, which the
    reference's process cannot pickle, is its ``Unknown error during execution``. A limit (timeout, memory, output)
    shows the sandbox's message (docs/protocol.md, row 4e).
    """
    if result.status == ToolStatus.OK:
        if result.value_type in _UNPICKLABLE:
            return None, _UNKNOWN_ERROR, repr(None)
        return _as_str(str(result.value)), None, str(result.value)
    if result.status == ToolStatus.ERROR:
        return None, result.error_message or "", repr(None)
    return None, result.error_message or result.status, repr(None)


def _as_str(value_repr: str) -> str:
    """What ``str`` gives for a returned value, from its ``repr`` text (the text itself when it is no literal)."""
    try:
        return str(literal_value(value_repr))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return value_repr


@dataclass
class ReferenceAgent:
    """The reference benchmark's interactive loop and in-context baseline, with its imported wording.

    Attributes:
        llm: The client.
        model: ``provider/model``.
        prompts: The reference protocol's templates.
        max_tokens: New tokens per request (the reference's 300), thinking included.
        window: Results shown in each prompt (the reference's 10).
        name: ``paper``: it stands in for the paper agent under ``--protocol reference``.
        overrides: The user's request settings (a temperature set there is sent; otherwise none is).
    """

    llm: LLMClient
    model: str
    prompts: PromptSet
    max_tokens: int = 300
    window: int = 10
    name: str = "paper"
    overrides: Overrides = field(default_factory=Overrides)

    async def _ask(self, result: AgentResult, env: Environment, prompt: str, step: str) -> str:
        completion = await self.llm.complete(
            self.model,
            [{"role": "user", "content": prompt}],
            temperature=self.overrides.temperature,
            max_tokens=self.overrides.max_tokens or self.max_tokens,
            reasoning_effort=self.overrides.reasoning_effort,
            sample=sample_key(env, result),
            thinking_room=False,  # the reference's limit is the whole reply's, thinking included
        )
        result.count(completion)
        whole = reference_reply(completion)
        read = cut_at_stop(whole)
        # Recorded as the reference's client returns it (cut at [STOP]: an export keeps what the reference keeps);
        # what came after the stop, and the thinking the provider showed, are kept beside it. The step's kind
        # (reason, act, reflect, incontext) lets an export apply the reference's per-step rules.
        data: dict[str, Any] = {"prompt": prompt, "step": step}
        if completion.reasoning:
            data["reasoning"] = completion.reasoning
        stop = whole.find("[STOP]")
        if stop >= 0:
            data["after_stop"] = whole[stop:]
        env.note("model", reply=read, **data)
        return read

    async def run(self, env: Environment, mode: str, budget: int) -> AgentResult:
        result = AgentResult(description="")
        # The initial examples as the dataset writes them (when the suite kept its text), in the reference's forms:
        # as its prompts show them (str of each part) and as its runs hand them to the code writer.
        initial = [reference_example(e.input, e.output, e.original) for e in env.initial_examples]
        shown: list[tuple[Any, Any, Any]] = [example.shown for example in initial]
        header = env.header
        if mode != "interactive":
            prompt = self.prompts.render("incontext", header=header, prev=results_list(shown))
            result.description = await self._ask(result, env, prompt, "incontext")
            result.concluded = True
            # An in-context run's code writer gets the dataset's own list of them (its all_examples column).
            result.examples = [example.listed for example in initial]
            return result
        # An interactive run stores every result, the initial examples' included, as repr of each part.
        stored: list[tuple[str, ...]] = [example.stored for example in initial]
        hypothesis = _UNSET_HYPOTHESIS
        for _ in range(budget or 20):
            prev = results_list(shown, self.window)
            reasoning = await self._ask(
                result,
                env,
                self.prompts.render("reason", header=header, critique="", prev=prev, hypothesis=hypothesis),
                "reason",
            )
            action = await self._ask(
                result,
                env,
                self.prompts.render("act", header=header, prev=prev, hypothesis=hypothesis, reasoning=reasoning),
                "act",
            )
            suggested = reference_input(action)
            if suggested is None:
                env.note("note", event="malformed_action", reply=action)
            called = await self._call(env, suggested)
            if called is None:  # the server's budget is spent (one smaller than this loop's): nothing more can run
                break
            value, error, value_repr = called
            shown.append((suggested, value, error))
            stored.append((repr(suggested), value_repr, repr(error)))
            # As the reference builds it: the reflection is told only the input it just tried.
            last = "Input: " + suggested if suggested is not None else f"None => Output: {value}, Error: {error}"
            reflection = await self._ask(
                result,
                env,
                self.prompts.render(
                    "reflect", header=header, prev=prev, hypothesis=hypothesis, reasoning=reasoning, last_inputs=last
                ),
                "reflect",
            )
            lowered = reflection.lower()
            if lowered.count("summary:") == 1:
                decision, hypothesis = (part.strip() for part in lowered.split("summary:"))
            else:
                decision, hypothesis = "no", lowered
            if "yes" in decision:
                result.concluded = True
                break
        result.description = hypothesis
        result.examples = stored
        return result

    async def _call(self, env: Environment, suggested: str | None) -> tuple[Any, Any, str] | None:
        """Run one suggested input through the server: (value as str shows it, error, repr of the value); None when
        the server refused it because the budget is spent (its result's status, whatever its text says)."""
        args = _arguments(suggested) if suggested is not None else None
        if args is None:
            return None, _NOT_A_LITERAL, repr(None)
        observation = await env.call({"args": repr(args)})
        if observation.status == ToolStatus.OVER_BUDGET:
            return None
        result = observation.result
        if observation.is_error or result is None:
            return None, observation.text, repr(None)
        return reference_result(result)
