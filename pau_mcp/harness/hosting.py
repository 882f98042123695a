"""Episode hosting: one attempt of an episode played over an MCP session (``play_episode``), the host that plays a
run's episodes in this process against one server (``EpisodeHost``: the run's own, started here, or ``--server``),
and the episode source of a local run (``LocalEpisodes``)."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from ..config import Settings
from ..contract import Scoring
from ..descriptions import description_problem
from ..llm import LLMClient, LLMError
from ..manifests import Method, tool_name
from ..prompts import PromptsError
from ..protocol import Protocol, load_protocol
from ..runs import Ending
from ..runstore import EpisodeResult, RunStore
from ..scoring.records import record_scores
from ..server.launch import Launched, LaunchError, launched
from ..server.tokens import TokenSigner
from .agents import Agent, AgentResult
from .client import (
    Connect,
    ConnectTools,
    accepts_connections,
    check_served,
    connection_pool,
    http_client,
    leaf_error,
    scoped_sessions,
)
from .configuration import AGENTS, EvalConfig, EvalError, check_config
from .environment import Environment
from .observer import ObserverAgent
from .reference_agent import ReferenceAgent

__all__ = [
    "EpisodeHost", "EpisodeRecord", "LocalEpisodes", "Play", "agent_llm", "play_episode", "server_settings",
    "session_key",
]  # fmt: skip


def server_settings(settings: Settings, config: EvalConfig, store: RunStore, token: str, key: str) -> Settings:
    """The whole settings of a run's own server: the run's (its limits, manifests, caches and data directory), with
    the run's budget, examples and protocol, the run store, the deployment key and a main token of its own."""
    return settings.model_copy(
        update={
            "token": token, "tool_key": key, "db": store.path, "budget": config.budget, "examples": config.examples,
            "protocol": config.protocol,
        }
    )  # fmt: skip


def _server_args(config: EvalConfig) -> list[str]:
    """The `pau-mcp serve` options of a run's own server beside its settings (the run, and the docs of task mode)."""
    args = ["--suite", config.suite, "--run", config.run]
    if config.docs != "examples":
        path = Path(config.docs).expanduser()
        args += ["--docs", str(path.resolve()) if path.is_file() else config.docs]
    return args


@dataclass
class EpisodeRecord(Ending):
    """How one attempt of an evaluation episode ended, wherever it ran (``Ending``), with its scores.

    Attributes:
        values: The submission's scores by kind (None where unscored).
        scoring_input_tokens: Tokens the scorer's models read.
        scoring_output_tokens: Tokens the scorer's models wrote.
        scoring_cost_usd: What scoring cost.
    """

    values: dict[str, float | None] = field(default_factory=dict)
    scoring_input_tokens: int = 0
    scoring_output_tokens: int = 0
    scoring_cost_usd: float = 0.0


def session_key(run: str, method_id: str, attempt: int) -> str:
    """The session label of one attempt of an episode."""
    return f"{run}/{method_id}/{attempt}"


