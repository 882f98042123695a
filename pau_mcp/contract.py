"""The tool contract: what every side of a hidden-method tool agrees on, written once.

The server writes it, the harness, the Inspect task and every other client read it, the scorer writes its feedback
in it, and the reports name its score kinds; none of them reaches into another's internals for it.

* **Statuses.** A method tool's result has a ``ToolStatus``: the sandbox's own (``wasm_runtime.Status``) for a call
  that reached the function, and two more for calls the server refused (``over_budget``, ``unknown_tool``). ``submit``
  answers with a ``SubmitStatus``, ``open`` with an ``OpenStatus``.
* **Results.** ``ToolResult``, ``SubmitResult`` and ``OpenResult`` are the structured results, and the tools' output
  schemas are generated from them (``OUTPUT_SCHEMA``, ``SUBMIT_OUTPUT_SCHEMA``, ``OPEN_OUTPUT_SCHEMA``), as the
  ``submit`` and ``open`` input schemas are from ``SubmitArguments`` and ``OpenArguments``.
* **Facts.** ``MethodFacts`` (with its ``KnownExample`` lines) is what an agent may know of a method before calling
  it, published in each method tool's ``_meta[FACTS_KEY]``.
* **Feedback.** ``Feedback`` is everything ``submit`` may show of a submission's scores (``--feedback score``), as the
  scorer writes it and the server passes it on.
* **The budget rule.** A call that reaches the function takes one query of its ``Budget`` before it runs; one that
  never ran, or could not be recorded, gives it back; over the limit nothing is taken and the call is refused.
  ``QueryBudget`` keeps the count in memory (the RL environment); the server keeps it in the run store, shared by
  every process (``pau_mcp.server.sessions.StoreBudget``).
* **Labels.** What a session label or run name may be (``label_problem``).
* **Scoring.** What a run's episodes are scored with (``Scoring``: ``pau_mcp.scoring.Scorer`` is one), as the harness
  and the Ray workers use it, without importing the scorer.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, field_validator

__all__ = [
    "FACTS_KEY",
    "OPEN_INPUT_SCHEMA",
    "OPEN_OUTPUT_SCHEMA",
    "OPEN_TOOL",
    "OUTPUT_SCHEMA",
    "RAN",
    "REFUSED",
    "SUBMIT_INPUT_SCHEMA",
    "SUBMIT_OUTPUT_SCHEMA",
    "SUBMIT_TOOL",
    "Scoring",
    "TASK_KIND",
    "Budget",
    "BudgetScope",
    "Counterexample",
    "EpisodeEnd",
    "EpisodeState",
    "Feedback",
    "KnownExample",
    "MethodFacts",
    "OpenArguments",
    "OpenResult",
    "OpenStatus",
    "Original",
    "QueryBudget",
    "ScoreStatus",
    "TaskStatus",
    "TerminalTaskStatus",
    "SubmitArguments",
    "SubmitResult",
    "SubmitStatus",
    "ToolResult",
    "ToolStatus",
    "RecordStatus",
    "CallStatus",
    "label_problem",
    "portable_schema",
]

#: The tool every agent ends with, and the one a handshake-era connection narrows itself with.
SUBMIT_TOOL = "submit"
OPEN_TOOL = "open"

#: The ``_meta`` key of a method tool's ``MethodFacts``. MCP's rule for ``_meta`` keys: a prefix of dot-separated
#: labels (reverse DNS), a slash, a name; prefixes whose second label is ``mcp`` or ``modelcontextprotocol`` are
#: the protocol's own, which ``pau-mcp`` is not.
FACTS_KEY = "dev.pau-mcp/method"

#: The score kind a task episode's answer is recorded as (``pau_mcp.scoring.tasks`` checks it).
TASK_KIND = "task"


# -- statuses ---------------------------------------------------------------------------------------------------


class ToolStatus(StrEnum):
    """How a method tool's call ended: the sandbox's statuses (``wasm_runtime.Status``, every one of them, spelled
    here so that a client of the contract needs no sandbox; ``tests/pau_mcp/test_contract.py`` holds them equal), and
    the server's refusals."""

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    MEMORY = "memory"
    OUTPUT_LIMIT = "output_limit"
    INVALID_INPUT = "invalid_input"  # the sandbox's refusal of a malformed literal, and the server's
    CRASH = "crash"
    OVER_BUDGET = "over_budget"  # the budget is spent: the function was not run
    # No such tool is visible to the caller: submit's and open's answer (a call of an unknown tool is the
    # protocol's error -32602, never a result).
    UNKNOWN_TOOL = "unknown_tool"


