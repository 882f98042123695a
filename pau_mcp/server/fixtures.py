"""Fixture suites: tools, resources, templates and prompts whose behaviour is data, for protocol test suites.

The official MCP conformance suite calls tools, resources and prompts of its own (``test_simple_text``,
``test://static-text``, ...) that no suite of hidden methods has. ``pau-mcp serve --suite conformance`` serves
them from ``conformance.json`` (packaged beside this module), through the same server as any suite: each request
is resolved to its credential, a fixture tool call holds one of its call slots and is recorded in the run store,
and the transports, limits and protocol eras are the server's own. A fixture suite is never part of a default
catalog, and none of it is a hidden method: its tools have plain names and public behaviour.

A fixture's behaviour is a list of **steps**, each one action:

* ``log`` a message (``notifications/message``, within the level the client chose),
* report ``progress`` to the request's progress token,
* ``sleep_ms`` (or ``sleep_s_from`` an argument, at most 300 s),
* ``ask`` the client one or more questions at once (``elicitation/create``, ``sampling/createMessage``,
  ``roots/list``; ``only_if_capable`` asks only those the client declared it can answer),
* ``notify`` the open ``subscriptions/listen`` streams that a list changed,
* ``task``: from here on the tool may run as a task (the Tasks extension, when the client negotiated it),
* ``raise`` a JSON-RPC error (a protocol error, unlike a ``result`` with ``isError``),

then a ``result`` (a ``CallToolResult``) or ``messages`` (a prompt's). Strings in requests, results and messages may
quote ``${path}`` (``args.NAME``, ``answers.KEY.content.FIELD``, ``blobs.NAME``, ``uri.VARIABLE``,
``progress_token``, ``answered``), with ``${path|default}`` for a value that may be missing; a value that is not
text is quoted as compact JSON. How a question reaches the client depends on the era, and is the server's business
(``effects``): a request to the client on the handshake era's stream, an ``InputRequiredResult`` in the 2026-07-28
era, ``tasks/get``'s ``inputRequests`` inside a task.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, Literal, Protocol

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.uri_template import UriTemplate
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .capabilities import ASKS, missing_capability

__all__ = [
    "FIXTURE_SUITES",
    "Effects",
    "FixtureError",
    "FixturePrompt",
    "FixtureResource",
    "FixtureSuite",
    "FixtureTemplate",
    "FixtureTool",
    "Scope",
    "fixture_suites",
    "load_fixture_suite",
    "perform",
    "render",
]

#: The fixture suites pau-mcp ships, by the name ``--suite`` takes, and their data files (package data).
FIXTURE_SUITES: dict[str, str] = {"conformance": "conformance.json"}

#: The longest a ``sleep_s_from`` step waits, whatever its argument says.
_MAX_SLEEP_S = 300.0
#: The longest text a placeholder renders (an answer quoted back is cut there).
_MAX_RENDERED = 16 * 1024


class FixtureError(ValueError):
    """A fixture suite's data is malformed; the message names the fixture and what to fix."""


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Log(_Data):
    level: types.LoggingLevel
    data: Any


class _Progress(_Data):
    progress: float
    total: float | None = None
    message: str | None = None


class _Question(_Data):
    method: Literal["elicitation/create", "sampling/createMessage", "roots/list"]
    params: dict[str, Any] = Field(default_factory=dict)


class _Raise(_Data):
    code: int
    message: str


class Step(_Data):
    """One action of a fixture (exactly one of its fields is set; ``only_if_capable`` qualifies ``ask``)."""

    log: _Log | None = None
    progress: _Progress | None = None
    sleep_ms: int | None = Field(None, ge=0, le=600_000)
    sleep_s_from: str | None = None
    ask: dict[str, _Question] | None = None
    only_if_capable: bool = False
    notify: Literal["tools_list_changed", "prompts_list_changed", "resources_list_changed"] | None = None
    task: bool | None = None
    raise_: _Raise | None = Field(None, alias="raise")

    @model_validator(mode="after")
    def _one_action(self) -> Step:
        actions = [
            name for name in ("log", "progress", "sleep_ms", "sleep_s_from", "ask", "notify", "task", "raise_")
            if getattr(self, name) is not None
        ]  # fmt: skip
        if len(actions) != 1:
            raise ValueError(f"a step does exactly one thing; this one does {actions or 'nothing'}")
        if self.only_if_capable and self.ask is None:
            raise ValueError("only_if_capable qualifies an ask step")
        return self


_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


