"""What a tool call does, independent of MCP: check the arguments, keep the budget, run, record.

The MCP handlers and ``pau-mcp call`` both go through ``MethodService``, so a
call from the command line behaves exactly like a call from an agent.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import math
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import ValidationError

from wasm_runtime import EngineUnavailable, InvalidInput, Outcome, SandboxInterface, Status, parse_arguments

from ..contract import Feedback as ShownFeedback
from ..contract import RecordStatus, SubmitResult, SubmitStatus, ToolResult, ToolStatus, queries_left
from ..fairness import FairShare
from ..limits import ServiceLimits
from ..manifests import call_text
from ..rules import arity_problem
from ..runstore import CallRecord, RunStore, StoreBusy, StoreError
from ..sandboxing import SandboxNotReady
from ..tracing import record_phases
from .catalog import Catalog, Exposed
from .loopstore import LoopStore
from .schemas import describe, example_json
from .sessions import DEFAULT_LABEL, SessionState, StoreBudget

if TYPE_CHECKING:
    import jsonschema

__all__ = ["Feedback", "MethodService", "Reply", "refused"]

log = logging.getLogger("pau_mcp.server")

#: Arguments of at most this many bytes are checked and recorded on the event loop; larger ones in a thread, so
#: one big call never holds up the other sessions' requests. A hop to a thread costs about 0.1 ms: two per call
#: would add a tenth to the server's CPU per small call.
_INLINE_BYTES = 8 * 1024
#: Large arguments are checked one call at a time. Parsing 64 KiB of literal holds the interpreter lock for one
#: C call of 15-50 ms (``ast.parse``) and as much again of Python: sixteen such calls in sixteen threads kept the
#: event loop from the lock for 1.0-1.7 s, and every other session's requests waited. A literal is parsed by the
#: sandbox (``aparse_arguments``: a process of its own behind worker processes, else a thread) and the rest is
#: checked in a thread, each one call at a time: the large calls wait for each other, not everyone for them.
_LARGE_PARSES = 1
#: How much of a refused call's arguments the run store keeps (with their full size).
_KEPT_CHARS = 1024
#: Refused calls kept in the run store per method per credential; later ones are answered alike, not kept.
_KEPT_REFUSALS = 100
#: Credentials and methods remembered as having all their refusals kept (about 0.2 KB each).
_KEPT_FULL = 4096
#: The longest refusal message answered and recorded: messages quote at most a short piece of the arguments.
_MESSAGE_CHARS = 2048
#: The longest ``args`` form a refusal quotes as its example; longer ones are shown with their values elided.
_EXAMPLE_CHARS = 200

#: Feedback on a submission: ``await feedback(method_id, description, code, *, submission_id, counterexample,
#: credential)`` returns the scores in the shape of ``contract.Feedback`` (and records them under the submission);
#: with ``counterexample`` it may add one ``{"input", "expected"}`` pair, which costs the session one query;
#: ``credential`` says whose submission it is, for the fair share of the scorer's workers.
Feedback = Callable[..., Awaitable[dict[str, Any]]]


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
        limits: What one credential may take: calls per method (``budget``, 0 for no limit), submits answered with
            feedback, the largest arguments of one call, submissions per method (``ServiceLimits.from_settings``).
        feedback: Scores a submission for the agent (``--feedback score``); None records only.
        run_wrong_arity: Run a call with another number of arguments than the header has (it counts, and
            Python's ``TypeError`` is its result), as the reference protocol does, instead of refusing it.
        shares: Hands out the sandbox's workers fairly across credentials (``pau_mcp.fairness``); None runs calls
            in the order they come.
    """

    def __init__(
        self, catalog: Catalog, sandbox: SandboxInterface, store: RunStore, limits: ServiceLimits,
        feedback: Feedback | None = None, run_wrong_arity: bool = False, shares: FairShare | None = None,
    ) -> None:  # fmt: skip
        self.catalog = catalog
        self.sandbox = sandbox
        self.store = store
        self.limits = limits
        # The names the calls and submissions read, and the MCP layer (``service.budget`` in tool descriptions).
        self.budget = limits.budget
        self.feedback = feedback
        self.feedback_limit = limits.feedback_limit
        self.max_argument_bytes = limits.max_argument_bytes
        self.run_wrong_arity = run_wrong_arity
        self.max_submissions = limits.max_submissions
        self.shares = shares
        # Every store operation goes through it: nothing waits for the store's lock on the event loop.
        self.stored = LoopStore(store)
        self._validators: dict[str, jsonschema.protocols.Validator] = {}
        # (session, method) whose refused calls are all kept (``_KEPT_REFUSALS``): bounded, oldest forgotten first.
        self._refusals_kept: dict[tuple[int, str], None] = {}
        self._large_parses = anyio.CapacityLimiter(_LARGE_PARSES)

    def arguments(
        self, exposed: Exposed, given: dict[str, Any] | None, parsed: tuple[Any, ...] | None = None
    ) -> tuple[tuple[Any, ...], str]:
        """Turn tool arguments into an argument tuple and its literal.

        ``args``, when it is a non-blank string, is the call and the parameter properties are ignored
        (strict-mode clients must send every property, so they send placeholders); when it is null, blank or
        absent, the parameter properties are the call, each of the JSON type its schema gives.

        Raises:
            InvalidInput: with a message that says what was wrong and how to write it.
        """
        given = given or {}
        names = exposed.method.params
        unknown = sorted(set(given) - {*names, "args"})
        if unknown:
            raise InvalidInput(
                f"unknown argument{'s' * (len(unknown) > 1)} {', '.join(unknown)}: the parameters are "
                f"{', '.join(names) or 'none'}. {self._how(exposed)}"
            )
        literal_form = given.get("args")
        if literal_form is not None and not isinstance(literal_form, str):
            raise InvalidInput(
                f"`args` must be a string holding a Python literal tuple, not {type(literal_form).__name__}. "
                f"{self._how(exposed)}"
            )
        if literal_form is not None and literal_form.strip():
            args = parsed if parsed is not None else parse_arguments(literal_form)
        else:
            missing = [n for n in names if n not in given]
            if missing:
                raise InvalidInput(f"missing {', '.join(missing)}. {self._how(exposed)}")
            for name in names:
                schema = exposed.parameter_schemas[name]
                if not self._validator(schema).is_valid(given[name]):
                    raise InvalidInput(
                        f"{name} is {_shown(given[name])}, but in the JSON form {name} takes {describe(schema)}, "
                        "as the examples show; for any other value use `args`, e.g. "
                        + _args_example(tuple(given.get(n) for n in names))
                    )
                _json_safe(given[name], name)
            args = tuple(given[n] for n in names)
        problem = arity_problem(exposed.method.header, names, len(args))
        if problem and not self.run_wrong_arity:
            raise InvalidInput(f"{problem} {self._how(exposed)}")
        try:
            literal = repr(args)
        except ValueError:  # an int with more digits than Python converts to text (a hex literal can make one)
            raise InvalidInput(_HUGE_INT) from None
        return args, literal

    def _validator(self, schema: dict[str, Any]) -> jsonschema.protocols.Validator:
        key = json.dumps(schema, sort_keys=True)
        validator = self._validators.get(key)
        if validator is None:
            import jsonschema  # on the first call that needs it, not at every start (30 ms of a stdio handshake)

            validator = self._validators[key] = jsonschema.Draft202012Validator(schema)
        return validator

    @staticmethod
    def _how(exposed: Exposed) -> str:
        names = exposed.method.params
        example_literal = "(" + ", ".join(str(i) for i in range(len(names))) + ("," if len(names) == 1 else "") + ")"
        return f'Write for example {example_json(names, exposed.parameter_schemas)} or {{"args": "{example_literal}"}}.'

    def left(self, used: int) -> int | None:
        """Queries left of a budget with ``used`` taken; None without a budget."""
        return queries_left(self.budget, used)

    def _queries(self, state: SessionState, method_id: str) -> StoreBudget:
        """The session's budget of queries on a method."""
        return StoreBudget(self.store, state.store_id, method_id, self.budget)

    async def call(self, state: SessionState, exposed: Exposed, given: dict[str, Any] | None) -> Reply:
        """One call of a method tool.

        Oversized or malformed arguments and calls over budget are refused in one line: they do not count and
        never reach the sandbox. Every other call counts, whatever the function does, and is in the run store
        before this returns; a call the store cannot take (a full or read-only disk) does not count and its
        result is withheld, so every answer an agent saw was recorded.
        """
        given = given if given is not None else {}
        size = _size(given)
        if size > self.max_argument_bytes:
            message = (
                f"Invalid arguments: they are {_kib(size)} of JSON and this server takes at most "
                f"{_kib(self.max_argument_bytes)} per call (--max-argument-kb / PAU_MCP_MAX_ARGUMENT_KB on the "
                "server); try smaller inputs."
            )
            return await self._refuse(state, exposed, _recorded(given), size, ToolStatus.INVALID_INPUT, message)
        try:
            if size > _INLINE_BYTES:
                literal_form = given.get("args")
                parsed = None
                if (
                    isinstance(literal_form, str)
                    and literal_form.strip()
                    and not set(given) - {"args", *exposed.method.params}
                ):
                    parsed = await self.sandbox.aparse_arguments(literal_form, limiter=self._large_parses)
                args, literal = await anyio.to_thread.run_sync(
                    self.arguments, exposed, given, parsed, limiter=self._large_parses
                )
            else:
                args, literal = self.arguments(exposed, given)
        except InvalidInput as exc:
            return await self._refuse(
                state, exposed, _recorded(given), size, ToolStatus.INVALID_INPUT, f"Invalid arguments: {exc}"
            )
        method_id = exposed.method.id
        budget = self._queries(state, method_id)
        try:
            used = await self.stored.run(budget.reserve)
        except StoreError as exc:
            log.error("a call of %s could not be counted: %s", exposed.tool, exc)
            return _unrecorded(exc)
        if used is None:
            message = (
                f"The query budget for {exposed.tool} is spent ({self.budget} of {self.budget} calls used "
                f"{_scope_words(state)}); the function was not run. Call `submit` with your description now."
            )
            size = len(literal.encode("utf-8", "surrogatepass"))
            # Not a tool error: nothing is wrong with the call, and clients that retry tool errors (pydantic-ai) or
            # stop on them would end the agent's run before it submits. The status says what happened.
            return await self._refuse(
                state, exposed, literal, size, ToolStatus.OVER_BUDGET, message, is_error=False, used=self.budget
            )
        # Shielded: a counted call runs to its end and is recorded even if the client cancels it or goes away
        # (the sandbox's limits bound the wait). Abandoned halfway, a worker's reply would be left in its pipe
        # for whichever call used that worker next, and the call would count without a record.
        with anyio.CancelScope(shield=True):
            try:
                async with self._turn(state):
                    outcome = _printable(
                        await self.sandbox.acall(
                            exposed.method.source, args, entry=exposed.method.entry, engine=exposed.method.engine
                        )
                    )
            except SandboxNotReady as exc:
                # The first start on this machine is still building the sandbox: not this call's fault or the
                # agent's; it did not run or count, and the message says to call again.
                await self._refund(budget)
                return Reply(text=f"Not run: {exc}.", is_error=True)
            except EngineUnavailable as exc:
                # Not a passing failure: this method needs the numpy engine and this server lacks it, so retrying
                # cannot help. The call does not count; the operator is told what to install.
                await self._refund(budget)
                log.error("%s needs an engine this server lacks: %s", exposed.tool, exc)
                return Reply(
                    text="This function cannot run on this server (its sandbox engine is not installed), so the call "
                    "did not count; tell the server's operator.",
                    is_error=True,
                )
            except Exception:
                await self._refund(budget)
                log.exception("the sandbox failed on a call of %s", exposed.tool)
                return Reply(text="The sandbox could not run this call, so it did not count; try again.", is_error=True)
            record_phases(exposed.tool, outcome.phases)  # the sandbox's phases, as spans when traced
            large = size + len(outcome.value or "") + len(outcome.stdout) > _INLINE_BYTES
            problem = await self._record(
                state,
                exposed,
                literal,
                counted=True,
                status=ToolStatus(outcome.status.value),
                outcome=outcome,
                large=large,
            )
        if problem is not None:
            await self._refund(budget)
            return _unrecorded(problem)
        structured = ToolResult(
            status=ToolStatus(outcome.status.value), value=outcome.value, value_type=outcome.value_type,
            error_type=outcome.error_type, error_message=outcome.error_message, printed=outcome.stdout,
            queries_used=used, queries_left=self.left(used), budget_scope=state.scope,
        ).model_dump()  # fmt: skip
        text = _describe(exposed, args, outcome, used, self.budget, _scope_words(state))
        if state.stdio and "budget" not in state.notes:
            state.notes.add("budget")
            text += (
                "\nThis stdio server process is your session: its budget lasts while it runs. A client that starts a "
                "new server for every call starts again at 1 each time; keep one session open."
            )
        return Reply(text=text, structured=structured)

    def _turn(self, state: SessionState) -> contextlib.AbstractAsyncContextManager[None]:
        """The credential's turn at the sandbox (its session row stands for it: one per credential)."""
        return self.shares.turn(state.store_id) if self.shares is not None else contextlib.nullcontext()

    async def _refusal(
        self, state: SessionState, exposed: Exposed, status: ToolStatus, message: str, text: str | None = None,
        is_error: bool = True, used: int | None = None,
    ) -> Reply:  # fmt: skip
        """A call that did not run: its status and the budget as it stands (``used``, when the caller knows it),
        in the method tool's output schema."""
        if used is None:
            try:
                used = await self.stored.run(self._queries(state, exposed.method.id).used)
            except StoreError:
                used = 0
        structured = ToolResult(
            status=status, error_message=message, queries_used=used, queries_left=self.left(used),
            budget_scope=state.scope,
        ).model_dump()  # fmt: skip
        return Reply(text=text or message, structured=structured, is_error=is_error)

    async def _refuse(
        self, state: SessionState, exposed: Exposed, arguments: str, size: int, status: ToolStatus, message: str,
        is_error: bool = True, used: int | None = None,
    ) -> Reply:  # fmt: skip
        """A refused call: recorded with a bounded prefix of its arguments, answered with one line and its status."""
        if len(arguments) > _KEPT_CHARS:
            arguments = f"{arguments[:_KEPT_CHARS]}... [{size:,} bytes in all; the store keeps the first {_KEPT_CHARS:,} characters]"
        if len(message) > _MESSAGE_CHARS:
            message = f"{message[:_MESSAGE_CHARS]}... [{len(message):,} characters in all]"
        reason = message.removeprefix("Invalid arguments: ")
        if (state.store_id, exposed.method.id) not in self._refusals_kept:
            await self._record(state, exposed, arguments, counted=False, status=status, message=reason)
        return await self._refusal(
            state, exposed, status, reason, text=" ".join(message.split()), is_error=is_error, used=used
        )

    async def _record(
        self, state: SessionState, exposed: Exposed, arguments: str, counted: bool, status: ToolStatus,
        outcome: Outcome | None = None, message: str | None = None, large: bool = False,
    ) -> StoreError | None:  # fmt: skip
        """Store one call; returns None, or what kept the store from taking it (the server carries on)."""
        record = CallRecord(
            method_id=exposed.method.id,
            tool=exposed.tool,
            arguments=arguments,
            counted=counted,
            status=status,
            value=outcome.value if outcome else None,
            error_type=outcome.error_type
            if outcome
            else ("InvalidInput" if status == ToolStatus.INVALID_INPUT else None),
            error_message=outcome.error_message if outcome else message,
            outcome=outcome.to_dict() if outcome else None,
            duration_ms=outcome.duration_ms if outcome else None,
        )
        # A refusal is kept while its credential has fewer than _KEPT_REFUSALS of the method's: past that, the agent
        # still gets its answer, and the store does not grow with a flood of refused calls.
        write: Callable[[], object] = (
            functools.partial(self.store.record_call, state.store_id, record)
            if counted
            else functools.partial(self.store.record_refusal, state.store_id, record, _KEPT_REFUSALS)
        )
        try:
            # A large record is written in a thread, so other sessions' requests go on meanwhile (a PostgreSQL
            # commit, which waits on the network and the database's disk, always is: several can share one flush).
            written = await self.stored.run(write, in_thread=large)
        except StoreError as exc:
            log.error("a %s call of %s could not be recorded: %s", status, exposed.tool, exc)
            return exc
        if not counted and written is None:
            # The credential's refusals of this method are all kept: they are never deleted, so no later one will
            # be, and a flood of refused calls need not take the store's write lock again for each.
            self._refusals_kept[(state.store_id, exposed.method.id)] = None
            while len(self._refusals_kept) > _KEPT_FULL:
                self._refusals_kept.pop(next(iter(self._refusals_kept)))
        return None

    async def _refund(self, budget: StoreBudget) -> None:
        """Give back a query taken for a call that did not run or was not recorded (logged if the store refuses)."""
        try:
            await self.stored.run(budget.refund)
        except StoreError as exc:
            log.error("a query taken for %s could not be given back: %s", budget.method_id, exc)

    async def submit(self, state: SessionState, method: str, description: str, code: str | None) -> Reply:
        """Record a final description (and optional code) for a method the session can see, by tool name.

        With feedback (``--feedback score``), the first ``feedback_limit`` submits per method get the scores;
        a counterexample comes only while a query is left, and costs one (recorded as a counted call with
        status ``counterexample``). Later submits are recorded and get a receipt.
        """
        exposed = self.catalog.by_tool(method)
        if exposed is None or not state.sees(exposed.tool):
            return refused(
                SubmitStatus.UNKNOWN_TOOL,
                f"Unknown method {method!r}: give the tool name of a method you explored (e.g. fn_...).",
            )
        if not description or not description.strip():
            return refused(SubmitStatus.INVALID_INPUT, "The description is empty: say what the function does.")
        if len(description) > 20_000 or (code is not None and len(code) > 100_000):
            return refused(
                SubmitStatus.INVALID_INPUT,
                "The submission is too long (at most 20,000 characters of description and 100,000 of code).",
            )
        tool, method_id = exposed.tool, exposed.method.id
        # Two budgets: the submits answered with feedback, and the queries (a counterexample costs one).
        allowance = StoreBudget(self.store, state.store_id, method_id, self.feedback_limit, feedback=True)
        queries = self._queries(state, method_id)
        try:
            kept = await self._keep_submission(state, method_id, description.strip(), code, allowance, queries)
        except StoreError as exc:
            # Only what went wrong, never the store's path or URL (an agent reads this).
            log.error("a submission of %s could not be recorded: %s", tool, exc)
            return Reply(text=_unrecorded_text("submission", exc), is_error=True)
        if kept is None:  # the credential has made --max-submissions of them (concurrent submits took the last)
            return self._submissions_used(tool)
        submission_id, receipt, given, charged = kept
        result = SubmitResult(status=SubmitStatus.RECORDED, recorded=True, submission=receipt, method=tool)
        text = f"Recorded your description of {tool} (your submission {receipt} of it)."
        if self.feedback is None:
            return Reply(text=text, structured=result.sent())
        if given is None:
            result.feedback_left, result.status = 0, SubmitStatus.FEEDBACK_USED
            return Reply(
                text=text + f" No feedback: the {self.feedback_limit} submission(s) with feedback for {tool} in this "
                "session are used up.",
                structured=result.sent(),
            )
        result.feedback_left = max(0, self.feedback_limit - given)
        try:
            scores = await self.feedback(
                method_id,
                description.strip(),
                code,
                submission_id=submission_id,
                counterexample=charged,
                credential=state.store_id,
            )
        except BaseException:
            if charged:
                with anyio.CancelScope(shield=True):
                    await self._refund(queries)
            raise
        return await self._scored(state, exposed, result, text, scores, queries, charged)

    async def _keep_submission(
        self, state: SessionState, method_id: str, description: str, code: str | None, allowance: StoreBudget,
        queries: StoreBudget,
    ) -> tuple[int, int, int | None, bool] | None:  # fmt: skip
        """Reserve feedback (and a query for a counterexample) and record the submission; None when the credential
        has made ``max_submissions`` of the method. Returns the submission's id in the store, its receipt number
        (the credential's count of its submissions of the method, which is all an agent is told), the feedback
        answers taken (None: none) and whether a query was held. What it reserved goes back if nothing is recorded.

        Raises:
            StoreError: the store cannot take it (nothing kept).
        """
        stored = self.stored.run
        if self.max_submissions and (
            await stored(self.store.submissions_made, state.store_id, method_id) >= self.max_submissions
        ):
            return None
        given = await stored(allowance.reserve) if self.feedback else None
        answered = given is not None
        recorded: int | None = None
        charged = False
        try:
            # A query is held for the counterexample while one is left, and given back if none is shown.
            charged = answered and await stored(queries.reserve) is not None
            if self.max_submissions:
                recorded = await stored(
                    self.store.record_submission_within, state.store_id, method_id, description, code,
                    self.max_submissions, feedback=answered,
                )  # fmt: skip
            else:
                recorded = await stored(
                    self.store.record_submission, state.store_id, method_id, description, code, feedback=answered
                )
        finally:
            if recorded is None:  # not recorded: what it reserved goes back
                with anyio.CancelScope(shield=True):
                    if answered:
                        try:
                            await stored(allowance.refund)
                        except StoreError as exc:
                            log.error("a feedback answer taken for %s could not be given back: %s", method_id, exc)
                    if charged:
                        await self._refund(queries)
        if recorded is None:
            return None
        try:
            receipt = await stored(self.store.submission_receipt, state.store_id, method_id, recorded)
        except StoreError:
            receipt = 1  # recorded; only its number could not be read back
        return recorded, receipt, given, charged

    async def _scored(
        self, state: SessionState, exposed: Exposed, result: SubmitResult, text: str, scores: dict[str, Any],
        queries: StoreBudget, charged: bool,
    ) -> Reply:  # fmt: skip
        """The reply of a submit answered with feedback: the scores an agent may see, and a paid counterexample."""
        feedback = _visible_feedback(scores)
        example = feedback.counterexample if charged else None
        if example is not None:
            record = CallRecord(
                method_id=exposed.method.id, tool=exposed.tool, arguments=example.input, counted=True,
                status=RecordStatus.COUNTEREXAMPLE, value=example.expected,
            )  # fmt: skip
            if await self._record_paid(state, record) is not None:
                example = None  # not recorded, so not shown: its query goes back
        if example is None and charged:
            await self._refund(queries)
        shown = feedback.shown(counterexample=example is not None)
        try:
            used = await self.stored.run(queries.used)
        except StoreError:
            used = 0
        result.status, result.scores = SubmitStatus.SCORED, ShownFeedback.model_validate(shown)
        result.queries_used, result.queries_left = used, self.left(used)
        parts = [f"{k} {v}" for k, v in shown.items() if k != "counterexample"]
        text += " Scores: " + (", ".join(parts) or "none")
        if example is not None:
            text += (
                f". Counterexample: {call_text(exposed.method.entry, example.input)} returns {example.expected}"
                " (it cost one query)"
            )
        return Reply(text=text + ".", structured=result.sent())

    async def _record_paid(self, state: SessionState, record: CallRecord) -> StoreError | None:
        """Record a paid counterexample as a counted call; what kept the store from taking it, or None."""
        try:
            await self.stored.run(self.store.record_call, state.store_id, record)
        except StoreError as exc:
            log.error("a counterexample for %s could not be recorded: %s", record.tool, exc)
            return exc
        return None

    def _submissions_used(self, tool: str) -> Reply:
        message = (
            f"Not recorded: this credential has submitted {self.max_submissions} descriptions of {tool}, the most "
            "this server keeps per function (--max-submissions / PAU_MCP_MAX_SUBMISSIONS on the server); the latest "
            "of them stands (it is the one reports count)."
        )
        return refused(SubmitStatus.SUBMISSIONS_USED, message)