async def play_episode(
    method: Method, tool: str, attempt: int, connect: Connect, config: EvalConfig, agent: Agent, scorer: Scoring | None,
    store: RunStore,
) -> EpisodeRecord:  # fmt: skip
    """Run one attempt of an episode over the MCP session ``connect`` opens for it: explore, submit, score.

    The server records the session's calls and submission in its run store, and the scores go to ``store``
    (the same file); the episode's own ending is returned, not recorded, so the caller records it once.
    Expected failures (a provider's permanent error, a refused submission, a lost connection) are an
    ending with ``state="failed"``; anything else is raised.
    """
    key = session_key(config.run, method.id, attempt)
    result: AgentResult | None = None
    env: Environment | None = None
    try:
        async with connect(tool, key) as session:
            env = await Environment.open(session, tool)
            result = await agent.run(env, config.mode, config.budget)
            problem = _not_described(result, config)
            submission: int | None = None
            if problem is None:
                submitted = await env.submit(result.description, result.code)
                if submitted.is_error or env.submission_id is None:
                    raise EvalError(f"the server refused the submission: {submitted.text}")
                # The receipt numbers the session's own submissions; the store, which the server shares, has its id.
                submission = store.submission_by_receipt(config.run, key, method.id, env.submission_id)
                if submission is None:
                    raise EvalError(f"the server's receipt names no submission of {key} in this run store")
            else:  # nothing to submit: never a placeholder the judge would rate, or an export would serve
                env.note("note", event="no_description", problem=problem)
        record = EpisodeRecord(method.id, attempt, EpisodeResult(state="done"))
        examples = result.examples if result.examples is not None else env.observed_examples()
        # Without a description nothing was submitted, so nothing is scored (the report counts such episodes apart).
        if submission is not None and scorer is not None:
            await _score(record, scorer, store, submission, result, examples, config)
        record.result = EpisodeResult(
            state="done", session_key=key, submission_id=submission, concluded=result.concluded,
            queries=env.queries, input_tokens=result.usage.input_tokens, output_tokens=result.usage.output_tokens,
            cost_usd=result.cost_usd, trajectory=[s.to_json() for s in env.trajectory],
            examples=[list(e) for e in examples],
        )  # fmt: skip
        return record
    except Exception as caught:  # noqa: BLE001 - sorted just below
        exc = leaf_error(caught)
        if not isinstance(exc, (LLMError, EvalError, MCPError, httpx2.HTTPError)):
            raise
        # Permanent for this episode (transient provider errors were already retried): recorded, reported, not dropped.
        failed = EpisodeResult(
            state="failed", session_key=key, error=f"{type(exc).__name__}: {_why_failed(exc, env)}",
            submission_id=store.submission_by_receipt(config.run, key, method.id, env.submission_id)
            if env and env.submission_id
            else None,
            input_tokens=result.usage.input_tokens if result else 0,
            output_tokens=result.usage.output_tokens if result else 0,
            trajectory=[s.to_json() for s in env.trajectory] if env else [],
        )  # fmt: skip
        return EpisodeRecord(method.id, attempt, failed)


async def _score(
    record: EpisodeRecord, scorer: Scoring, store: RunStore, submission: int, result: AgentResult,
    examples: Sequence[Sequence[Any]], config: EvalConfig,
) -> None:  # fmt: skip
    """Score a submission as the run asks (direct code only when the agent wrote code), into ``store`` and ``record``."""
    kinds = [k for k in config.kinds if k != "direct" or result.code]
    if not config.score or not kinds:
        return
    scored = await scorer.score(record.method_id, result.description, result.code, examples=examples, kinds=kinds)
    record.values = record_scores(store, submission, scored, with_examples=True)
    record.scoring_input_tokens = scored.usage.input_tokens
    record.scoring_output_tokens = scored.usage.output_tokens
    record.scoring_cost_usd = scored.cost_usd


def _why_failed(exc: BaseException, env: Environment | None) -> str:
    """What an episode's failure says: a first request longer than the model's context is named as such."""
    if isinstance(exc, LLMError) and exc.too_long and env is not None and not _replied(env):
        return (
            f"{exc.model}: the agent's first request is longer than the model's context: serve the model with a "
            "longer context (llama-server -c, vLLM --max-model-len, Ollama num_ctx); --budget does not shorten it"
        )
    return str(exc)


def _replied(env: Environment) -> bool:
    """Whether the model answered at least one request of the episode."""
    return any(step.kind == "model" for step in env.trajectory)


def _not_described(result: AgentResult, config: EvalConfig) -> str | None:
    """Why an agent's result holds no description to submit, or None when it holds one.

    Under the reference protocol the reference agent's final text is submitted as the reference submits it (only an
    empty one is not); this project's agents submit prose only (``pau_mcp.descriptions``).
    """
    if config.protocol == "reference" and config.agent == "paper":
        return None if (result.description or "").strip() else "it is empty"
    return description_problem(result.description)


def agent_llm(settings: Any, config: EvalConfig, env: Any = None) -> LLMClient:
    """The agent's model client for a run: the response cache unless ``config.cache`` is off, sampled replies
    replayed only within the run (``config.share_samples``: across runs too), every request under the run's seed."""
    return LLMClient.from_settings(
        settings, use_cache=config.cache, env=env, sample_scope=config.run, share_samples=config.share_samples,
        seed=config.seed,
    )  # fmt: skip