class FixtureTool(_Data):
    """A fixture tool: its listing, what the client must have declared, its steps and its result.

    Attributes:
        task: Whether it runs as a task (the Tasks extension): ``forbidden``, ``optional`` (when the client
            negotiated the extension) or ``required`` (a client that did not is refused with -32021).
        requires: Client capabilities it cannot run without (refused with -32021 when one is missing).
    """

    name: str = Field(pattern=r"^[A-Za-z0-9_./-]{1,64}$")
    description: str
    input_schema: dict[str, Any] = Field(default_factory=lambda: dict(_EMPTY_SCHEMA))
    task: Literal["forbidden", "optional", "required"] = "forbidden"
    requires: dict[str, Any] | None = None
    steps: tuple[Step, ...] = ()
    result: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> FixtureTool:
        marks = [i for i, step in enumerate(self.steps) if step.task]
        if len(marks) > 1:
            raise ValueError("at most one task step")
        if marks and self.task == "forbidden":
            raise ValueError('a task step needs "task": "optional" or "required"')
        if not marks and self.task != "forbidden":
            raise ValueError('a tool that may run as a task needs a {"task": true} step saying from where')
        if self.result is None and not any(step.raise_ for step in self.steps):
            raise ValueError("a tool needs a result, unless it always raises")
        if self.result is not None:
            types.CallToolResult.model_validate(self.result)
        return self

    def before_task(self) -> tuple[Step, ...]:
        """The steps that run with the request, before any task exists (all of them for a tool with no task)."""
        for i, step in enumerate(self.steps):
            if step.task:
                return self.steps[:i]
        return self.steps

    def after_task(self) -> tuple[Step, ...]:
        """The steps from the task step on (none for a tool with no task)."""
        for i, step in enumerate(self.steps):
            if step.task:
                return self.steps[i + 1 :]
        return ()

    def listing(self) -> types.Tool:
        """The tool as ``tools/list`` shows it (its input schema published as written)."""
        return types.Tool(name=self.name, title=self.name, description=self.description, input_schema=self.input_schema)


class FixtureResource(_Data):
    """A static resource: ``text``, or ``blob`` naming one of the suite's blobs."""

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str
    text: str | None = None
    blob: str | None = None

    @model_validator(mode="after")
    def _one_body(self) -> FixtureResource:
        if (self.text is None) == (self.blob is None):
            raise ValueError("a resource has exactly one of text and blob")
        return self


class FixtureTemplate(_Data):
    """A resource template: URIs matching ``uri_template`` read as ``text`` with ``${uri.VARIABLE}`` filled in.

    Attributes:
        completions: Values offered for each variable by ``completion/complete``.
    """

    uri_template: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str
    text: str
    completions: dict[str, tuple[str, ...]] = Field(default_factory=dict)

    def match(self, uri: str) -> dict[str, str] | None:
        """The template's variables in ``uri``, or None when ``uri`` is not one of its resources."""
        found = _template(self.uri_template).match(uri)
        if found is None:
            return None
        return {name: value if isinstance(value, str) else ",".join(value) for name, value in found.items()}


class FixtureArgument(_Data):
    """A prompt argument, with the values ``completion/complete`` offers for it."""

    name: str
    description: str | None = None
    required: bool = False
    completions: tuple[str, ...] = ()


class FixturePrompt(_Data):
    """A prompt: its arguments, steps (its questions to the client) and messages."""

    name: str
    title: str | None = None
    description: str | None = None
    arguments: tuple[FixtureArgument, ...] = ()
    steps: tuple[Step, ...] = ()
    messages: tuple[dict[str, Any], ...]

    @model_validator(mode="after")
    def _valid(self) -> FixturePrompt:
        if any(step.task for step in self.steps):
            raise ValueError("a prompt never runs as a task")
        for message in self.messages:
            types.PromptMessage.model_validate(message)
        return self

    def listing(self) -> types.Prompt:
        """The prompt as ``prompts/list`` shows it."""
        return types.Prompt(
            name=self.name, title=self.title, description=self.description,
            arguments=[types.PromptArgument(name=a.name, description=a.description, required=a.required)
                       for a in self.arguments] or None,
        )  # fmt: skip


