"""Checking a task's answer: by exact match with the frozen answer, and by re-executing the agent's calls.

An agent answers a task (``manifests.Task``) with a Python literal and, where the task asks for them, the calls
that compute it: each a tool name and an argument literal in which ``$1``, ``$2``, ... stand for the results of its
own earlier calls. The answer matches when it equals the frozen answer by the project's one equality rule
(``wasm_runtime.values_equal``). The calls are verified when they are the task's chain: running them again, in
order, with the gold functions in the sandbox (on the operator's side, never through the server) calls the task's
own methods in its order, each giving what the task's own step gives (run from the task's inputs), and ends in an
outcome that matches the answer. One call of some other function that happens to give the answer is no chain. A
task is correct when its answer matches and, if it asks for calls, they are verified.

What the agent wrote is hostile text: answers and arguments are read by the sandbox's own literal rules (capped at
64 KiB, nesting and digits limited), at most ``MAX_CALLS`` calls are run, and reasons are made of counts and fixed
words, never of what the agent or a function produced.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from wasm_runtime import InvalidInput, Limits, Outcome, Status, decode, outcomes_match, parse_arguments, values_equal

from ..contract import ScoreStatus
from ..manifests import Method, Task, placeholders, substitute

__all__ = ["MAX_CALLS", "TaskCall", "TaskCheck", "check_answer", "read_answer"]

log = logging.getLogger("pau_mcp.scoring")

#: The most calls of an answer that are re-executed (a task chains at most five methods).
MAX_CALLS = 10
_MAX_ANSWER_CHARS = 64 * 1024
_MAX_RESULT_CHARS = 2000
#: The most earlier results one call's arguments may use (each is written out: up to 2,000 characters).
_MAX_REFERENCES = 16


@dataclass(frozen=True)
class TaskCall:
    """One call an agent says computes (part of) its answer: a tool, and its arguments as a literal tuple."""

    tool: str
    args: str


@dataclass(frozen=True)
class TaskCheck:
    """How an answer to a task fared.

    Attributes:
        status: ``scored``, or ``error`` when the check could not be made (the sandbox failed).
        value: 1.0 for a correct task, else 0.0.
        hops: Methods the task chains.
        answer_matched: The answer equals the frozen one.
        asks_calls: The task asks for the calls.
        verified: The calls are the task's chain: its methods in its order, each giving what its step gives, ending in
            the answer (None when no calls were asked for).
        same_methods: The calls named the task's own methods, in its order.
        reason: Why the task is not correct, in fixed words and counts ("" when it is).
        calls: The calls as re-executed: tool, method id (None for an unknown tool), arguments as run, status.
    """

    status: ScoreStatus
    value: float
    hops: int
    answer_matched: bool
    asks_calls: bool
    verified: bool | None = None
    same_methods: bool | None = None
    reason: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)

    def detail(self) -> dict[str, Any]:
        """The score's detail, as the run store records it."""
        return asdict(self)


def read_answer(text: str) -> tuple[bool, Any]:
    """``(True, value)`` when ``text`` is a Python literal (surrounding backticks and whitespace aside)."""
    literal = text.strip().strip("`").strip()
    if not literal or len(literal) > _MAX_ANSWER_CHARS:
        return False, None
    try:
        return True, parse_arguments(f"({literal},)")[0]
    except (InvalidInput, ValueError, TypeError, MemoryError, RecursionError):
        return False, None


def _expected(task: Task) -> Any:
    assert task.answer is not None
    return decode(task.answer.encoded)


async def check_answer(
    task: Task, answer: str, calls: Sequence[TaskCall], *, methods: Mapping[str, Method], tools: Mapping[str, str],
    sandbox: Any, limits: Limits | None = None,
) -> TaskCheck:  # fmt: skip
    """Check an answer to a frozen task.

    Args:
        task: The task (its answer frozen).
        answer: The agent's answer, a Python literal.
        calls: The calls it gave (read only when the task asks for them).
        methods: The suite's methods by id.
        tools: Each tool name of the deployment the agent used -> its method id.
        sandbox: Runs the gold functions.
        limits: Per-call limits (default: the sandbox's).

    Raises:
        ValueError: the task has no frozen answer.
    """
    if task.answer is None:
        raise ValueError(f"task {task.id} has no frozen answer; run `pau-mcp manifests freeze` first")
    readable, value = read_answer(answer)
    try:
        matched = readable and task.answer.status == Status.OK and values_equal(value, _expected(task))
    except Exception:  # a frozen encoding that cannot be decoded is damaged data: no match
        matched = False
    verified: bool | None = None
    same: bool | None = None
    run: list[dict[str, Any]] = []
    reason = "" if matched else ("the answer is not a Python literal" if not readable else "the answer differs")
    if task.asks_calls:
        try:
            verified, same, run, why = await _reexecute(task, calls, methods, tools, sandbox, limits)
        except Exception as exc:  # the sandbox's infrastructure: no check could be made, the run goes on
            log.warning("the sandbox failed re-executing calls for %s: %s", task.id, str(exc)[:300])
            return TaskCheck("error", 0.0, task.hops, matched, True, reason="the sandbox failed re-executing the calls")
        if not verified:
            reason = "; ".join(part for part in (reason, why) if part)
    correct = matched and (verified is not False)
    return TaskCheck(
        status="scored", value=1.0 if correct else 0.0, hops=task.hops, answer_matched=matched,
        asks_calls=task.asks_calls, verified=verified, same_methods=same, reason=reason, calls=run,
    )  # fmt: skip


