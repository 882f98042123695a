"""Evaluation runs: one agent over a suite, one MCP session per method, resumable after any crash.

A run's state lives in the run store: its episodes are planned once, each is
marked running when it starts and done (or failed, with the error) when it
ends, so running the same command again after ``kill -9`` finishes the
unfinished ones and never repeats a finished one. LLM replies are cached, so
the repeat costs almost nothing.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import httpx2
import mcp_types as types
from httpx_aiohttp.httpx2 import AiohttpTransport
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from ..config import SettingsError
from ..llm import LLMClient, LLMError, Overrides
from ..manifests import Method, tool_name
from ..runstore import EpisodeResult, RunStore
from ..scoring.records import record_scores
from ..server.launch import LaunchError, http_server
from ..server.sessions import label_problem
from .agents import AGENTS, Agent, AgentResult
from .environment import Environment

__all__ = ["EvalConfig", "EvalError", "RunProgress", "run_eval"]

_ROOT = Path(__file__).resolve().parents[2]


class EvalError(RuntimeError):
    """An evaluation cannot start or continue; the message says what to do."""


@dataclass(frozen=True)
class EvalConfig:
    """One evaluation run.

    Attributes:
        run: The run's name in the store (re-using it resumes the run).
        model: The agent's model (``provider/model``); empty for the probe agent.
        suite: The suite evaluated.
        agent: ``paper``, ``tools`` or ``probe``.
        mode: ``interactive`` (queries) or ``incontext`` (the initial examples only).
        budget: Queries per method.
        concurrency: Episodes at once.
        limit: Only the first ``limit`` methods (0: all).
        methods: Only these method ids (empty: all).
        server: A running server's URL (``--server``); None to start one.
        score: Score each submission.
        kinds: Which scores (``judge``, ``codematch`` need models; ``direct`` scores code the agent wrote).
        retry_failed: Run failed episodes again.
        overrides: The agent model's request settings chosen by the user (``--temperature``, ...).
    """

    run: str
    model: str
    suite: str
    agent: str = "paper"
    mode: str = "interactive"
    budget: int = 20
    concurrency: int = 4
    limit: int = 0
    methods: tuple[str, ...] = ()
    server: str | None = None
    score: bool = True
    kinds: tuple[str, ...] = ("judge", "codematch", "direct")
    retry_failed: bool = False
    overrides: Overrides = field(default_factory=Overrides)

    def identity(self) -> dict[str, Any]:
        """What must match for a run to be resumed rather than refused (overrides only when some are set)."""
        identity = {k: v for k, v in asdict(self).items() if k in ("model", "suite", "agent", "mode", "budget")}
        if self.overrides.any():
            identity["overrides"] = {k: v for k, v in asdict(self.overrides).items() if v is not None}
        return identity


@dataclass
class RunProgress:
    """Live totals of a run, for the progress display and the summary."""

    total: int = 0
    done: int = 0
    failed: int = 0
    skipped: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    judge: list[float] = field(default_factory=list)
    codematch: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _server_args(db: Path, config: EvalConfig, token: str, settings: Any) -> list[str]:
    """The `pau-mcp serve` options for a run's own server."""
    args = [
        "--token",
        token,
        "--suite",
        config.suite,
        "--budget",
        str(config.budget),
        "--db",
        str(db),
        "--run",
        config.run,
    ]
    for directory in settings.manifests:
        args += ["--manifests", str(directory)]
    if settings.cache_dir:
        args += ["--cache-dir", str(settings.cache_dir)]
    return args


def _http_client(token: str | None) -> httpx2.AsyncClient:
    """One HTTP client for every episode of a run: a client per episode spent ~30 ms building its TLS context.

    Requests go through aiohttp (which sets TCP_NODELAY): about 40% less CPU per request than httpx's own
    transport, and the MCP client's requests are half of what the harness spends per episode.
    """
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = AiohttpTransport()
    return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300), transport=transport)


