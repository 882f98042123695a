"""PAU as an Inspect AI task: one sample per hidden method, explored through `pau-mcp serve` over stdio.

    inspect eval pau_mcp/pau --model openai/gpt-4o-mini -T suite=builtin -T budget=20
    inspect view                                                    # every trajectory, tool call by tool call

Each sample starts its own `pau-mcp serve --methods <method> --budget N --run RUN` over stdio, so its budget is that
server process's and its calls are recorded in pau-mcp's run store under RUN. The official MCP client speaks to it
in the 2026-07-28 revision (``-T mcp_era=legacy`` for the 2025-11-25 handshake, or ``PAU_MCP_ERA``), and its tools
become Inspect tools. Inspect's ``react`` agent explores with the method's tool and ends by calling the server's
``submit`` tool; the scorer
then gives the judge's rating, the code writer's match and the submitted code's match through pau-mcp's
``Scorer`` (judge and code writer only with models configured: ``PAU_JUDGE_MODEL``, ``PAU_CODER_MODEL`` or the
task's ``judge_model`` / ``coder_model``).

Needs the ``inspect`` extra (``pip install 'pau-mcp[inspect]'``); Inspect finds the task through the
``inspect_ai`` entry point of this package.
"""

from __future__ import annotations

import contextlib
import math
import re
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from inspect_ai import Task, task
from inspect_ai.agent import AgentSubmit, as_solver, react
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageAssistant, ChatMessageTool
from inspect_ai.scorer import Metric, SampleScore, Score, Target, metric, scorer
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.tool import Tool, ToolDef, ToolError, ToolParams
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import TextContent
from mcp_types import Tool as MCPTool

from wasm_runtime import InvalidInput, parse_arguments

from .assembly import run_scorer
from .config import Settings
from .contract import SUBMIT_TOOL
from .eras import client_mode
from .manifests import ManifestStore, call_text
from .sandboxing import make_sandbox
from .server import Catalog, Exposed, serve_examples
from .server.launch import stdio_server

__all__ = ["explore", "observed_examples", "pau", "pau_scorer", "scored_mean", "served_tools"]

#: Inspect's system prompt for the explorer; the sample's input is the method's own starting prompt.
_INSTRUCTIONS = (
    "You study a Python function you cannot read, only call through its tool. Form hypotheses, test them with "
    "inputs that could prove them wrong, and when you are confident call `submit` with the tool name as `method`, "
    "a precise description, and optionally your own implementation as `code`."
)


def _settings(judge_model: str | None = None, coder_model: str | None = None) -> Settings:
    """The settings of the environment (``PAU_*`` variables), with the task's models on top."""
    models = {"judge_model": judge_model, "coder_model": coder_model}
    return Settings.from_env().model_copy(update={k: v for k, v in models.items() if v})


@task
def pau(
    suite: str = "builtin",
    methods: str | Sequence[str] | None = None,
    budget: int = 20,
    run: str | None = None,
    judge_model: str | None = None,
    coder_model: str | None = None,
    message_limit: int = 80,
    mcp_era: str | None = None,
) -> Task:
    """The PAU benchmark over one suite.

    Args:
        suite: The suite whose methods are the samples.
        methods: Only these method ids (comma-separated or a list).
        budget: Calls per method (the server's ``--budget``; 0 for no limit).
        run: Record the servers' sessions under this run name (default ``inspect-SUITE-TIME``).
        judge_model: ``provider/model`` of the judge (default: ``PAU_JUDGE_MODEL``).
        coder_model: ``provider/model`` of the code writer (default: ``PAU_CODER_MODEL``).
        message_limit: Messages per sample before Inspect stops the agent.
        mcp_era: The MCP protocol era spoken to the servers: ``modern`` (2026-07-28), ``legacy`` (the handshake) or
            ``auto`` (default: ``PAU_MCP_ERA``, else modern).
    """
    settings = _settings(judge_model, coder_model)
    chosen = [m.strip() for m in methods.split(",")] if isinstance(methods, str) else list(methods or [])
    # The examples the servers will show (PAU_MCP_EXAMPLES): drawn here first, then read from their cache by each.
    catalog = serve_examples(
        Catalog(ManifestStore(settings.manifests), [suite], chosen, key=settings.deployment_key()), settings
    )
    samples = [
        Sample(
            id=exposed.method.id,
            input=exposed.prompt_text(budget),
            metadata={"method": exposed.method.id, "tool": exposed.tool},
        )
        for exposed in catalog
    ]
    run_name = run or f"inspect-{suite}-{time.strftime('%Y%m%d-%H%M%S')}"
    era = mcp_era or settings.mcp_era
    client_mode(era)  # an unknown era is refused here, before any sample starts
    return Task(
        dataset=MemoryDataset(samples, name=f"pau-{suite}"),
        solver=explore(budget=budget, run=run_name, mcp_era=era),
        scorer=pau_scorer(judge_model=judge_model, coder_model=coder_model),
        message_limit=message_limit,
    )