async def _reexecute(
    task: Task, calls: Sequence[TaskCall], methods: Mapping[str, Method], tools: Mapping[str, str], sandbox: Any,
    limits: Limits | None,
) -> tuple[bool, bool, list[dict[str, Any]], str]:  # fmt: skip
    """Run the calls again in order with the gold functions; ``(verified, same methods, calls as run, why not)``."""
    if not calls:
        return False, False, [], "no calls were given"
    if len(calls) > MAX_CALLS:
        return False, False, [], f"more than {MAX_CALLS} calls were given"
    results: list[str] = []
    run: list[dict[str, Any]] = []
    outcomes: list[Outcome] = []
    last: Outcome | None = None
    for number, call in enumerate(calls, start=1):
        method = methods.get(tools.get(call.tool, ""))
        if method is None:
            run.append({"tool": call.tool[:64], "method": None, "args": call.args[:200], "status": "unknown_tool"})
            return False, False, run, f"call {number} names a tool that is not one of the suite's"
        if len(call.args) > _MAX_ANSWER_CHARS:
            return False, False, run, f"call {number} has arguments longer than {_MAX_ANSWER_CHARS:,} characters"
        refs = placeholders(call.args)
        if len(refs) > _MAX_REFERENCES:
            return False, False, run, f"call {number} uses earlier results more than {_MAX_REFERENCES} times"
        if any(ref >= number for ref in refs):
            return False, False, run, f"call {number} uses the result of a call that is not before it"
        literal = substitute(call.args, results)
        (last,) = await sandbox.arun(method.source, [literal], entry=method.entry, limits=limits, engine=method.engine)
        outcomes.append(last)
        run.append({"tool": call.tool, "method": method.id, "args": literal[:200], "status": last.status.value})
        if last.status is not Status.OK:
            return False, False, run, f"call {number} did not return a value"
        text = _repr(last)
        if text is None:
            return False, False, run, f"call {number} returned a value later calls cannot take"
        results.append(text)
    same = [r["method"] for r in run] == [step.method for step in task.steps]
    assert task.answer is not None and last is not None
    if not outcomes_match(task.answer.outcome(), last):
        return False, same, run, "re-executing the calls does not give the answer"
    if not same:  # a call that happens to give the answer is not the task's chain of calls
        return False, False, run, "the calls are not the task's chain (its methods, in its order)"
    step = await _off_the_chain(task, methods, outcomes, sandbox, limits)
    if step is not None:
        return False, True, run, f"call {step} does not give what the task's step {step} gives"
    return True, True, run, ""


async def _off_the_chain(
    task: Task, methods: Mapping[str, Method], outcomes: Sequence[Outcome], sandbox: Any, limits: Limits | None
) -> int | None:
    """The first step (1-based) whose call gave another outcome than the task's own step gives, run with the gold
    functions from the task's own inputs; None when every call gives what its step gives."""
    results: list[str] = []
    for number, (step, got) in enumerate(zip(task.steps, outcomes, strict=True), start=1):
        method = methods[step.method]
        literal = substitute(step.input, results)
        (gold,) = await sandbox.arun(method.source, [literal], entry=method.entry, limits=limits, engine=method.engine)
        if not outcomes_match(gold, got):
            return number
        text = _repr(gold)
        if text is None:
            return number
        results.append(text)
    return None


def _repr(outcome: Outcome) -> str | None:
    try:
        text = repr(decode(outcome.encoded))
    except Exception:
        return None
    return text if len(text) <= _MAX_RESULT_CHARS else None