#: Statuses of a call that did not run it and did not count: the arguments were wrong, the budget is spent, or no
#: such tool is visible.
REFUSED: tuple[str, ...] = (ToolStatus.INVALID_INPUT, ToolStatus.OVER_BUDGET, ToolStatus.UNKNOWN_TOOL)
#: Statuses of a call that ran the function (and counted): the sandbox's own, but for invalid_input.
RAN: tuple[str, ...] = tuple(status.value for status in ToolStatus if status not in REFUSED)


class RecordStatus(StrEnum):
    """What else a call record's status may say (the run store's ``calls``): rows no tool call of an agent made."""

    COUNTEREXAMPLE = "counterexample"  # a submit's paid counterexample: the method's own output on one input
    TASK = "task"  # a fixture tool's call that became a task
    INPUT_REQUIRED = "input_required"  # a fixture tool's call that asked its client for input


#: The status of a recorded call (``runstore.CallRecord``).
CallStatus = ToolStatus | RecordStatus


class SubmitStatus(StrEnum):
    """How ``submit`` answered."""

    RECORDED = "recorded"  # a receipt
    SCORED = "scored"  # recorded, with feedback
    FEEDBACK_USED = "feedback_used"  # recorded; no feedback left
    SUBMISSIONS_USED = "submissions_used"  # not recorded: the credential made the most submissions kept per method
    UNKNOWN_TOOL = ToolStatus.UNKNOWN_TOOL.value  # not recorded: no such method visible
    INVALID_INPUT = ToolStatus.INVALID_INPUT.value  # not recorded: the arguments were wrong


class OpenStatus(StrEnum):
    """How ``open`` answered."""

    OK = ToolStatus.OK.value
    UNKNOWN_TOOL = ToolStatus.UNKNOWN_TOOL.value
    INVALID_INPUT = ToolStatus.INVALID_INPUT.value


#: How a score ended: ``scored`` (it has a value), ``unscored`` (the judge's reply had no readable rating) or
#: ``error`` (no score could be made: the model could not be asked, the sandbox failed, the method has no tests).
#: The scorers' results, the run store's score rows and the reports' scores all hold one.
ScoreStatus = Literal["scored", "unscored", "error"]
#: How an episode of a run stands: planned (``pending``), started (``running``), ended with or without a submission
#: (``done``), or ended by an error (``failed``).
EpisodeState = Literal["pending", "running", "done", "failed"]
#: How an episode ended, as the harness records it.
EpisodeEnd = Literal["done", "failed"]
#: Where a task of the Tasks extension stands (the protocol's task statuses): running (``working``), waiting for its
#: client's answers (``input_required``), or ended (``TerminalTaskStatus``).
TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
#: The statuses a task never leaves.
TerminalTaskStatus = Literal["completed", "failed", "cancelled"]


# -- schemas ---------------------------------------------------------------------------------------------------------


