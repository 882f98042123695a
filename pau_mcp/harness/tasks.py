"""Task mode: an agent answers a suite's tasks with its hidden tools, documented as the run chooses.

``pau-mcp eval --mode tasks --docs SOURCE`` starts the run's own server with ``--docs SOURCE`` (``examples``, ``none``,
``gold``, a run's learned descriptions or an exported file), so the tools' documentation is all that differs between
runs. Each task is an episode: one MCP session that offers every tool of the suite; the agent (native tool calling)
sees the question and nothing else of the task, calls tools within the per-tool budget, and calls a local ``answer``
function with its answer (and, where the task asks, the calls that compute it). The answer is checked on the
harness's side (``scoring.tasks``): by exact match with the answer frozen from the gold functions, and by
re-executing the calls. Episodes are planned, resumed and recorded as an evaluation's are.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx2
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from ..config import Settings
from ..contract import REFUSED, TASK_KIND, Scoring
from ..llm import LLMClient, LLMError, Overrides
from ..manifests import ManifestStore, Task, tool_name
from ..prompts import PromptSet, load_prompts
from ..protocol import Protocol
from ..runstore import EpisodeResult, RunStore
from ..scoring.tasks import TaskCall
from .agents import AgentResult, _listed, _note_reply, _refused, _temperature, _valid_history, written_tool_calls
from .briefing import brief
from .client import ConnectTools, leaf_error
from .configuration import EvalConfig, EvalError
from .environment import Step
from .hosting import EpisodeHost, EpisodeRecord, session_key

__all__ = ["ANSWER_TOOL", "LocalTasks", "TaskAgent", "TaskAnswer", "TaskEnvironment", "planned_tasks", "play_task"]

#: The local function the agent answers with (never an MCP tool: the server knows nothing of tasks).
ANSWER_TOOL = "answer"
_MAX_TURNS = 30
_MAX_SHOWN_CALLS = 10
_MAX_TEXT_CHARS = 64 * 1024


@dataclass
class TaskEnvironment:
    """Every tool of a suite as an agent answering a task sees them, over one MCP session.

    Attributes:
        session: The MCP client session.
        tools: The hidden functions' tools as the server lists them (documented as it chose), by name.
        trajectory: Every step, appended as it happens.
        queries: Calls that reached a function.
        others: The names of the other tools the server lists (``submit``), which a task does not offer.
    """

    session: ClientSession
    tools: dict[str, types.Tool]
    trajectory: list[Step] = field(default_factory=list)
    queries: int = 0
    others: frozenset[str] = frozenset()

    @classmethod
    async def open(cls, session: ClientSession) -> TaskEnvironment:
        """List the session's tools (every page); the hidden functions' are kept, the others' names noted."""
        tools: dict[str, types.Tool] = {}
        others: set[str] = set()
        cursor = None
        while True:
            listed = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
            tools.update({t.name: t for t in listed.tools if t.name.startswith("fn_")})
            others.update(t.name for t in listed.tools if not t.name.startswith("fn_"))
            cursor = listed.next_cursor
            if cursor is None:
                return cls(session=session, tools=tools, others=frozenset(others))

    def note(self, kind: str, **data: Any) -> None:
        """Append a step to the trajectory."""
        self.trajectory.append(Step(kind, data))

    async def call(self, name: str, arguments: dict[str, Any]) -> str:
        """Call a hidden function's tool; the text the agent reads back."""
        self.note("tool_call", tool=name, arguments=arguments)
        params = types.CallToolRequestParams(name=name, arguments=arguments)
        result = await self.session.send_request(types.CallToolRequest(params=params), types.CallToolResult)
        text = "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))
        status = (result.structured_content or {}).get("status")
        if not result.is_error and status is not None and status not in REFUSED:
            self.queries += 1
        self.note("tool_result", text=text, structured=result.structured_content, is_error=bool(result.is_error))
        return text