@solver
def explore(budget: int = 20, run: str = "inspect", mcp_era: str = "modern") -> Solver:
    """Inspect's ``react`` agent with the sample's method served by its own `pau-mcp serve` over stdio.

    One server process for the whole sample (it is the budget); the agent ends by calling the server's ``submit``
    tool, which records the description in pau-mcp's run store.
    """

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        settings = Settings.from_env()
        # The server's whole settings travel in a private file (``stdio_server``): the deployment key, the budget.
        served = settings.model_copy(update={"tool_key": settings.deployment_key(), "budget": budget})
        with stdio_server(served, ["--methods", state.metadata["method"], "--run", run]) as server:
            return await _explore(state, generate, server, mcp_era)

    return solve


async def _explore(state: TaskState, generate: Generate, server: StdioServerParameters, mcp_era: str) -> TaskState:
    """Inspect's ``react`` agent over the tools of the sample's server."""
    async with served_tools(server, [state.metadata["tool"], SUBMIT_TOOL], mcp_era) as tools:
        submit = next(t for t in tools if _name(t) == SUBMIT_TOOL)
        agent = react(
            prompt=_INSTRUCTIONS,
            tools=[t for t in tools if _name(t) != SUBMIT_TOOL],
            submit=AgentSubmit(tool=submit, keep_in_messages=True),
        )
        state = await as_solver(agent)(state, generate)
        return state


@contextlib.asynccontextmanager
async def served_tools(server: StdioServerParameters, names: Sequence[str], mcp_era: str) -> AsyncIterator[list[Tool]]:
    """The named tools of an MCP server over stdio, as Inspect tools, for as long as the context is open.

    The official MCP client speaks ``mcp_era`` to the server; a result marked ``isError`` becomes a ``ToolError``
    (shown to the model as an error), any other result its text (an ``over_budget`` result included).

    Raises:
        RuntimeError: the server does not offer every named tool.
    """
    async with Client(server, mode=client_mode(mcp_era), cache=None) as client:
        listed: dict[str, MCPTool] = {}
        cursor = None
        while True:
            page = await client.list_tools(cursor=cursor)
            listed.update({t.name: t for t in page.tools})
            cursor = page.next_cursor
            if cursor is None:
                break
        missing = [name for name in names if name not in listed]
        if missing:
            raise RuntimeError(f"the pau-mcp server does not offer {', '.join(missing)}: is the tool key the same?")
        yield [_inspect_tool(client, listed[name]) for name in names]


def _inspect_tool(client: Client, tool: MCPTool) -> Tool:
    async def execute(**arguments: Any) -> str:
        result = await client.call_tool(tool.name, arguments)
        text = "\n".join(part.text for part in result.content if isinstance(part, TextContent))
        if result.is_error:
            raise ToolError(text)
        return text

    parameters = ToolParams.model_validate(tool.input_schema)
    for name, parameter in parameters.properties.items():
        parameter.description = parameter.description or name
    return ToolDef(execute, name=tool.name, description=tool.description or tool.name, parameters=parameters).as_tool()


def _name(tool: Any) -> str:
    name: str = ToolDef(tool).name  # annotated: Any when Inspect AI is absent (the README's type gate)
    return name


def _submission(state: TaskState, tool: str) -> tuple[str, str | None]:
    """The description and code of the agent's last ``submit`` call for ``tool``; else its last words."""
    for message in reversed(state.messages):
        if isinstance(message, ChatMessageAssistant):
            for call in reversed(message.tool_calls or []):
                if call.function == SUBMIT_TOOL and call.arguments.get("method") == tool:
                    code = call.arguments.get("code")
                    return str(call.arguments.get("description") or ""), code if isinstance(code, str) else None
    return state.output.completion, None