class FixtureSuite(_Data):
    """A fixture suite as its data file gives it."""

    name: str
    title: str
    description: str
    blobs: dict[str, str] = Field(default_factory=dict)
    tools: tuple[FixtureTool, ...] = ()
    resources: tuple[FixtureResource, ...] = ()
    templates: tuple[FixtureTemplate, ...] = ()
    prompts: tuple[FixturePrompt, ...] = ()

    @model_validator(mode="after")
    def _unique(self) -> FixtureSuite:
        for kind, names in (
            ("tool", [t.name for t in self.tools]),
            ("resource", [r.uri for r in self.resources]),
            ("prompt", [p.name for p in self.prompts]),
        ):
            twice = sorted({name for name in names if names.count(name) > 1})
            if twice:
                raise ValueError(f"{kind}s named twice: {', '.join(twice)}")
        for resource in self.resources:
            if resource.blob is not None and resource.blob not in self.blobs:
                raise ValueError(f"resource {resource.uri} names blob {resource.blob!r}, which the suite lacks")
        for template in self.templates:
            _template(template.uri_template)
        return self

    def tool(self, name: str) -> FixtureTool | None:
        """The tool called ``name``, if the suite has one."""
        return _by_name(self.tools).get(name)

    def prompt(self, name: str) -> FixturePrompt | None:
        """The prompt called ``name``, if the suite has one."""
        return _by_name(self.prompts).get(name)

    def read(self, uri: str) -> types.ReadResourceResult | None:
        """The contents of the resource at ``uri`` (a static one, or one of a template's), or None if there is none."""
        for resource in self.resources:
            if resource.uri == uri:
                if resource.blob is not None:
                    content: Any = types.BlobResourceContents(
                        uri=uri, mime_type=resource.mime_type, blob=self.blobs[resource.blob]
                    )
                else:
                    content = types.TextResourceContents(
                        uri=uri, mime_type=resource.mime_type, text=resource.text or ""
                    )
                return types.ReadResourceResult(contents=[content])
        for template in self.templates:
            variables = template.match(uri)
            if variables is not None:
                text = render(template.text, Scope(blobs=self.blobs, uri=variables))
                return types.ReadResourceResult(
                    contents=[types.TextResourceContents(uri=uri, mime_type=template.mime_type, text=text)]
                )
        return None

    def completions(
        self, ref: types.PromptReference | types.ResourceTemplateReference, argument: str
    ) -> tuple[str, ...]:
        """What ``completion/complete`` offers for ``argument`` of a prompt or template (nothing for an unknown one)."""
        if isinstance(ref, types.PromptReference):
            prompt = self.prompt(ref.name)
            found = next((a for a in prompt.arguments if a.name == argument), None) if prompt else None
            return found.completions if found else ()
        template = next((t for t in self.templates if t.uri_template == ref.uri), None)
        return template.completions.get(argument, ()) if template else ()


def _by_name(items: Sequence[Any]) -> dict[str, Any]:
    return {item.name: item for item in items}


@cache
def _template(text: str) -> UriTemplate:
    return UriTemplate.parse(text)


@cache
def load_fixture_suite(name: str) -> FixtureSuite:
    """The packaged fixture suite ``name`` (one of ``FIXTURE_SUITES``).

    Raises:
        FixtureError: no such suite, or its data is malformed (a packaging error: the message says where).
    """
    if name not in FIXTURE_SUITES:
        raise FixtureError(f"no fixture suite {name!r}; the fixture suites are {', '.join(sorted(FIXTURE_SUITES))}")
    text = resources.files(__package__).joinpath(FIXTURE_SUITES[name]).read_text(encoding="utf-8")
    try:
        return FixtureSuite.model_validate(json.loads(text))
    except (ValidationError, ValueError) as exc:
        raise FixtureError(f"the fixture suite {name!r} ({FIXTURE_SUITES[name]}) is malformed: {exc}") from None


def fixture_suites(names: Sequence[str]) -> tuple[list[str], FixtureSuite | None]:
    """``names`` (as ``--suite`` gives them) split into the catalog's suites and the fixture suite among them.

    Raises:
        FixtureError: more than one fixture suite is named (their tool names would collide).
    """
    fixtures = [name for name in names if name in FIXTURE_SUITES]
    if len(set(fixtures)) > 1:
        raise FixtureError(f"serve one fixture suite at a time, not {', '.join(sorted(set(fixtures)))}")
    return [name for name in names if name not in FIXTURE_SUITES], load_fixture_suite(fixtures[0]) if fixtures else None


# -- running ---------------------------------------------------------------------------------------------------------


@dataclass
class Scope:
    """What a fixture's ``${...}`` placeholders read: its arguments, the answers so far, and the rest.

    Attributes:
        args: The call's arguments (a prompt's, for a prompt).
        answers: The client's answers to the questions asked so far, by key, as they came on the wire.
        blobs: The suite's blobs (base64).
        uri: A template's variables in the URI read.
        progress_token: The request's progress token, if it had one.
    """

    args: Mapping[str, Any] = field(default_factory=dict)
    answers: dict[str, Any] = field(default_factory=dict)
    blobs: Mapping[str, str] = field(default_factory=dict)
    uri: Mapping[str, str] = field(default_factory=dict)
    progress_token: str | int | None = None

    def lookup(self, path: str) -> Any:
        """The value at a dotted ``path`` (None when missing)."""
        head, _, rest = path.partition(".")
        roots: dict[str, Any] = {
            "args": self.args, "answers": self.answers, "blobs": self.blobs, "uri": self.uri,
            "progress_token": self.progress_token, "answered": ", ".join(self.answers) or None,
        }  # fmt: skip
        value = roots.get(head)
        for part in rest.split(".") if rest else ():
            value = value.get(part) if isinstance(value, Mapping) else None
        return value