def _unrecorded_text(what: str, problem: StoreError) -> str:
    """Why a call or submission was not recorded, for the agent: the store's short reason and what to do, never its
    path or URL."""
    if isinstance(problem, StoreBusy):
        return (
            f"This {what} was not recorded: the server's run store is busy ({problem.reason}; another process holds "
            f"its write lock), so it did not count{' and its result is withheld' * (what == 'call')}. It is safe to "
            "send it again in a few seconds."
        )
    return (
        f"This {what} was not recorded (run store: {problem.reason}), so it did not count"
        f"{' and its result is withheld' * (what == 'call')}; the server's disk may be full or read-only: tell its "
        "operator."
    )


def _unrecorded(problem: StoreError) -> Reply:
    return Reply(text=_unrecorded_text("call", problem), is_error=True)


def refused(status: StrEnum, message: str) -> Reply:
    """A refused request to ``submit``, ``open`` or an unknown tool: a tool error with a machine-readable status
    (``contract.SubmitStatus``, ``OpenStatus`` or ``ToolStatus``)."""
    return Reply(text=message, structured={"status": status.value, "error_message": message}, is_error=True)


def _visible_feedback(scores: dict[str, Any]) -> ShownFeedback:
    """The part of the scorer's answer an agent may see (``contract.Feedback``: known keys only, a counterexample
    only its input and the method's output, never what the submitted code produced); an answer not in that shape
    shows nothing but that the scores are unavailable."""
    try:
        return ShownFeedback.model_validate(scores)
    except ValidationError as exc:
        log.error("the scorer's feedback is not in the contract's shape: %s", exc)
        return ShownFeedback(scores="unavailable: the scorer's answer could not be read")