def observed_examples(state: TaskState, exposed: Exposed) -> list[tuple[str, str]]:
    """``(input literal, shown outcome)`` pairs the agent saw: the initial examples, then each call that ran.

    Read from the trajectory: each call's arguments, and the first line of its result, which starts with the call
    as the server wrote it (``test_func(234) returned 24``).
    """
    pairs = [(example.input, example.output) for example in exposed.examples]  # as the server showed them
    arguments: dict[str, dict[str, Any]] = {}
    for message in state.messages:
        if isinstance(message, ChatMessageAssistant):
            for call in message.tool_calls or []:
                arguments[call.id] = call.arguments
        elif isinstance(message, ChatMessageTool) and message.function == exposed.tool and message.error is None:
            given = arguments.get(message.tool_call_id or "")
            literal = _literal(given, exposed.method.params) if given is not None else None
            if literal is None:
                continue
            first = message.text.split("\n", 1)[0]
            shown = call_text(exposed.method.entry, literal)
            if first.startswith(f"{shown} returned "):
                pairs.append((literal, first[len(shown) + len(" returned ") :]))
            elif first.startswith(f"{shown} raised "):
                pairs.append((literal, "raises " + first[len(shown) + len(" raised ") :]))
    return pairs


def _literal(arguments: dict[str, Any], params: list[str]) -> str | None:
    """The call's argument literal as the server formed it (``repr`` of the argument tuple)."""
    given = arguments.get("args")
    try:
        if isinstance(given, str) and given.strip():
            return repr(parse_arguments(given))
    except InvalidInput:
        return None
    if not all(p in arguments for p in params):
        return None
    return repr(tuple(arguments[p] for p in params))


@metric
def scored_mean() -> Metric:
    """The mean over the samples that have this score (a score needs its model, or submitted code)."""

    def compute(scores: list[SampleScore]) -> float:
        values = [float(s.score.value) for s in scores if isinstance(s.score.value, int | float)]
        values = [v for v in values if not math.isnan(v)]
        return sum(values) / len(values) if values else float("nan")

    return compute


@scorer(metrics={"judge": [scored_mean()], "codematch": [scored_mean()], "direct": [scored_mean()]})
def pau_scorer(judge_model: str | None = None, coder_model: str | None = None) -> Any:
    """pau-mcp's scores of the agent's submission: ``judge`` (rating 1-5), ``codematch`` and ``direct`` (fractions
    of the hidden tests passed by code written from the description, and by the submitted code).

    A score whose model is not configured, or direct code without submitted code, is NaN (Inspect's mark of a
    missing score), and ``scored_mean`` leaves it out.
    """
    state_holder: dict[str, Any] = {}

    async def score(state: TaskState, target: Target) -> Score:
        settings = _settings(judge_model, coder_model)
        scorer_ = state_holder.get("scorer")
        if scorer_ is None:  # as a run's scorer is made everywhere (``assembly``)
            scorer_ = state_holder["scorer"] = run_scorer(settings, make_sandbox(settings))
        catalog = state_holder.get("catalog")
        if catalog is None:
            catalog = state_holder["catalog"] = serve_examples(
                Catalog(
                    ManifestStore(settings.manifests),
                    [state.metadata["method"].split("/", 1)[0]],
                    key=settings.deployment_key(),
                ),
                settings,
            )
        exposed = catalog.find(state.metadata["method"])
        if exposed is None:
            raise RuntimeError(
                f"sample {state.sample_id}: method {state.metadata['method']} is not in its suite; build the "
                "dataset again from the suite served"
            )
        description, code = _submission(state, state.metadata["tool"])
        kinds = [
            kind
            for kind, possible in (
                ("judge", bool(settings.judge_model and description.strip())),
                ("codematch", bool(settings.coder_model and description.strip())),
                ("direct", bool(code and code.strip())),
            )
            if possible
        ]
        value: dict[str, float] = {"judge": math.nan, "codematch": math.nan, "direct": math.nan}
        if not kinds:
            return Score(value=value, answer=description, explanation="nothing to score: no model and no code")
        result = await scorer_.score(
            exposed.method.id, description, code, examples=observed_examples(state, exposed), kinds=kinds
        )
        if result.judge is not None and result.judge.status == "scored" and result.judge.rating is not None:
            value["judge"] = result.judge.rating
        if result.codematch is not None and result.codematch.fraction is not None:
            value["codematch"] = result.codematch.fraction
        if result.direct is not None and result.direct.fraction is not None:
            value["direct"] = result.direct.fraction
        notes = [f"{kind}: {_reason(part)}" for kind, part in
                 (("judge", result.judge), ("codematch", result.codematch), ("direct", result.direct)) if part]  # fmt: skip
        return Score(
            value=value, answer=description, explanation="; ".join(notes),
            metadata={"code": code, "cost_usd": result.cost_usd, "generated_code": getattr(result.codematch, "code", None)},
        )  # fmt: skip

    return score


def _reason(part: Any) -> str:
    status = getattr(part, "status", "")
    reason = getattr(part, "reason", None)
    return re.sub(r"\s+", " ", f"{status} {reason or ''}").strip()