def portable_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON Schema as clients read it best: references inlined, no titles or defaults, nullables as two
    ``anyOf`` branches (never a type array), and ``additionalProperties`` as the model says."""
    schema = model.model_json_schema()
    definitions = schema.pop("$defs", {})
    schema.pop("description", None)  # a model's docstring is for this code's readers

    def clean(node: Any) -> Any:
        if isinstance(node, list):
            return [clean(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            inlined = {k: v for k, v in definitions[node["$ref"].rsplit("/", 1)[1]].items() if k != "description"}
            inlined.update({k: v for k, v in node.items() if k != "$ref"})
            node = inlined
        return {
            key: (
                {name: clean(sub) for name, sub in value.items()} if key == "properties" else clean(value)
            )  # fmt: skip
            for key, value in node.items()
            if key not in ("title", "default")
        }

    cleaned: dict[str, Any] = clean(schema)
    cleaned.setdefault("required", [])
    return cleaned


# -- a method tool's result -------------------------------------------------------------------------------------------

#: Whose budget a result counts: a stdio server process's (or a command's), a session token's, a label's, or a
#: signed-in token's subject's.
BudgetScope = Literal["process", "token", "label", "subject"]


class ToolResult(BaseModel):
    """The structured result of every method tool, whether it ran or was refused (``OUTPUT_SCHEMA`` is its schema)."""

    status: ToolStatus = Field(
        json_schema_extra={"enum": [*RAN, *REFUSED]},
        description="ok: returned a value; error: raised an exception; timeout, memory, output_limit, crash: "
        "a limit ended the call; invalid_input, over_budget, unknown_tool: not run and not counted",
    )
    value: str | None = Field(default=None, description="repr() of the returned value")
    value_type: str | None = Field(default=None, description="type of the returned value")
    error_type: str | None = Field(default=None, description="exception (or limit) name")
    error_message: str | None = Field(default=None, description="the exception's message, or why the call was refused")
    printed: str = Field(default="", description="text the function printed, if any")
    queries_used: int = Field(description="calls of this function counted for your budget")
    queries_left: int | None = Field(description="null when there is no budget")
    budget_scope: BudgetScope = Field(
        default="process",
        description="whose budget this is: this server process (stdio), your session token's, the label your "
        "requests name (the server's default label when they name none), or the subject your sign-in names",
    )

    @property
    def ran(self) -> bool:
        """True when the call reached the function (and so used budget)."""
        return self.status in RAN

    def shown(self) -> str:
        """The outcome as agents read it: the value's repr, or ``raises Type: message`` (a refusal: its status)."""
        if self.status == ToolStatus.OK:
            return str(self.value)
        if self.status == ToolStatus.ERROR:
            return f"raises {self.error_type}: {self.error_message}"
        return f"{self.status}: {self.error_message}"


#: The structured result of every method tool, generated from ``ToolResult``.
OUTPUT_SCHEMA: dict[str, Any] = portable_schema(ToolResult)


# -- what an agent may know before calling ------------------------------------------------------------------------