@dataclass(frozen=True)
class TaskAnswer:
    """What an agent answered: its answer literal, the calls it gave, and whether it answered at all."""

    answer: str
    calls: tuple[TaskCall, ...] = ()
    answered: bool = False


def _answer_tool(asks_calls: bool) -> dict[str, Any]:
    calls = {
        "type": "array",
        "description": "The calls that compute the answer, in order: each a tool and its arguments as a Python literal "
        "tuple, where $1 is the result of the first of these calls, $2 of the second, and so on.",
        "items": {
            "type": "object",
            "properties": {"tool": {"type": "string"}, "args": {"type": "string"}},
            "required": ["tool", "args"],
        },
    }
    properties: dict[str, Any] = {
        "answer": {"type": "string", "description": "The answer as a Python literal, e.g. 42, 'text', [1, 2], None."}
    }
    if asks_calls:
        properties["calls"] = calls
    return {
        "type": "function",
        "function": {
            "name": ANSWER_TOOL,
            "description": "Give your final answer to the question (this ends the task).",
            "parameters": {
                "type": "object", "properties": properties,
                "required": ["answer", "calls"] if asks_calls else ["answer"],
            },
        },
    }  # fmt: skip


_CALLS_RULE = (
    " Also give `calls`: the calls that compute the answer, in order, each with its `tool` and its `args` as a Python "
    'literal tuple; write $1 for the result of the first of these calls, $2 for the second, and so on, e.g. [{"tool": '
    '"fn_...", "args": "(3,)"}, {"tool": "fn_...", "args": "($1, \'x\')"}]. They are run again to check your answer.'
)


@dataclass
class TaskAgent:
    """Answers a task through native function calling over the suite's tools and a local ``answer`` function.

    Replies are read as ``ToolsAgent`` reads them: tool calls written as text are taken as calls, arguments that
    are not a JSON object are answered with what was wrong, and a plain reply is nudged once, then read as the
    answer (after ``ANSWER:`` when it says so).
    """

    llm: LLMClient
    model: str
    max_tokens: int = 800
    overrides: Overrides = field(default_factory=Overrides)
    prompts: PromptSet = field(default_factory=load_prompts)

    async def run(self, env: TaskEnvironment, task: Task, budget: int, result: AgentResult) -> TaskAnswer:
        """Answer ``task``; ``result`` gathers the tokens and cost spent."""
        # What every tool's documentation says is stated once, and each tool offered with its own part alone: the
        # builtin suite's 66 tools fit an 8k context (pau_mcp.harness.briefing).
        briefing = brief(env.tools, env.others)
        tools = [*briefing.tools, _answer_tool(task.asks_calls)]
        offered = [tool["function"]["name"] for tool in tools]
        room = f"each at most {budget} times" if budget else "as often as you need"
        question = self.prompts.render(
            "task_question", question=task.question, budget=room, calls=_CALLS_RULE if task.asks_calls else "",
            tools=briefing.introduction(),
        )  # fmt: skip
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self.prompts.text("task_system")},
            {"role": "user", "content": question},
        ]
        nudged = False
        for _ in range(_MAX_TURNS):
            completion = await self.llm.complete(
                self.model, messages, tools=tools, temperature=_temperature(self.overrides),
                max_tokens=self.overrides.max_tokens or self.max_tokens,
                reasoning_effort=self.overrides.reasoning_effort, sample=f"{task.id}/{result.requests}",
            )  # fmt: skip
            result.count(completion)
            _note_reply(env, completion, tool_calls=[c.__dict__ for c in completion.tool_calls])
            calls = completion.tool_calls
            message = completion.message()
            if not calls:
                written = written_tool_calls(completion.text, f"call_text_{result.requests}")
                if not written:
                    messages.append(message)
                    if nudged or "answer:" in completion.text.lower():
                        return TaskAnswer(_plain_answer(completion.text), answered=True)
                    nudged = True
                    messages.append({"role": "user", "content": self.prompts.text("task_nudge")})
                    continue
                calls = tuple(written)
                message = {"role": "assistant", "content": None, "tool_calls": [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in written
                ]}  # fmt: skip
            messages.append(_valid_history(message))
            for call in calls:
                arguments = call.parsed_arguments()
                if call.name == ANSWER_TOOL and arguments is not None:
                    answer = _answer_of(arguments)
                    env.note("answer", answer=answer.answer, calls=[c.__dict__ for c in answer.calls])
                    return answer
                if arguments is None:
                    reply = _refused(
                        env, call, f"Those arguments are not a JSON object; nothing was run. Call {call.name} again."
                    )
                elif call.name in env.tools:
                    reply = await env.call(call.name, arguments)
                else:
                    reply = _refused(
                        env, call,
                        f"There is no tool {call.name[:80]!r} here; the tools are {_listed(offered)}. Nothing was run.",
                    )  # fmt: skip
                messages.append({"role": "tool", "tool_call_id": call.id, "content": reply})
        env.note("note", event="no_answer")
        return TaskAnswer("", answered=False)