@contextlib.asynccontextmanager
async def _session(client: httpx2.AsyncClient, url: str, tool: str, run: str, key: str) -> AsyncIterator[ClientSession]:
    target = f"{url}?methods={quote(tool)}&run={quote(run)}&session={quote(key)}"
    async with (
        streamable_http_client(target, http_client=client) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def _served_tools(client: httpx2.AsyncClient, url: str) -> set[str]:
    """Every tool a running server lists (one session that spends nothing)."""
    async with (
        streamable_http_client(url, http_client=client) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        names: set[str] = set()
        cursor = None
        while True:
            listed = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
            names.update(t.name for t in listed.tools)
            cursor = listed.next_cursor
            if cursor is None:
                return names


async def _episode(
    method: Method, tool: str, attempt: int, url: str, client: httpx2.AsyncClient, config: EvalConfig, agent: Agent,
    scorer: Any, store: RunStore, run_id: int, progress: RunProgress,
) -> None:  # fmt: skip
    key = f"{config.run}/{method.id}/{attempt}"
    store.start_episode(run_id, method.id)
    result: AgentResult | None = None
    env: Environment | None = None
    try:
        async with _session(client, url, tool, config.run, key) as session:
            env = await Environment.open(session, tool)
            result = await agent.run(env, config.mode, config.budget)
            submitted = await env.submit(result.description or "(no description)", result.code)
            if submitted.is_error or env.submission_id is None:
                raise EvalError(f"the server refused the submission: {submitted.text}")
        values: dict[str, float | None] = {}
        kinds = [k for k in config.kinds if k != "direct" or result.code]
        if not (result.description or "").strip():
            kinds = [k for k in kinds if k == "direct"]  # the judge and the code writer need a description
        if config.score and kinds:
            scored = await scorer.score(
                method.id, result.description, result.code, examples=env.observed_examples(), kinds=kinds
            )
            values = record_scores(store, env.submission_id, scored)
            progress.input_tokens += scored.usage.input_tokens
            progress.output_tokens += scored.usage.output_tokens
            progress.cost_usd += scored.cost_usd
        store.finish_episode(
            run_id, method.id,
            EpisodeResult(
                state="done", session_key=key, submission_id=env.submission_id, concluded=result.concluded,
                queries=env.queries, input_tokens=result.usage.input_tokens, output_tokens=result.usage.output_tokens,
                cost_usd=result.cost_usd, trajectory=[s.to_json() for s in env.trajectory],
            ),
        )  # fmt: skip
        progress.done += 1
        progress.input_tokens += result.usage.input_tokens
        progress.output_tokens += result.usage.output_tokens
        progress.cost_usd += result.cost_usd
        if values.get("judge") is not None:
            progress.judge.append(values["judge"])  # type: ignore[arg-type]
        if values.get("codematch") is not None or values.get("direct") is not None:
            progress.codematch.append(
                values.get("codematch") if values.get("codematch") is not None else values["direct"]
            )  # type: ignore[arg-type]
    except Exception as caught:  # noqa: BLE001 - sorted just below
        exc = _leaf(caught)
        if not isinstance(exc, (LLMError, EvalError, MCPError, httpx2.HTTPError)):
            raise
        # Permanent for this episode (transient provider errors were already retried): recorded, reported, not dropped.
        store.finish_episode(
            run_id, method.id,
            EpisodeResult(
                state="failed", session_key=key, error=f"{type(exc).__name__}: {exc}",
                submission_id=env.submission_id if env else None,
                input_tokens=result.usage.input_tokens if result else 0,
                output_tokens=result.usage.output_tokens if result else 0,
                trajectory=[s.to_json() for s in env.trajectory] if env else [],
            ),
        )  # fmt: skip
        progress.failed += 1
        progress.errors.append(f"{method.id}: {exc}")


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside task-group wrappers (the MCP client runs in task groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _make_agent(config: EvalConfig, llm: LLMClient) -> Agent:
    if config.agent not in AGENTS:
        raise EvalError(f"unknown agent {config.agent!r}; choose from {', '.join(AGENTS)}")
    if config.agent == "probe":
        return AGENTS["probe"]()
    if not config.model:
        raise EvalError(f"the {config.agent} agent needs --model (e.g. openai/gpt-4o-mini)")
    return AGENTS[config.agent](llm=llm, model=config.model, overrides=config.overrides)


async def run_eval(
    settings: Any, config: EvalConfig, scorer: Any, on_progress: Callable[[RunProgress], None] | None = None
) -> RunProgress:
    """Run (or resume) an evaluation.

    Args:
        settings: The ``Settings`` (run store, manifests, sandbox cache, token for ``--server``).
        config: What to evaluate.
        scorer: A ``pau_mcp.scoring.Scorer`` (used only when ``config.score``).
        on_progress: Called after every episode with the live totals.

    Raises:
        EvalError: the run exists with another configuration, the suite is empty, or the server fails.
    """
    problem = label_problem(config.run, "run name")
    if problem:
        raise EvalError(problem)
    try:
        deployment_key = settings.deployment_key()
    except SettingsError as exc:
        raise EvalError(str(exc)) from None
    store: RunStore = settings.run_store()
    suite = settings.manifest_store().suite(config.suite)
    methods = [m for m in suite.methods.values() if not config.methods or m.id in config.methods]
    if config.limit:
        methods = methods[: config.limit]
    if not methods:
        raise EvalError(f"no methods to evaluate in suite {config.suite!r} with these options")
    existing = {row["name"] for row in store.runs()}
    run_id = store.ensure_run(config.run, kind="eval", config=config.identity())
    if config.run in existing:
        stored = store.run_config(run_id)
        if stored and stored != config.identity():
            raise EvalError(
                f"run {config.run!r} exists with {stored}; resume it with the same options or choose another --run"
            )
    store.plan_episodes(run_id, [m.id for m in methods])
    if config.retry_failed:
        store.reopen_failed(run_id)
    open_ids = set(store.open_episodes(run_id))
    todo = [m for m in methods if m.id in open_ids]
    progress = RunProgress(total=len(methods), skipped=len(methods) - len(todo))
    if on_progress:
        on_progress(progress)
    llm = LLMClient.from_settings(settings)
    agent = _make_agent(config, llm)
    attempts = {row["method_id"]: row["attempts"] for row in store.episodes(run_id)}
    token = settings.token if config.server else secrets.token_urlsafe(24)
    limiter = anyio.Semaphore(max(1, config.concurrency))

    tools = {m.id: tool_name(deployment_key, m.id) for m in todo}

    async def one(method: Method, url: str, client: httpx2.AsyncClient) -> None:
        async with limiter:
            await _episode(
                method, tools[method.id], attempts.get(method.id, 0) + 1, url, client, config, agent, scorer, store,
                run_id, progress,
            )  # fmt: skip
            if on_progress:
                on_progress(progress)

    async def all_episodes(url: str) -> None:
        async with _http_client(token) as client:
            if config.server:
                try:
                    served = await _served_tools(client, url)
                except Exception as caught:  # noqa: BLE001 - sorted just below
                    exc = _leaf(caught)
                    if not isinstance(exc, (MCPError, httpx2.HTTPError)):
                        raise
                    raise EvalError(
                        f"cannot list the tools of {url}: {type(exc).__name__}: {exc}; check the URL and --token"
                    ) from None
                missing = sorted(set(tools.values()) - served)
                if missing:
                    raise EvalError(
                        f"the server at {url} does not offer {len(missing)} of the {len(tools)} tools expected for "
                        f"suite {config.suite!r} (e.g. {missing[0]}): is it serving that suite, with the same tool "
                        "key? Give this command the server's key with --tool-key or PAU_MCP_TOOL_KEY, or the "
                        "server's data directory with --data-dir"
                    )
            async with anyio.create_task_group() as group:
                for method in todo:
                    group.start_soon(one, method, url, client)

    try:
        if todo:
            if config.server:
                await all_episodes(config.server)
            else:
                try:
                    # The key goes by environment, not argv, which other local users can read.
                    child_env = {"PAU_MCP_TOOL_KEY": deployment_key}
                    with http_server(_server_args(store.path, config, token, settings), env=child_env) as url:
                        await all_episodes(url)
                except LaunchError as exc:
                    raise EvalError(str(exc)) from None
    finally:
        await llm.aclose()
    return progress