class Original(BaseModel):
    """An initial example as its dataset stores it, for the reference protocol only (docs/protocol.md).

    The reference benchmark shows its initial examples as the dataset's own text: the input as written
    (``7`` where this project's literal is ``(7,)``) and the stored output (``[8, -20]`` where the sandbox's
    value reads ``(8, -20)``). This project's own protocol never shows it.

    Attributes:
        input: The input text, as the dataset writes it.
        output: The stored output as JSON text (``json.dumps`` of the value the dataset holds: the reference
            shows ``str`` of that value).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: str = Field(min_length=1, max_length=64 * 1024)
    output: str = Field(min_length=1, max_length=64 * 1024)

    @field_validator("output")
    @classmethod
    def _check_json(cls, value: str) -> str:
        try:
            json.loads(value)
        except (ValueError, RecursionError):
            raise ValueError("must be JSON text (json.dumps of the stored output)") from None
        return value

    def value(self) -> Any:
        """The stored output, decoded."""
        return json.loads(self.output)


class KnownExample(BaseModel):
    """One initial example, as the tool description shows it and as data."""

    model_config = ConfigDict(frozen=True)

    line: str = Field(description="the example as the description shows it, e.g. test_func(1, 'a') -> 3")
    input: str = Field(description="the arguments as a Python literal tuple, e.g. (1, 'a'): what `args` takes")
    output: str = Field(description="the outcome as shown: the value's repr, or 'raises Type: message'")
    original: Original | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="the example as its dataset writes it (input text, stored output as JSON text), when the suite "
        "keeps it: what the reference benchmark's protocol shows instead (docs/protocol.md)",
    )


class MethodFacts(BaseModel):
    """What an agent may know of a method before calling it, as data: each method tool's ``_meta[FACTS_KEY]``.

    The same facts as the tool description, from the same agent view (``pau_mcp.server.Exposed``): never the source,
    the gold description or the tests. Clients (the harness among them) read these instead of parsing the description.
    """

    model_config = ConfigDict(frozen=True)

    header: str = Field(description="the function's header, e.g. def test_func(arg0, arg1):")
    entry: str = Field(
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="the function's name in the header and in the example lines"
    )
    params: list[str] = Field(description="the parameter names, in order (the tool's JSON form has one property each)")
    examples: list[KnownExample] = Field(description="the initial examples, in the description's order")
    budget: int | None = Field(description="calls of this function allowed per session; null when unlimited")


# -- feedback ------------------------------------------------------------------------------------------------------

# Fields sent only when they apply: their schema is the plain JSON type (never null), as clients expect.
_SentBool = Annotated[bool | None, WithJsonSchema({"type": "boolean"})]
_SentInt = Annotated[int | None, WithJsonSchema({"type": "integer"})]
_SentStr = Annotated[str | None, WithJsonSchema({"type": "string"})]


class Counterexample(BaseModel):
    """One hidden test input the submitted code gets wrong, and what the hidden function gives for it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: str
    expected: str


_FRACTION_OR_ERROR = {"anyOf": [{"type": "number", "minimum": 0, "maximum": 1}, {"const": "error", "type": "string"}]}
Fraction = Annotated[float, Field(ge=0, le=1)]


class Feedback(BaseModel):
    """Everything ``submit`` may show of a submission's scores (``--feedback score``): the scorer writes it
    (``ScoreResult.feedback``), the server passes it on, the scorer endpoint's agent view is it.

    Never the gold description, the source, another test input, or any text the submitted code produced (its
    values, exception names and messages, printed text). Keys that do not apply are absent.
    """

    model_config = ConfigDict(frozen=True, extra="ignore", json_schema_extra={"additionalProperties": False})

    judge_rating: Annotated[
        Annotated[int, Field(ge=1, le=5)] | Literal["unscored", "error"] | None,
        WithJsonSchema(
            {
                "anyOf": [
                    {"type": "integer", "minimum": 1, "maximum": 5},
                    {"enum": ["unscored", "error"], "type": "string"},
                ]
            }
        ),
    ] = None
    code_match: Annotated[Fraction | Literal["error"] | None, WithJsonSchema(_FRACTION_OR_ERROR)] = None
    direct_code_match: Annotated[Fraction | Literal["error"] | None, WithJsonSchema(_FRACTION_OR_ERROR)] = None
    direct_code_note: _SentStr = Field(default=None, description="the reason in fixed words and counts")
    direct_code_failures: Annotated[
        dict[str, Annotated[int, Field(ge=1)]] | None,
        WithJsonSchema({"type": "object", "additionalProperties": {"type": "integer", "minimum": 1}}),
    ] = Field(default=None, description="{fixed words: count} for the test inputs the submitted code gets wrong")
    counterexample: Annotated[
        Counterexample | None,
        WithJsonSchema({
            "type": "object", "properties": {"input": {"type": "string"}, "expected": {"type": "string"}},
            "required": ["input", "expected"], "additionalProperties": False,
        }),
    ] = Field(default=None, description="only when one was paid for with a query")  # fmt: skip
    scores: _SentStr = Field(default=None, description="unavailable: the scorer failed (no scores)")

    def shown(self, counterexample: bool) -> dict[str, Any]:
        """What an agent sees: the keys that apply, a counterexample only when ``counterexample`` (paid for)."""
        return self.model_dump(mode="json", exclude_none=True, exclude=None if counterexample else {"counterexample"})