def _plain_answer(text: str) -> str:
    """The answer in a reply that did not call ``answer``: what follows its last ``ANSWER:``, else the reply."""
    visible = text[-_MAX_TEXT_CHARS:]
    index = visible.lower().rfind("answer:")
    found = visible[index + len("answer:") :] if index >= 0 else visible
    return found.strip().splitlines()[0].strip() if found.strip() else ""


def _answer_of(arguments: dict[str, Any]) -> TaskAnswer:
    answer = arguments.get("answer")
    text = answer if isinstance(answer, str) else json.dumps(answer)
    calls = []
    given = arguments.get("calls")
    for item in given if isinstance(given, list) else []:
        if isinstance(item, dict) and isinstance(item.get("tool"), str):
            args = item.get("args")
            calls.append(TaskCall(item["tool"], args if isinstance(args, str) else json.dumps(args)))
    return TaskAnswer(text[:_MAX_TEXT_CHARS], tuple(calls[: 2 * _MAX_SHOWN_CALLS]), answered=True)


async def play_task(
    task: Task, attempt: int, connect: ConnectTools, config: EvalConfig, agent: TaskAgent, scorer: Scoring,
    store: RunStore, tools: dict[str, str],
) -> EpisodeRecord:  # fmt: skip
    """Run one attempt of a task: answer it over one MCP session, check the answer, record it under the session.

    The answer is recorded as the session's submission (its id is the task's) with a ``task`` score. Expected
    failures (a provider's permanent error, a lost connection) are an ending with ``state="failed"``.
    """
    key = session_key(config.run, task.id, attempt)
    result = AgentResult(description="")
    env: TaskEnvironment | None = None
    try:
        async with connect(tools, key) as session:
            env = await TaskEnvironment.open(session)
            answer = await agent.run(env, task, config.budget, result)
        check = await scorer.check_task(task.id, answer.answer, answer.calls, tools)
        session_id = store.ensure_session(store.run_id(config.run), key, "http")
        submission = store.record_submission(session_id, task.id, answer.answer, None)
        detail = check.detail() | {"given": [call.__dict__ for call in answer.calls], "docs": config.docs}
        value = check.value if check.status == "scored" else None
        store.record_score(submission, TASK_KIND, check.status, value, None, detail)
        ending = EpisodeResult(
            state="done", session_key=key, submission_id=submission, concluded=answer.answered, queries=env.queries,
            input_tokens=result.usage.input_tokens, output_tokens=result.usage.output_tokens, cost_usd=result.cost_usd,
            trajectory=[s.to_json() for s in env.trajectory],
        )  # fmt: skip
        return EpisodeRecord(task.id, attempt, ending, values={TASK_KIND: value})
    except Exception as caught:  # noqa: BLE001 - sorted just below
        exc = leaf_error(caught)
        if not isinstance(exc, (LLMError, EvalError, MCPError, httpx2.HTTPError)):
            raise
        said = str(exc)
        if isinstance(exc, LLMError) and exc.too_long:
            said = _too_long(exc, result.requests == 0, len(tools), config)
        failed = EpisodeResult(
            state="failed", session_key=key, error=f"{type(exc).__name__}: {said}",
            input_tokens=result.usage.input_tokens, output_tokens=result.usage.output_tokens,
            trajectory=[s.to_json() for s in env.trajectory] if env else [],
        )  # fmt: skip
        return EpisodeRecord(task.id, attempt, failed)