_HUGE_INT = (
    f"an integer in the arguments has more than {sys.get_int_max_str_digits() or 4300:,} digits, the most Python "
    "turns into text and back; use a smaller number."
)


def _size(given: dict[str, Any]) -> int:
    """The arguments' size in bytes, as compact JSON (what a client sends)."""
    try:
        compact = json.dumps(given, ensure_ascii=False, separators=(",", ":"), default=str)
    except ValueError:  # an integer too long to print: refused when the arguments are read
        return 0
    return len(compact) if compact.isascii() else len(compact.encode("utf-8", "surrogatepass"))


def _recorded(given: dict[str, Any]) -> str:
    """The arguments as a refused call records them: JSON with sorted keys."""
    try:
        return json.dumps(given, sort_keys=True, default=str)
    except ValueError:
        return "<arguments holding an integer too long to print>"


def _kib(size: int) -> str:
    return f"{size // 1024:,} KiB" if size % 1024 == 0 else f"{size / 1024:,.1f} KiB"


def _valid_text(text: str) -> str:
    """Text that can be encoded: a lone surrogate (from a function's output) becomes its escape, e.g. \\ud800."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _printable(outcome: Outcome) -> Outcome:
    """The outcome with every text valid Unicode, so that JSON replies and the run store can carry it."""
    changes: dict[str, Any] = {
        name: _valid_text(value)
        for name in ("value", "value_type", "error_type", "error_message", "stdout")
        if isinstance(value := getattr(outcome, name), str) and not value.isascii()
    }
    return dataclasses.replace(outcome, **changes) if changes else outcome


def _args_example(values: tuple[Any, ...]) -> str:
    """The ``args`` form of a call's values, as a refusal suggests it: in full when short, else with the values
    elided (a refusal must not quote a megabyte of the agent's arguments back, nor the store keep it)."""
    try:
        literal = repr(values)
    except ValueError:  # an integer too long to print
        literal = ""
    if not literal or len(literal) > _EXAMPLE_CHARS:
        literal = "(" + ", ".join("..." for _ in values) + ("," if len(values) == 1 else "") + ")"
    return json.dumps({"args": literal})


def _shown(value: Any) -> str:
    try:
        text = json.dumps(value)
    except ValueError:  # an integer too long to print
        return "a number too long to show"
    return text if len(text) <= 60 else text[:57] + "..."


def _scope_words(state: SessionState) -> str:
    """Whose budget, in words: how a result says which calls it counts."""
    if state.scope == "process":
        return "in this server process" if state.stdio else "in this command"
    if state.scope == "token":
        return f"by the session token {state.key!r}"
    if state.scope == "subject":
        return f"by the signed-in subject {state.key!r}"
    if state.key == DEFAULT_LABEL:
        return "by the requests that name no label"
    return f"under the label {state.key!r}"


def _describe(exposed: Exposed, args: tuple[Any, ...], outcome: Outcome, used: int, budget: int, scope: str) -> str:
    # The call as the agent wrote it, from the argument reprs (linear; re-parsing the literal was quadratic).
    call = f"{exposed.method.entry}({', '.join(map(repr, args))})"
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
    text += f"\n(queries used: {used}" + (f" of {budget}" if budget else "") + f" {scope})"
    return text