#: What ``Feedback`` is on the wire.
_FEEDBACK_SCHEMA: dict[str, Any] = portable_schema(Feedback)


# -- submit and open ----------------------------------------------------------------------------------------------


class SubmitArguments(BaseModel):
    """The arguments of ``submit`` (``SUBMIT_INPUT_SCHEMA`` is their schema)."""

    model_config = ConfigDict(extra="forbid")

    # Mirrored in the Mcp-Param-Method header over HTTP in the 2026-07-28 era (SEP-2243), so a proxy can route or
    # count submissions per function without reading bodies; the server checks that header and body agree.
    method: str = Field(
        description="the tool name of the function, as listed, e.g. fn_2c9d41e07a",
        json_schema_extra={"x-mcp-header": "Method"},
    )
    description: str = Field(description="what the function does")
    code: str | None = Field(
        default=None,
        description="optional (null or absent for none): your implementation, a function named as in the method's "
        "header",
    )


class SubmitResult(BaseModel):
    """The structured result of ``submit`` (``SUBMIT_OUTPUT_SCHEMA``); only what applies is sent."""

    status: SubmitStatus = Field(
        json_schema_extra={"enum": [s.value for s in SubmitStatus]},
        description="recorded: a receipt; scored: with feedback; feedback_used: recorded, no feedback left; "
        "submissions_used, unknown_tool, invalid_input: not recorded",
    )
    recorded: _SentBool = None
    submission: _SentInt = None
    method: _SentStr = None
    feedback_left: _SentInt = None
    scores: Annotated[Feedback | None, WithJsonSchema(_FEEDBACK_SCHEMA)] = Field(
        default=None, description="the feedback given (--feedback score)"
    )
    queries_used: _SentInt = None
    queries_left: int | None = None
    error_message: _SentStr = None

    def sent(self) -> dict[str, Any]:
        """The result as sent: the fields set, and nothing else."""
        return self.model_dump(mode="json", exclude_unset=True)


class OpenArguments(BaseModel):
    """The arguments of ``open`` (``OPEN_INPUT_SCHEMA``)."""

    model_config = ConfigDict(extra="forbid")

    methods: list[str] = Field(min_length=1)


class OpenResult(BaseModel):
    """The structured result of ``open`` (``OPEN_OUTPUT_SCHEMA``); only what applies is sent."""

    status: OpenStatus = Field(json_schema_extra={"enum": [s.value for s in OpenStatus]})
    methods: Annotated[list[str] | None, WithJsonSchema({"type": "array", "items": {"type": "string"}})] = None
    error_message: _SentStr = None

    def sent(self) -> dict[str, Any]:
        """The result as sent: the fields set, and nothing else."""
        return self.model_dump(mode="json", exclude_unset=True)


SUBMIT_INPUT_SCHEMA: dict[str, Any] = portable_schema(SubmitArguments)
SUBMIT_OUTPUT_SCHEMA: dict[str, Any] = portable_schema(SubmitResult)
OPEN_INPUT_SCHEMA: dict[str, Any] = portable_schema(OpenArguments)
OPEN_OUTPUT_SCHEMA: dict[str, Any] = portable_schema(OpenResult)


# -- the budget rule --------------------------------------------------------------------------------------------


class Budget(Protocol):
    """The queries one explorer may spend on one method: ``limit`` of them (0: no limit).

    A call that will reach the function ``reserve``s one first; if it never runs, or cannot be recorded, it is
    ``refund``ed. Over the limit ``reserve`` takes nothing and the call is refused: it does not count.
    """

    @property
    def limit(self) -> int:
        """Queries allowed; 0 for no limit."""
        ...

    def reserve(self) -> int | None:
        """Take one query; returns the queries used with it, or None (taking nothing) when the budget is spent."""
        ...

    def refund(self) -> None:
        """Give back a query ``reserve`` took for a call that did not run or was not recorded."""
        ...

    def used(self) -> int:
        """Queries taken so far."""
        ...