def _make_agent(config: EvalConfig, llm: LLMClient, protocol: Protocol, settings: Any = None) -> Agent:
    """The run's agent; an observer gets a sandbox of this process for its own code (closed with the host)."""
    check_config(config)
    if config.agent == "probe":
        return AGENTS["probe"]()
    if protocol.reference and config.agent == "paper":
        return ReferenceAgent(llm=llm, model=config.model, prompts=protocol.prompts, overrides=config.overrides)
    if config.agent == "observer":
        from ..sandboxing import make_sandbox, sandbox_limits

        return ObserverAgent(
            llm=llm, model=config.model, sandbox=make_sandbox(settings), limits=sandbox_limits(settings),
            coder_model=getattr(settings, "coder_model", None), overrides=config.overrides,
        )  # fmt: skip
    # The tools agent has no counterpart in the reference: it keeps this project's wording under either protocol.
    return AGENTS[config.agent](llm=llm, model=config.model, overrides=config.overrides)


#: Plays one attempt of an evaluation episode: ``await play(method, attempt)``.
Play = Callable[[Method, int], Awaitable[EpisodeRecord]]


class EpisodeHost:
    """Plays a run's episodes in this process against one MCP server: ``--server``, or one started here.

    The server records each session in ``store``'s file and the scores go to ``store``; ``play`` returns
    the ending for the caller to record. A Ray worker hosts one of these over a run store of its own.

    Args:
        settings: The ``Settings`` (manifests, sandbox cache, token for ``--server``).
        config: The run.
        scorer: Scores the submissions (used only when ``config.score``).
        store: The run store the server records sessions in.
        deployment_key: Keys tool names; the started server gets it in its settings.
        llm: The agent's LLM client (default: one made from ``settings``); closed with the host.
        protocol: The run's protocol, as the run resolved it (default: loaded here, as a Ray worker does).
    """

    def __init__(
        self, settings: Any, config: EvalConfig, scorer: Scoring | None, store: RunStore, deployment_key: str,
        llm: LLMClient | None = None, protocol: Protocol | None = None,
    ) -> None:  # fmt: skip
        self.settings = settings
        self.config = config
        self.scorer = scorer
        self.store = store
        self.url: str | None = None
        self._key = deployment_key
        self._llm = llm if llm is not None else agent_llm(settings, config)
        if protocol is None:
            try:
                protocol = load_protocol(config.protocol, settings.data_dir)
            except PromptsError as exc:
                raise EvalError(str(exc)) from None
        self._agent = _make_agent(config, self._llm, protocol, settings)
        self._stack = contextlib.AsyncExitStack()
        if isinstance(self._agent, ObserverAgent):
            self._stack.callback(self._agent.sandbox.close)
        self._connect: ConnectTools | None = None
        self._server: Launched | None = None

    async def start(self, tools: Iterable[str] = ()) -> str:
        """Start this run's own server (or check ``--server`` offers ``tools``); returns its URL.

        Each episode then gets a session token of its own, signed with the deployment key (the server's: with
        ``--server`` the same key names the tools), so the server needs no per-connection state for it.

        Raises:
            EvalError: the server did not start, or ``--server`` lacks some of ``tools``.
        """
        self._stack.push_async_callback(self._llm.aclose)
        pool = connection_pool()
        self._stack.push_async_callback(pool.aclose)
        era = self.settings.mcp_era
        if self.config.server:
            async with http_client(self.settings.token, pool) as client:
                await check_served(client, self.config.server, self.config.suite, set(tools), era)
            self.url = self.config.server
        else:
            try:
                # The whole settings object, secrets included, goes in a private file, never on the command line.
                # The main token is this process's alone: episodes use session tokens.
                served = server_settings(self.settings, self.config, self.store, secrets.token_urlsafe(24), self._key)
                self._server = self._stack.enter_context(launched(_server_args(self.config), settings=served))
                self.url = self._server.url
            except LaunchError as exc:
                raise EvalError(str(exc)) from None
        self._connect = scoped_sessions(self.url, pool, TokenSigner(self._key), self.config.run, era)
        return self.url

    def session(self, tools: Iterable[str], key: str) -> contextlib.AbstractAsyncContextManager[ClientSession]:
        """An MCP session labelled ``key``, under a session token scoped to ``tools`` (once started).

        Raises:
            EvalError: the host was not started.
        """
        if self._connect is None:
            raise EvalError("the episode host was not started; call start() first")
        return self._connect(tools, key)

    @property
    def llm(self) -> LLMClient:
        """The agent's LLM client (closed with the host)."""
        return self._llm

    async def play(self, method: Method, tool: str, attempt: int) -> EpisodeRecord:
        """Run one attempt of an episode (``play_episode``) against this host's server."""
        if self._connect is None:
            raise EvalError("the episode host was not started; call start() first")
        connect = self._connect
        return await play_episode(
            method, tool, attempt, lambda tool, key: connect([tool], key), self.config, self._agent, self.scorer,
            self.store,
        )  # fmt: skip

    async def server_stopped(self, connection_lost: bool = False) -> str | None:
        """How this host's own server stopped (its exit code or signal, its last error lines), or None while it
        runs or when the host uses ``--server``.

        A server on its way out closes its sockets before it has exited: a connection refused on its port means it
        is going, and its exit is waited for (a few seconds at most) to say how it ended. An episode whose
        connection was lost (``connection_lost``) may have seen the kill before the port closed: the server's exit
        is then waited for a moment even while its port still answers.
        """
        server = self._server
        if server is None:
            return None
        stopped = server.stopped()
        if stopped is None and not await accepts_connections(server.url):
            stopped = await anyio.to_thread.run_sync(server.stopped, 5.0)
            if stopped is None:
                return "it stopped accepting connections"
        elif stopped is None and connection_lost:
            stopped = await anyio.to_thread.run_sync(server.stopped, 2.0)
        return stopped

    async def close(self) -> None:
        """Stop the server (if started here) and close the clients."""
        await self._stack.aclose()


