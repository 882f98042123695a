"""What a tool call does, independent of MCP: check the arguments, keep the budget, run, record.

The MCP handlers and ``pau-mcp call`` both go through ``MethodService``, so a
call from the command line behaves exactly like a call from an agent.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import jsonschema

from wasm_runtime import InvalidInput, Outcome, Sandbox, Status, parse_arguments

from ..manifests import call_text
from ..rules import arity_problem
from ..runstore import CallRecord, RunStore
from .catalog import Catalog, Exposed
from .sessions import SessionState

__all__ = ["FEEDBACK_KEYS", "Feedback", "MethodService", "Reply"]

#: Feedback on a submission: ``await feedback(method_id, description, code, *, submission_id, counterexample)``
#: returns what the agent may see (and records the scores under the submission); with ``counterexample`` it may
#: add one ``{"input", "expected"}`` pair, which costs the session one query.
Feedback = Callable[..., Awaitable[dict[str, Any]]]

#: The feedback an agent may see; anything else the scorer returns is dropped.
FEEDBACK_KEYS = ("judge_rating", "code_match", "direct_code_match", "direct_code_note", "counterexample", "scores")


@dataclass(frozen=True)
class Reply:
    """A tool result before it becomes MCP: text for people, structured data, and whether it is an error."""

    text: str
    structured: dict[str, Any] | None = None
    is_error: bool = False


def _json_safe(value: Any, path: str) -> None:
    """JSON arguments may not hold non-finite numbers: their repr is not a literal the sandbox accepts."""
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInput(
            f'{path} is {value}, which JSON cannot carry; use the args form, e.g. "(1e999,)" for infinity'
        )
    if isinstance(value, list):
        for i, item in enumerate(value):
            _json_safe(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            _json_safe(item, f"{path}[{key!r}]")


class MethodService:
    """Runs method calls and submissions for every session of one server.

    Args:
        catalog: The methods served.
        sandbox: Where calls run.
        store: Where calls and submissions are recorded.
        budget: Counted calls allowed per method per session; 0 for no limit.
        feedback: Scores a submission for the agent (``--feedback score``); None records only.
        feedback_limit: Submits answered with feedback per method per budget identity.
    """

    def __init__(
        self, catalog: Catalog, sandbox: Sandbox, store: RunStore, budget: int, feedback: Feedback | None = None,
        feedback_limit: int = 3,
    ) -> None:  # fmt: skip
        self.catalog = catalog
        self.sandbox = sandbox
        self.store = store
        self.budget = budget
        self.feedback = feedback
        self.feedback_limit = feedback_limit
        self._validators = {e.tool: jsonschema.Draft202012Validator(e.input_schema()) for e in catalog}

    def arguments(self, exposed: Exposed, given: dict[str, Any] | None) -> tuple[tuple[Any, ...], str]:
        """Turn tool arguments into an argument tuple and its literal.

        Raises:
            InvalidInput: with a message that says what was wrong and how to write it.
        """
        given = given or {}
        errors = sorted(self._validators[exposed.tool].iter_errors(given), key=lambda e: list(e.path))
        if errors:
            raise InvalidInput(
                f"the arguments do not match the tool's schema: {errors[0].message}. {self._how(exposed)}"
            )
        names = exposed.method.params
        if "args" in given:
            if len(given) > 1:
                raise InvalidInput(f"give either `args` or {', '.join(names)}, not both. {self._how(exposed)}")
            args = parse_arguments(given["args"])
        else:
            missing = [n for n in names if n not in given]
            if missing:
                raise InvalidInput(f"missing {', '.join(missing)}. {self._how(exposed)}")
            for name in names:
                _json_safe(given[name], name)
            args = tuple(given[n] for n in names)
        problem = arity_problem(exposed.method.header, names, len(args))
        if problem:
            raise InvalidInput(f"{problem} {self._how(exposed)}")
        literal = repr(args)
        return args, literal

    @staticmethod
    def _how(exposed: Exposed) -> str:
        names = exposed.method.params
        example_json = json.dumps({n: i for i, n in enumerate(names)})
        example_literal = "(" + ", ".join(str(i) for i in range(len(names))) + ("," if len(names) == 1 else "") + ")"
        return f'Write for example {example_json} or {{"args": "{example_literal}"}}.'

    def left(self, state: SessionState, exposed: Exposed) -> int | None:
        """Queries left for a method in a session; None without a budget."""
        return None if not self.budget else max(0, self.budget - state.used.get(exposed.tool, 0))

    async def call(self, state: SessionState, exposed: Exposed, given: dict[str, Any] | None) -> Reply:
        """One call of a method tool.

        Malformed arguments and calls over budget are errors that do not
        count and never reach the sandbox; every other call counts, whatever
        the function does. Each call is in the run store before this returns.
        """
        raw = json.dumps(given or {}, sort_keys=True, default=str)
        try:
            args, literal = self.arguments(exposed, given)
        except InvalidInput as exc:
            self._record(state, exposed, raw, counted=False, status="invalid_input", message=str(exc))
            return Reply(text=f"Invalid arguments: {exc}", is_error=True)
        with state.lock:
            used = state.used.get(exposed.tool, 0)
            if self.budget and used >= self.budget:
                over = True
            else:
                over = False
                state.used[exposed.tool] = used + 1
        if over:
            message = f"The query budget for {exposed.tool} is spent ({self.budget} of {self.budget} calls used in this session); submit your description now."
            self._record(state, exposed, literal, counted=False, status="over_budget", message=message)
            return Reply(text=message, is_error=True)
        outcome = await self.sandbox.acall(
            exposed.method.source, args, entry=exposed.method.entry, engine=exposed.method.engine
        )
        self._record(state, exposed, literal, counted=True, status=outcome.status.value, outcome=outcome)
        used_now = state.used[exposed.tool]
        structured = {
            "status": outcome.status.value,
            "value": outcome.value,
            "value_type": outcome.value_type,
            "error_type": outcome.error_type,
            "error_message": outcome.error_message,
            "printed": outcome.stdout,
            "queries_used": used_now,
            "queries_left": self.left(state, exposed),
        }
        return Reply(text=_describe(exposed, literal, outcome, used_now, self.budget), structured=structured)

    def _record(
        self, state: SessionState, exposed: Exposed, arguments: str, counted: bool, status: str,
        outcome: Outcome | None = None, message: str | None = None,
    ) -> None:  # fmt: skip
        self.store.record_call(
            state.store_id,
            CallRecord(
                method_id=exposed.method.id,
                tool=exposed.tool,
                arguments=arguments,
                counted=counted,
                status=status,
                value=outcome.value if outcome else None,
                error_type=outcome.error_type if outcome else ("InvalidInput" if status == "invalid_input" else None),
                error_message=outcome.error_message if outcome else message,
                outcome=outcome.to_dict() if outcome else None,
                duration_ms=outcome.duration_ms if outcome else None,
            ),
        )

    async def submit(self, state: SessionState, method: str, description: str, code: str | None) -> Reply:
        """Record a final description (and optional code) for a method the session can see, by tool name.

        With feedback (``--feedback score``), the first ``feedback_limit`` submits per method get the scores;
        a counterexample comes only while a query is left, and costs one (recorded as a counted call with
        status ``counterexample``). Later submits are recorded and get a receipt.
        """
        exposed = self.catalog.by_tool(method)
        if exposed is None or not state.sees(exposed.tool):
            return Reply(
                text=f"Unknown method {method!r}: give the tool name of a method you explored (e.g. fn_...).",
                is_error=True,
            )
        if not description or not description.strip():
            return Reply(text="The description is empty: say what the function does.", is_error=True)
        if len(description) > 20_000 or (code is not None and len(code) > 100_000):
            return Reply(
                text="The submission is too long (at most 20,000 characters of description and 100,000 of code).",
                is_error=True,
            )
        tool = exposed.tool
        with state.lock:
            given = state.budget.feedback.get(tool, 0)
            answered = self.feedback is not None and given < self.feedback_limit
            charged = answered and (not self.budget or state.used.get(tool, 0) < self.budget)
            if answered:
                state.budget.feedback[tool] = given + 1
            if charged:
                state.used[tool] = state.used.get(tool, 0) + 1  # held for the counterexample, returned if none
        try:
            submission_id = self.store.record_submission(
                state.store_id, exposed.method.id, description.strip(), code, feedback=answered
            )
        except BaseException:
            self._refund(state, tool, charged)
            raise
        structured: dict[str, Any] = {"recorded": True, "submission": submission_id, "method": tool}
        text = f"Recorded your description of {tool} (submission {submission_id})."
        if self.feedback is None:
            return Reply(text=text, structured=structured)
        structured["feedback_left"] = max(0, self.feedback_limit - state.budget.feedback.get(tool, 0))
        if not answered:
            return Reply(
                text=text + f" No feedback: the {self.feedback_limit} submission(s) with feedback for {tool} in this "
                "session are used up.",
                structured=structured,
            )
        try:
            scores = await self.feedback(
                exposed.method.id, description.strip(), code, submission_id=submission_id, counterexample=charged
            )
        except BaseException:
            self._refund(state, tool, charged)
            raise
        shown = _visible_feedback(scores, charged)
        example = shown.get("counterexample")
        if charged and example:
            self.store.record_call(
                state.store_id,
                CallRecord(
                    method_id=exposed.method.id, tool=tool, arguments=example["input"], counted=True,
                    status="counterexample", value=example["expected"],
                ),
            )  # fmt: skip
        else:
            self._refund(state, tool, charged)
        structured["scores"] = shown
        structured["queries_used"] = state.used.get(tool, 0)
        structured["queries_left"] = self.left(state, exposed)
        parts = [f"{k} {v}" for k, v in shown.items() if k != "counterexample"]
        text += " Scores: " + (", ".join(parts) or "none")
        if example:
            text += (
                f". Counterexample: {call_text(exposed.method.entry, example['input'])} returns {example['expected']}"
                " (it cost one query)"
            )
        return Reply(text=text + ".", structured=structured)

    @staticmethod
    def _refund(state: SessionState, tool: str, charged: bool) -> None:
        if charged:
            with state.lock:
                state.used[tool] = max(0, state.used.get(tool, 0) - 1)


def _visible_feedback(scores: dict[str, Any], counterexample: bool) -> dict[str, Any]:
    """The part of the scorer's answer an agent may see: known keys only; a counterexample only when it was paid
    for, and only its input and the method's output (never what the submitted code produced)."""
    shown = {key: scores[key] for key in FEEDBACK_KEYS if key in scores and key != "counterexample"}
    example = scores.get("counterexample")
    if counterexample and isinstance(example, dict):
        given, expected = example.get("input"), example.get("expected")
        if isinstance(given, str) and isinstance(expected, str):
            shown["counterexample"] = {"input": given, "expected": expected}
    return shown


def _describe(exposed: Exposed, literal: str, outcome: Outcome, used: int, budget: int) -> str:
    call = call_text(exposed.method.entry, literal)
    if outcome.status is Status.OK:
        text = f"{call} returned {outcome.value}"
    elif outcome.status is Status.ERROR:
        text = (
            f"{call} raised {outcome.error_type}: {outcome.error_message}"
            if outcome.error_message
            else f"{call} raised {outcome.error_type}"
        )
    else:
        text = f"{call} stopped ({outcome.status}): {outcome.error_message}"
    if outcome.stdout:
        text += f"\nIt printed:\n{outcome.stdout}"
    text += f"\n(queries used: {used}" + (f" of {budget})" if budget else ")")
    return text