def queries_left(limit: int, used: int) -> int | None:
    """Queries left of a budget of ``limit`` with ``used`` taken; None without a limit."""
    return None if not limit else max(0, limit - used)


@dataclass
class QueryBudget:
    """A ``Budget`` kept in memory, for one explorer in one process (the RL environment). Thread-safe.

    Attributes:
        limit: Queries allowed; 0 for no limit.
    """

    limit: int
    _used: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def reserve(self) -> int | None:
        """Take one query; the queries used with it, or None (nothing taken) when spent."""
        with self._lock:
            if self.limit and self._used >= self.limit:
                return None
            self._used += 1
            return self._used

    def refund(self) -> None:
        """Give back a query taken for a call that did not run."""
        with self._lock:
            self._used = max(0, self._used - 1)

    def used(self) -> int:
        """Queries taken so far."""
        return self._used

    @property
    def left(self) -> int | None:
        """Queries left; None without a limit."""
        return queries_left(self.limit, self._used)

    @property
    def spent(self) -> bool:
        """True when no query is left."""
        return bool(self.limit) and self._used >= self.limit


# -- labels ---------------------------------------------------------------------------------------------------------

_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/@+-]{0,127}")


def label_problem(value: str, what: str = "session label") -> str | None:
    """Why ``value`` cannot be a session or run label, or None when it can."""
    if _LABEL.fullmatch(value):
        return None
    shown = repr(value[:40] + ("..." if len(value) > 40 else ""))
    return (
        f"the {what} {shown} is not allowed: use 1 to 128 letters, digits and _ . : / @ + - "
        "(starting with a letter or digit)"
    )


# -- scoring, as a run uses it --------------------------------------------------------------------------------------


class TokenCount(Protocol):
    """Tokens some model requests spent."""

    @property
    def input_tokens(self) -> int: ...

    @property
    def output_tokens(self) -> int: ...


class Scores(Protocol):
    """Every score of one submission, as a run records it (``pau_mcp.scoring.ScoreResult``)."""

    @property
    def usage(self) -> TokenCount: ...

    @property
    def cost_usd(self) -> float: ...

    @property
    def direct(self) -> Any: ...


class TaskChecked(Protocol):
    """How an answer to a task was checked (``pau_mcp.scoring.tasks.TaskCheck``)."""

    @property
    def status(self) -> ScoreStatus: ...

    @property
    def value(self) -> float: ...

    def detail(self) -> dict[str, Any]: ...


class ProtocolName(Protocol):
    """Whose prompts and rules scores follow (``pau_mcp.protocol.Protocol``): its name."""

    @property
    def name(self) -> str: ...


class Scoring(Protocol):
    """What a run scores its episodes with: submissions, task answers, and the protocol they follow.

    ``pau_mcp.scoring.Scorer`` is one; the harness and the Ray workers type their scorer by this, so that they never
    import the scorer's internals.
    """

    @property
    def protocol(self) -> ProtocolName: ...

    async def score(
        self,
        method_id: str,
        description: str | None = None,
        code: str | None = None,
        *,
        examples: Sequence[Sequence[Any]] | None = None,
        kinds: Collection[str] | None = None,
    ) -> Scores:
        """Score one submission (the kinds asked for: ``judge``, ``codematch``, ``direct``)."""
        ...

    async def check_task(
        self, task_id: str, answer: str, calls: Sequence[Any], tools: Mapping[str, str]
    ) -> TaskChecked:
        """Check an answer to a task, its calls re-executed with the gold functions."""
        ...

    async def aclose(self) -> None:
        """Close the models' clients."""
        ...