class LocalEpisodes:
    """Episodes played in this process against one MCP server: ``--server``, or the run's own, started here.

    When the run's own server stops, the run stops (``EvalError``): the ending of an episode it cut short says
    nothing about the episode, which stays open with the rest, for the same command to resume.

    Args:
        settings: The ``Settings`` (manifests, sandbox cache and limits, token for ``--server``).
        config: The run.
        scorer: Scores the submissions (used only when ``config.score``).
        store: The run store the server records sessions in.
        deployment_key: Names the tools and signs each episode's session token.
        protocol: The run's protocol, as the run resolved it.
    """

    workers = 0
    rerun = 0

    def __init__(
        self, settings: Settings, config: EvalConfig, scorer: Scoring | None, store: RunStore, deployment_key: str,
        protocol: Protocol,
    ) -> None:  # fmt: skip
        self._settings = settings
        self._config = config
        self._scorer = scorer
        self._store = store
        self._key = deployment_key
        self._protocol = protocol

    @contextlib.asynccontextmanager
    async def episodes(self, todo: Sequence[Method]) -> AsyncIterator[Play]:
        """Start the run's server (or check ``--server``) for ``todo``; yields the play function."""
        host = EpisodeHost(self._settings, self._config, self._scorer, self._store, self._key, protocol=self._protocol)

        async def play(method: Method, attempt: int) -> EpisodeRecord:
            record = await host.play(method, tool_name(self._key, method.id), attempt)
            if record.result.state == "failed":
                # Not the model's or the harness's own refusal: the connection, which the server's end may explain.
                lost = not (record.result.error or "").startswith(("LLM", "EvalError"))
                stopped = await host.server_stopped(connection_lost=lost)
                if stopped is not None:  # the ending says nothing about the episode: it stays open, as do the rest
                    raise EvalError(
                        f"the MCP server this run started has stopped ({stopped}), so the run stops here: the "
                        "episodes it cut short and those not yet played are left open, none recorded as failed. Run "
                        "the same command again to resume the run (finished episodes are kept)"
                    )
            return record

        try:
            await host.start({tool_name(self._key, m.id) for m in todo})
            yield play
        finally:
            await host.close()