def render(value: Any, scope: Scope) -> Any:
    """``value`` (a string, or lists and objects of them) with every ``${path}`` or ``${path|default}`` replaced.

    Linear in the text and in what it quotes; a value the client sent (an argument, an answer) is cut to 16 KiB.
    """
    if isinstance(value, str):
        return _render_text(value, scope)
    if isinstance(value, Mapping):
        return {key: render(item, scope) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [render(item, scope) for item in value]
    return value


def _render_text(text: str, scope: Scope) -> str:
    parts: list[str] = []
    start = 0
    while (opening := text.find("${", start)) != -1:
        closing = text.find("}", opening + 2)
        if closing == -1:
            break
        parts.append(text[start:opening])
        path, bar, default = text[opening + 2 : closing].partition("|")
        found = scope.lookup(path)
        if found is None:
            shown = default if bar else ""
        elif isinstance(found, str):
            shown = found
        else:
            shown = json.dumps(found, separators=(",", ":"), ensure_ascii=False, default=str)
        # What the client sent is quoted back cut short; the suite's own data (blobs) whole.
        cut = path.startswith(("args", "answers")) and len(shown) > _MAX_RENDERED
        parts.append(shown[:_MAX_RENDERED] + "..." if cut else shown)
        start = closing + 1
    parts.append(text[start:])
    return "".join(parts)


class Effects(Protocol):
    """How a running fixture reaches its client; the server implements it for each way a request can run."""

    async def log(self, level: types.LoggingLevel, data: Any) -> None:
        """Send a log message (within the level the client chose)."""

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """Report progress to the request's progress token (nothing if it has none)."""

    def can_answer(self, method: str) -> bool:
        """Whether the client declared the capability a question of ``method`` needs."""

    async def ask(self, questions: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """Put ``questions`` (key: ``{"method", "params"}``) to the client; their answers by key, on the wire."""

    async def notify(self, change: str) -> None:
        """Announce ``tools_list_changed``, ``prompts_list_changed`` or ``resources_list_changed``."""


async def perform(steps: Sequence[Step], scope: Scope, effects: Effects) -> None:
    """Run ``steps`` in order; answers to its questions are added to ``scope.answers``.

    A question already answered (in ``scope.answers``, from an earlier round) is not asked again.

    Raises:
        MCPError: a ``raise`` step, or a question the client cannot answer (-32021, naming the capability).
        Whatever ``effects.ask`` raises to end the round (an input-required result in the 2026-07-28 era).
    """
    for step in steps:
        if step.log is not None:
            await effects.log(step.log.level, render(step.log.data, scope))
        elif step.progress is not None:
            await effects.progress(step.progress.progress, step.progress.total, render(step.progress.message, scope))
        elif step.sleep_ms is not None:
            await anyio.sleep(step.sleep_ms / 1000)
        elif step.sleep_s_from is not None:
            await anyio.sleep(_seconds(scope.args.get(step.sleep_s_from), step.sleep_s_from))
        elif step.ask is not None:
            await _ask(step, scope, effects)
        elif step.notify is not None:
            await effects.notify(step.notify)
        elif step.raise_ is not None:
            raise MCPError(step.raise_.code, render(step.raise_.message, scope))


async def _ask(step: Step, scope: Scope, effects: Effects) -> None:
    assert step.ask is not None
    questions = {
        key: render(question.model_dump(), scope) for key, question in step.ask.items() if key not in scope.answers
    }
    if step.only_if_capable:
        questions = {key: q for key, q in questions.items() if effects.can_answer(q["method"])}
    missing = sorted({ASKS[q["method"]] for q in questions.values() if not effects.can_answer(q["method"])})
    if missing:
        raise missing_capability(
            {name: {} for name in missing},
            f"this tool needs to ask the client ({', '.join(missing)}), which it did not declare it can answer; "
            "declare the capability (or call a tool that needs none)",
        )
    if questions:
        scope.answers.update(await effects.ask(questions))


def _seconds(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= _MAX_SLEEP_S:
        raise MCPError(types.INVALID_PARAMS, f"`{name}` must be a number of seconds from 0 to {_MAX_SLEEP_S:g}")
    return float(value)
