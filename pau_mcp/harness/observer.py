"""The self-checking explorer: it tests its own description against the black box before it concludes.

After each hypothesis the observer has code written from its description alone (by the code writer, the scorer's
prompt), chooses fresh inputs where it expects that description to be wrong, calls the hidden tool on them (each
call counted against the budget, through MCP like every agent's) and runs its own code on every input seen so far
(free: in the sandbox on the harness's side, never through the server). Where the two disagree it revises the
description; it concludes when they agree on a whole round of fresh inputs, and stops when the budget ends. PAU's
finding is that models stop exploring too early, trusting an untested hypothesis: this agent concludes only on a
tested one. Each check is a ``check`` step of its trajectory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from wasm_runtime import Limits

from ..descriptions import description_problem
from ..grammar import read_inputs, visible_text
from ..llm import Completion, LLMClient, Overrides
from ..manifests import call_text
from ..prompts import PromptSet, load_prompts
from ..scoring.codematch import coder_messages, extract_code
from .agents import AgentResult, _after, _note_reply, _temperature, input_example, sample_key
from .environment import Environment
from .selfcheck import Seen, agrees, code_shown, seen_from_example, seen_from_result

__all__ = ["ObserverAgent"]

#: Checks against what was already seen, without new calls, in the in-context mode.
_INCONTEXT_ROUNDS = 3
#: The most rounds of an episode, whatever its budget (an unlimited budget gets ``_UNLIMITED_ROUNDS``).
_MAX_ROUNDS = 20
_UNLIMITED_ROUNDS = 10
#: The most disagreements shown when asking for a revision.
_SHOWN_DISAGREEMENTS = 10
#: The description shown before the first hypothesis (never submitted).
_NONE_YET = "(none yet)"


@dataclass(frozen=True)
class _Signature:
    header: str
    entry: str


@dataclass
class ObserverAgent:
    """Explores by testing its own description: hypothesis, code from it, fresh inputs, revision, until they agree.

    Attributes:
        llm: The client for both the agent's model and the code writer.
        model: The agent's model.
        sandbox: Runs the observer's own code (a ``wasm_runtime`` sandbox in the harness's process).
        coder_model: The code writer (``--coder-model``); None: the agent's own model.
        limits: Per-input limits for its own code (default: the sandbox's).
        round_size: Fresh inputs asked for per check.
        window: The most observations shown in a prompt (the latest).
        max_tokens: The longest reply of a step.
    """

    llm: LLMClient
    model: str
    sandbox: Any
    coder_model: str | None = None
    limits: Limits | None = None
    round_size: int = 4
    window: int = 40
    max_tokens: int = 600
    name: str = "observer"
    overrides: Overrides = field(default_factory=Overrides)
    prompts: PromptSet = field(default_factory=load_prompts)

    async def run(self, env: Environment, mode: str, budget: int) -> AgentResult:
        result = AgentResult(description="")
        seen = [seen_from_example(example.input, example.output) for example in env.initial_examples]
        description = await self._describe(result, env, "observer_hypothesis", seen, _NONE_YET)
        interactive = mode == "interactive"
        if not interactive:
            rounds = _INCONTEXT_ROUNDS
        elif budget:
            rounds = min(_MAX_ROUNDS, math.ceil(budget / self.round_size) + 2)
        else:
            rounds = _UNLIMITED_ROUNDS
        agreed = spent = False
        number = 0
        for number in range(1, rounds + 1):
            code = await self._code(result, env, description)
            fresh: list[Seen] = []
            if interactive:
                left = budget - env.queries if budget else self.round_size
                wanted = min(self.round_size, left)
                if wanted > 0:
                    for literal in await self._inputs(result, env, seen, description, wanted, number):
                        observation = await env.call({"args": literal})
                        if observation.status == "over_budget":
                            spent = True
                            break
                        if observation.counted and observation.result is not None:
                            fresh.append(seen_from_result(literal, observation.result))
                    seen += fresh
                spent = spent or bool(budget and env.queries >= budget)
            disagreements = await self._check(env, code, seen)
            env.note(
                "check", round=number, description=description, code=code, fresh=[s.literal for s in fresh],
                checked=len({s.literal for s in seen}), disagreements=disagreements, agreed=not disagreements,
            )  # fmt: skip
            if not disagreements and (fresh or not interactive):
                agreed = True
                break
            if disagreements:
                description = await self._refine(result, env, seen, description, disagreements)
            if spent:
                break
        result.description = description if description != _NONE_YET else ""
        result.concluded = agreed
        env.note("note", event="self_check", agreed=agreed, rounds=number, queries=env.queries)
        return result

    async def _ask(self, result: AgentResult, env: Environment, prompt: str, what: str) -> str:
        completion = await self.llm.complete(
            self.model,
            [{"role": "system", "content": self.prompts.text("agent_system")}, {"role": "user", "content": prompt}],
            temperature=_temperature(self.overrides),
            max_tokens=self.overrides.max_tokens or self.max_tokens,
            reasoning_effort=self.overrides.reasoning_effort,
            sample=sample_key(env, result),
        )
        self._count(result, env, completion, step=what, prompt=prompt)
        return visible_text(completion.text)

    def _count(self, result: AgentResult, env: Environment, completion: Completion, **data: Any) -> None:
        result.count(completion)
        _note_reply(env, completion, **data)

    def _context(self, env: Environment, seen: list[Seen], description: str) -> str:
        lines = [f"  {call_text(env.entry, s.literal)} -> {s.shown}" for s in seen[-self.window :]]
        return self.prompts.render(
            "observer_context", header=env.header, observations="\n".join(lines) or "  (none)", description=description
        )

    async def _describe(
        self, result: AgentResult, env: Environment, template: str, seen: list[Seen], description: str, **extra: str
    ) -> str:
        context = self._context(env, seen, description)
        reply = await self._ask(result, env, self.prompts.render(template, context=context, **extra), template)
        written = _after(reply, "DESCRIPTION:") or reply.strip()
        problem = description_problem(written)
        if problem is not None:  # JSON or a call where the description belongs: the last description stands
            env.note("note", event="not_a_description", problem=problem, reply=reply[:4096])
            return description
        return written

    async def _refine(
        self,
        result: AgentResult,
        env: Environment,
        seen: list[Seen],
        description: str,
        disagreements: list[dict[str, str]],
    ) -> str:
        shown = "\n".join(
            f"  {call_text(env.entry, d['input'])}: the hidden function {d['hidden']}; your description's code {d['code']}"
            for d in disagreements[:_SHOWN_DISAGREEMENTS]
        )
        if len(disagreements) > _SHOWN_DISAGREEMENTS:
            shown += f"\n  ... and {len(disagreements) - _SHOWN_DISAGREEMENTS} more"
        return await self._describe(result, env, "observer_refine", seen, description, disagreements=shown)

    async def _inputs(
        self, result: AgentResult, env: Environment, seen: list[Seen], description: str, count: int, round_: int
    ) -> list[str]:
        prompt = self.prompts.render(
            "observer_inputs", context=self._context(env, seen, description), count=count, arity=len(env.params),
            example=input_example(env, round_),
        )  # fmt: skip
        reply = await self._ask(result, env, prompt, "observer_inputs")
        tried = {s.literal.replace(" ", "") for s in seen}
        chosen: list[str] = []
        for literal in read_inputs(reply, len(env.params), limit=4 * count):
            key = literal.replace(" ", "")
            if key not in tried:
                tried.add(key)
                chosen.append(literal)
        if not chosen:
            env.note("note", event="no_fresh_inputs", reply=reply)
        return chosen[:count]

    async def _code(self, result: AgentResult, env: Environment, description: str) -> str | None:
        signature = env.facts or _Signature(env.header, env.entry)
        model = self.coder_model or self.model
        completion = await self.llm.complete(
            model, coder_messages(signature, description, knowledge=("signature", "description")), temperature=0.0,
            sample=sample_key(env, result),
        )  # fmt: skip
        self._count(result, env, completion, step="coder", model=model)
        return extract_code(completion.text, env.entry)

    async def _check(self, env: Environment, code: str | None, seen: list[Seen]) -> list[dict[str, str]]:
        """Run the code on every input seen (each once); the inputs where it disagrees with the hidden function."""
        distinct = list({s.literal: s for s in seen}.values())
        if not distinct:
            return []
        if code is None:
            return [{"input": s.literal, "hidden": _said(s), "code": "is missing (the code writer wrote none)"}
                    for s in distinct]  # fmt: skip
        try:
            outcomes = await self.sandbox.arun(code, [s.literal for s in distinct], entry=env.entry, limits=self.limits)
        except Exception as exc:  # the sandbox's infrastructure: this check cannot agree, the episode goes on
            env.note("note", event="check_failed", error=f"{type(exc).__name__}: {str(exc)[:300]}")
            return [{"input": s.literal, "hidden": _said(s), "code": "could not be run"} for s in distinct]
        return [
            {"input": s.literal, "hidden": _said(s), "code": _did(code_shown(outcome))}
            for s, outcome in zip(distinct, outcomes, strict=False)
            if not agrees(s, outcome)
        ]


def _said(seen: Seen) -> str:
    return f"returned {seen.shown}" if seen.status == "ok" else seen.shown


def _did(shown: str) -> str:
    return shown if shown.startswith(("raises ", "timeout", "memory", "output_limit", "crash")) else f"returned {shown}"