def _too_long(exc: LLMError, first: bool, tools: int, config: EvalConfig) -> str:
    """What to change when a task's request did not fit the model's context: its first request holds every tool of
    the suite, which no --budget or --max-tokens shortens; a later one grew with the task's calls."""
    counts = ""
    if exc.prompt_tokens and exc.context_tokens:
        counts = f" ({exc.prompt_tokens:,} tokens; the model's context is {exc.context_tokens:,})"
    if first:
        wanted = f" of at least {exc.prompt_tokens + 1024:,} tokens" if exc.prompt_tokens else ""
        return (
            f"{exc.model}: task mode's first request, the question with every tool of suite {config.suite} ({tools} "
            f"tools), is longer than the model's context{counts}: serve the model with a context{wanted} (llama-server "
            "-c, vLLM --max-model-len, Ollama num_ctx), or run task mode on a smaller suite; --budget and --max-tokens "
            "do not shorten it"
        )
    return (
        f"{exc.model}: the task's conversation grew longer than the model's context{counts}: lower --budget (calls per "
        "tool) or --max-tokens, or serve the model with a longer context (llama-server -c, vLLM --max-model-len, "
        "Ollama num_ctx)"
    )


def planned_tasks(settings: Settings, config: EvalConfig) -> list[Task]:
    """The tasks a run covers, in plan order (its suite's, narrowed by ``methods`` and ``limit``).

    Raises:
        ManifestError: the suite does not exist or is broken.
        EvalError: the suite has no tasks, or some are not frozen.
    """
    suite = ManifestStore(settings.manifests).suite(config.suite)
    if not suite.tasks:
        raise EvalError(
            f"suite {config.suite!r} has no tasks: make some with `pau-mcp create --tasks-for {config.suite} "
            "--model MODEL`, or write them (docs/manifests.md)"
        )
    tasks = [t for t in suite.tasks.values() if not config.methods or t.id in config.methods]
    unfrozen = [t.id for t in tasks if not t.frozen]
    if unfrozen:
        raise EvalError(
            f"{len(unfrozen)} tasks have no frozen answer (e.g. {unfrozen[0]}); run `pau-mcp manifests freeze`"
        )
    return tasks[: config.limit] if config.limit else tasks


class LocalTasks:
    """Tasks answered in this process against the run's own server (or ``--server``): an episode source."""

    workers = 0
    rerun = 0

    def __init__(
        self, settings: Settings, config: EvalConfig, scorer: Scoring, store: RunStore, deployment_key: str,
        methods: Iterable[str], protocol: Protocol,
    ) -> None:  # fmt: skip
        self._settings = settings
        self._config = config
        self._scorer = scorer
        self._store = store
        self._key = deployment_key
        self._protocol = protocol
        self._tools = {tool_name(deployment_key, method_id): method_id for method_id in methods}

    @contextlib.asynccontextmanager
    async def episodes(self, todo: Sequence[Task]) -> AsyncIterator[Callable[[Task, int], Awaitable[EpisodeRecord]]]:
        """Start the run's server; yields the play function."""
        host = EpisodeHost(self._settings, self._config, self._scorer, self._store, self._key, protocol=self._protocol)
        try:
            await host.start(set(self._tools))
            agent = TaskAgent(llm=host.llm, model=self._config.model, overrides=self._config.overrides)

            async def play(task: Task, attempt: int) -> EpisodeRecord:
                return await play_task(
                    task, attempt, host.session, self._config, agent, self._scorer, self._store, self._tools
                )

            yield play
        finally:
            await host.close()
