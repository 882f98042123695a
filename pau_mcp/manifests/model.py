"""The manifest: everything the service knows about one hidden method.

Pydantic models, because manifests are an edge: files written by people and
importers. Agents only ever see a method's header and its initial examples
(``AgentView``); source, gold description and the test suite stay hidden.
"""

from __future__ import annotations

import ast
import hashlib
import hmac
import re
from datetime import UTC, date, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator, model_validator

from wasm_runtime import Outcome, Status, parse_python

from ..contract import Original

__all__ = [
    "MAX_TASK_STEPS",
    "Case",
    "FrozenOutcome",
    "GoldCheck",
    "Method",
    "Original",
    "Provenance",
    "SuiteInfo",
    "Tags",
    "Task",
    "TaskProvenance",
    "TaskStep",
    "call_arguments",
    "call_text",
    "placeholders",
    "substitute",
    "tool_name",
]

_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
_ID = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}/[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_HEADER = re.compile(r"^def (?P<entry>[A-Za-z_]\w*)\((?P<params>[^)]*)\):$")
# Line breaks as the Python parser counts them (not form feeds or Unicode separators).
_LINE_BREAK = re.compile(rb"\r\n|\r|\n")

StatusName = Status  # the sandbox's list of statuses is the one list


def call_text(entry: str, literal: str) -> str:
    """How a call reads: ``test_func(1, 'a')`` for the literal ``(1, 'a')``, ``test_func([1])`` for ``[1]``."""
    text = literal.strip()
    try:
        node = parse_python(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return f"{entry}({text})"
    if isinstance(node, ast.Tuple):
        # Node positions are UTF-8 byte columns within lines. Encoding once and slicing by absolute offsets keeps
        # this linear; ast.get_source_segment splits the whole text again for every element (quadratic: a 1 MiB
        # literal took 25 s).
        data = text.encode("utf-8", "surrogatepass")
        starts = [0, *(match.end() for match in _LINE_BREAK.finditer(data))]
        parts = [_segment(data, starts, e) for e in node.elts]
        return f"{entry}({', '.join(parts)})"
    return f"{entry}({text})"


def _segment(data: bytes, starts: list[int], node: ast.expr) -> str:
    """The text of ``node`` in the UTF-8 ``data`` whose lines begin at the byte offsets ``starts``."""
    end_line, end_column = node.end_lineno, node.end_col_offset
    if end_line is None or end_column is None:  # never for a node the parser made; ast.unparse reads the same
        return ast.unparse(node)
    return data[starts[node.lineno - 1] + node.col_offset : starts[end_line - 1] + end_column].decode(
        "utf-8", "surrogatepass"
    )


def call_arguments(call: str) -> str | None:
    """The argument-tuple literal of a call as ``call_text`` writes it: ``(1, 'a')`` for ``test_func(1, 'a')``.

    The inverse of ``call_text``: one argument keeps its trailing comma, so ``test_func((3, -1, 2))`` gives
    ``((3, -1, 2),)``, one tuple argument, not three. None when the text is not a call with positional
    arguments.
    """
    text = call.strip()
    try:
        node = parse_python(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not isinstance(node, ast.Call) or node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
        return None
    parts = [ast.get_source_segment(text, argument) or ast.unparse(argument) for argument in node.args]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def tool_name(key: str, method_id: str) -> str:
    """The opaque MCP tool name of a method in a deployment: ``fn_`` and 10 hex digits of HMAC-SHA256(key, id).

    Keyed, because method ids are public (with their gold descriptions): without the deployment's key, no one can
    tell which method a tool is, and the same key gives the same names on every server and after every restart.

    Args:
        key: The deployment's secret (``Settings.deployment_key()``).
        method_id: The method, e.g. ``builtin/b001``.
    """
    return "fn_" + hmac.new(key.encode(), method_id.encode(), hashlib.sha256).hexdigest()[:10]


class FrozenOutcome(BaseModel):
    """An outcome recorded by ``manifests freeze``, in the sandbox's lossless typed encoding."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    status: StatusName
    value: str | None = None
    value_type: str | None = None
    encoded: Any = None
    error_type: str | None = None
    error_message: str | None = None

    @classmethod
    def of(cls, outcome: Outcome) -> FrozenOutcome:
        """Freeze a sandbox outcome (dropping timing, fuel and printed text)."""
        return cls(
            status=outcome.status,
            value=outcome.value,
            value_type=outcome.value_type,
            encoded=outcome.encoded,
            error_type=outcome.error_type,
            error_message=outcome.error_message,
        )

    def outcome(self) -> Outcome:
        """The sandbox outcome this records."""
        return Outcome(
            status=Status(self.status),
            value=self.value,
            value_type=self.value_type,
            encoded=self.encoded,
            error_type=self.error_type,
            error_message=self.error_message,
        )

    def shown(self) -> str:
        """How the outcome reads for a person or an agent: the value's repr, or the exception."""
        if self.status == "ok":
            return str(self.value)
        if self.status == "error":
            return (
                f"raises {self.error_type}: {self.error_message}" if self.error_message else f"raises {self.error_type}"
            )
        return f"{self.status}: {self.error_message}"


class Case(BaseModel):
    """One input (a Python literal argument tuple) and, once frozen, what the method does with it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: str = Field(min_length=1, max_length=64 * 1024)
    outcome: FrozenOutcome | None = None
    original: Original | None = None

    def frozen_outcome(self) -> FrozenOutcome:
        """The recorded outcome, for code that has checked the method is frozen (``Method.frozen``).

        Raises:
            ValueError: the case was never frozen.
        """
        if self.outcome is None:
            raise ValueError(f"the case {self.input[:80]!r} was never frozen: run `pau-mcp manifests freeze` first")
        return self.outcome


class GoldCheck(BaseModel):
    """How ``pau-mcp create`` checked a gold description: code a model wrote from it, matched on the hidden tests."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    coder_model: str
    match: float = Field(ge=0, le=1, description="Share of the hidden tests the code matched.")
    min_match: float = Field(ge=0, le=1, description="The share it had to reach (--gold-min-match).")
    source: Literal["docs", "model"] = Field(description="docs: the dataset's own; model: written by the model.")


class Provenance(BaseModel):
    """Where a method comes from (operator-only, like everything but the header and examples)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: str
    original_id: str | None = None
    original_name: str | None = None  # the function's real name, which nothing agent-facing may reveal
    license: str | None = None
    url: str | None = None
    variant_of: str | None = None  # the method a variant was made from (pau-mcp create --variants-of)
    variant_change: str | None = None  # what was changed to make it
    gold_check: GoldCheck | None = None
    published: date | None = None  # when its function was first published (pau-mcp create --after)
    dated_by: Literal["git", "mtime"] | None = None  # how that was known: the file's first commit, or its mtime


class Tags(BaseModel):
    """Searchable facts about a method."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    arity: int = Field(ge=0, le=16)
    value_types: list[str] = Field(default_factory=list)
    difficulty: Literal["easy", "medium", "hard"] | None = None
    hidden_behaviour: list[str] = Field(
        default_factory=list, description="Special inputs behind which behaviour hides: 'negative', 'empty', ..."
    )


class Method(BaseModel):
    """One hidden method.

    ``source`` may be written in a file as a list of lines (reviews well in
    diffs); it is always a single string in memory.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    header: str
    params: list[str]
    entry: str = "test_func"
    source: str
    description: str = Field(min_length=1)
    examples: list[Case] = Field(default_factory=list)
    tests: list[Case] = Field(default_factory=list)
    provenance: Provenance
    tags: Tags
    #: The sandbox engine that runs the method; None picks it from what the source imports
    #: (``wasm_runtime.engines.engine_for``: numpy, pandas or scipy send it to the numpy engine).
    engine: Literal["python", "numpy"] | None = None

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if not _ID.match(value):
            raise ValueError("must be 'suite/name' in lower-case letters, digits, '_', '.' or '-'")
        return value

    @field_validator("source", mode="before")
    @classmethod
    def _join_lines(cls, value: Any) -> Any:
        if isinstance(value, list) and all(isinstance(line, str) for line in value):
            value = "\n".join(value)
        if isinstance(value, str):  # the form a file keeps: no trailing blank lines, one final newline
            return value.rstrip("\n") + "\n"
        return value

    @field_validator("description")
    @classmethod
    def _strip(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the gold description must not be empty")
        return value.strip()

    @model_validator(mode="after")
    def _check_header(self) -> Method:
        match = _HEADER.match(self.header)
        if not match:
            raise ValueError(f"header must look like 'def test_func(arg0, arg1):', got {self.header!r}")
        params = [p.strip() for p in match["params"].split(",") if p.strip()]
        if match["entry"] != self.entry:
            raise ValueError(f"header names {match['entry']!r} but entry is {self.entry!r}")
        if params != self.params:
            raise ValueError(f"header parameters {params} differ from params {self.params}")
        if self.tags.arity != len(self.params):
            raise ValueError(f"tags.arity is {self.tags.arity} but there are {len(self.params)} parameters")
        return self

    @field_serializer("source")
    def _split_lines(self, value: str) -> list[str]:
        return value.rstrip("\n").split("\n")

    @property
    def suite(self) -> str:
        """The suite this method belongs to."""
        return self.id.split("/", 1)[0]

    @property
    def name(self) -> str:
        """The method's name inside its suite."""
        return self.id.split("/", 1)[1]

    def agent_view(self, key: str) -> dict[str, Any]:
        """Everything an agent may see of this method: tool name (in the deployment of ``key``), header, examples."""
        return {
            "tool": tool_name(key, self.id),
            "header": self.header,
            "examples": [
                {"input": case.input, "output": case.outcome.shown() if case.outcome else None}
                for case in self.examples
            ],
        }

    @property
    def frozen(self) -> bool:
        """True when every example and test has a recorded outcome."""
        return all(case.outcome is not None for case in (*self.examples, *self.tests))


class SuiteInfo(BaseModel):
    """``suite.json``: what a suite is and where it comes from, and, for a suite ``pau-mcp create`` made, when and
    with which models (what tells whether a model may have seen it: ``pau_mcp.freshness``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    dataset: str = ""
    license: str | None = None
    url: str | None = None
    created: datetime | None = Field(default=None, description="When `pau-mcp create` wrote the suite (UTC).")
    models: list[str] = Field(default_factory=list, description="The models that made it (writer, then code writer).")
    after: date | None = Field(
        default=None, description="`create --after`: only functions first published after this day."
    )
    first_published: date | None = Field(
        default=None,
        description="The earliest day one of its functions was first published, when `create --after` dated them "
        "(for variants: the day of the suite they come from).",
    )
    public_source: bool = Field(
        default=False, description="Its functions (or those its variants come from) are from a public dataset or suite."
    )

    @field_validator("created")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("give the time zone, e.g. 2026-12-07T10:00:00Z")
        return value.astimezone(UTC) if value is not None else None

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError("suite names use lower-case letters, digits, '_', '.' or '-'")
        return value


#: The most methods a task chains.
MAX_TASK_STEPS = 5
# An earlier step's result in a step's input: $1 for the first step's, up to $9. Each match is two characters with
# no backtracking, so finding them is linear.
_PLACEHOLDER = re.compile(r"\$([1-9])")


def placeholders(text: str) -> list[int]:
    """The earlier steps a step's input refers to (``$1`` is the first step's result), in order of appearance."""
    return [int(match.group(1)) for match in _PLACEHOLDER.finditer(text)]


def substitute(text: str, results: list[str]) -> str:
    """A step's input with each ``$k`` replaced by ``results[k - 1]``, a literal (the ``repr`` of that result).

    Raises:
        IndexError: ``$k`` refers to a result not given.
    """
    return _PLACEHOLDER.sub(lambda match: results[int(match.group(1)) - 1], text)


class TaskStep(BaseModel):
    """One call of a task's chain: a method of the suite and its arguments."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: str = Field(description="The method's id (suite/name): a method of the task's own suite.")
    input: str = Field(
        min_length=1,
        max_length=64 * 1024,
        description="The arguments as a Python literal tuple; $1, $2, ... anywhere in it stand for the results of "
        "the first, second, ... step (as their repr).",
    )


class TaskProvenance(BaseModel):
    """How a task was made (operator-only, like everything of a task but its question)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    made_by: Literal["create", "hand"] = "hand"
    model: str | None = None  # the model that wrote the question (pau-mcp create --tasks-for)


class Task(BaseModel):
    """A question over a suite's hidden methods whose answer needs calls to one or more of them.

    Agents see the question only: its steps (the calls that answer it) and its answer stay with the operator. The
    answer is frozen by running the steps' gold functions in the sandbox (``pau-mcp manifests freeze``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    question: str = Field(min_length=1, max_length=8000)
    steps: list[TaskStep] = Field(min_length=1, max_length=MAX_TASK_STEPS)
    asks_calls: bool = Field(
        default=False,
        description="The answer must come with the calls that compute it; they are re-executed to check it.",
    )
    answer: FrozenOutcome | None = None
    provenance: TaskProvenance = Field(default_factory=TaskProvenance)

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if not _ID.match(value):
            raise ValueError("must be 'suite/name' in lower-case letters, digits, '_', '.' or '-'")
        return value

    @model_validator(mode="after")
    def _check_steps(self) -> Task:
        used: set[int] = set()
        for number, step in enumerate(self.steps, start=1):
            if step.method.split("/", 1)[0] != self.suite:
                raise ValueError(f"step {number} calls {step.method!r}, which is not a method of suite {self.suite!r}")
            refs = placeholders(step.input)
            later = sorted({ref for ref in refs if ref >= number})
            if later:
                raise ValueError(f"step {number} uses ${later[0]}, which is not the result of an earlier step")
            if number > 1 and not refs:
                raise ValueError(f"step {number} uses no earlier result ($1 ...): a task is one chain of calls")
            used.update(refs)
        unused = [n for n in range(1, len(self.steps)) if n not in used]
        if unused:
            raise ValueError(f"the result of step {unused[0]} is never used: a task is one chain of calls")
        return self

    @property
    def suite(self) -> str:
        """The suite this task belongs to."""
        return self.id.split("/", 1)[0]

    @property
    def name(self) -> str:
        """The task's name inside its suite."""
        return self.id.split("/", 1)[1]

    @property
    def hops(self) -> int:
        """How many methods the task chains."""
        return len(self.steps)

    @property
    def frozen(self) -> bool:
        """True when the answer is recorded."""
        return self.answer is not None
