"""Evaluation runs: one agent over a suite, one MCP session per method, resumable after any crash.

``run_eval`` prepares a run (its methods, protocol and server checks) and hands it to the one run driver
(``pau_mcp.runs.drive``) with an episode source: ``LocalEpisodes`` (this process, against the run's own server or
``--server``) unless the caller chose another (``pau_mcp.distributed.RayEpisodes``). The run store keeps the
run's state, so running the same command again after ``kill -9`` finishes the unfinished episodes and never
repeats a finished one. LLM replies are cached, so the repeat costs almost nothing.
"""

from __future__ import annotations

import contextlib
import re
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx2
import mcp_types as types
from httpx_aiohttp.httpx2 import AiohttpTransport
from mcp.client.client import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from ..config import Settings, SettingsError
from ..contract import TASK_KIND, label_problem
from ..descriptions import description_problem
from ..eras import client_mode
from ..llm import LLMClient, LLMError, LLMNotConfigured, Overrides, parse_model
from ..manifests import ManifestError, ManifestStore, Method, tool_name
from ..prompts import PromptsError
from ..protocol import DEFAULT_PROTOCOL, Protocol, load_protocol
from ..runs import Ending, EpisodeSource, Planned, Progress, RunError, RunSpec, drive
from ..runstore import EpisodeResult, RunStore
from ..scoring.records import record_scores
from ..server.launch import Launched, LaunchError, launched
from ..server.tokens import TokenSigner
from .agents import Agent, AgentResult, PaperAgent, ProbeAgent, ToolsAgent
from .environment import Environment
from .observer import ObserverAgent
from .reference_agent import ReferenceAgent

__all__ = [
    "AGENTS", "Connect", "ConnectTools", "EpisodeHost", "EpisodeRecord", "EvalConfig", "EvalError", "LocalEpisodes", "Play",
    "RunProgress", "RunTotals", "agent_llm", "check_config", "drive_run", "mcp_session", "planned_methods", "play_episode",
    "run_eval", "run_name", "run_totals", "server_settings", "session_key", "stored_identity",
]  # fmt: skip


#: What a run's episodes are about: a method (an exploration) or a task.
T = TypeVar("T", bound=Planned)


class EvalError(RunError):
    """An evaluation cannot start or continue; the message says what to do."""


#: The agents a run may use (``--agent``), by name.
AGENTS: dict[str, Callable[..., Agent]] = {
    "paper": PaperAgent, "tools": ToolsAgent, "probe": ProbeAgent, "observer": ObserverAgent,
}  # fmt: skip


@dataclass(frozen=True)
class EvalConfig:
    """One evaluation run.

    Attributes:
        run: The run's name in the store (re-using it resumes the run).
        model: The agent's model (``provider/model``); empty for the probe agent.
        suite: The suite evaluated.
        agent: ``paper``, ``tools``, ``probe`` or ``observer`` (``tools`` answers tasks).
        mode: ``interactive`` (queries), ``incontext`` (the initial examples only) or ``tasks`` (the suite's tasks,
            answered with its tools: ``harness.tasks``).
        budget: Queries per method.
        concurrency: Episodes at once.
        limit: Only the first ``limit`` methods (0: all).
        methods: Only these method ids (empty: all).
        server: A running server's URL (``--server``); None to start one.
        score: Score each submission.
        kinds: Which scores (``judge``, ``codematch`` need models; ``direct`` scores code the agent wrote).
        retry_failed: Run the episodes that failed in an earlier invocation again (the default); False keeps
            them failed.
        overrides: The agent model's request settings chosen by the user (``--temperature``, ...).
        protocol: Whose prompts and rules the agent and the scores follow (``pau-mcp`` or ``reference``).
        cache: Read and write the LLM response cache for the agent's model (``--no-cache``: False).
        share_samples: Replay the agent's sampled replies (temperature above 0) from other runs too
            (``--share-samples``); by default they are replayed only within this run.
        examples: The initial examples the run's server shows (``published``, or ``deployment``: drawn for the
            deployment key; the reference protocol takes only the published ones).
        docs: What the tools are documented with, in task mode (``pau_mcp.documentation``: ``examples``, ``none``,
            ``gold``, a run or an exported file); the run's own server is started with it.
        seed: The sampling seed of every request of the agent's model (one epoch of ``eval --epochs``:
            ``harness.epochs``); part of the identity. None: no seed.
        recorded: Recorded with a new run beside its identity, never compared (an epoch's place in its group).
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
    retry_failed: bool = True
    overrides: Overrides = field(default_factory=Overrides)
    protocol: str = DEFAULT_PROTOCOL
    cache: bool = True
    share_samples: bool = False
    examples: str = "published"
    docs: str = "examples"
    seed: int | None = None
    recorded: dict[str, Any] = field(default_factory=dict)

    def identity(self) -> dict[str, Any]:
        """What must match for a run to be resumed rather than refused (overrides, examples and docs only when they
        are not the defaults, so that runs recorded before them resume)."""
        identity = {
            k: v for k, v in asdict(self).items() if k in ("model", "suite", "agent", "mode", "budget", "protocol")
        }
        if self.examples != "published":
            identity["examples"] = self.examples
        if self.overrides.any():
            identity["overrides"] = {k: v for k, v in asdict(self.overrides).items() if v is not None}
        if self.docs != "examples":
            identity["docs"] = self.docs
        if self.seed is not None:
            identity["seed"] = self.seed
        return identity

    def spec(self, prompts_digest: str | None = None, with_examples: bool = True) -> RunSpec:
        """The run as the driver opens it: its identity, and what a new run records beside it (the digest of the
        prompts it follows; that its scores were given the examples the agent saw)."""
        recorded: dict[str, Any] = {**self.recorded, "with_examples": True} if with_examples else {**self.recorded}
        if prompts_digest is not None:
            recorded["prompts"] = prompts_digest
        return RunSpec(
            name=self.run, kind="eval", identity=self.identity(), keys=_IDENTITY_KEYS, defaults=_IDENTITY_DEFAULTS,
            recorded=recorded, retry_failed=self.retry_failed,
        )  # fmt: skip


_IDENTITY_KEYS = ("model", "suite", "agent", "mode", "budget", "protocol", "overrides", "examples", "docs", "seed")
#: A run made before protocols were recorded followed ours.
_IDENTITY_DEFAULTS = {"protocol": DEFAULT_PROTOCOL}


def stored_identity(config: dict[str, Any]) -> dict[str, Any]:
    """The identity part of a stored evaluation run's configuration."""
    return {**_IDENTITY_DEFAULTS, **{k: v for k, v in config.items() if k in _IDENTITY_KEYS}}


@dataclass
class RunTotals:
    """What the run store holds for a whole run, whichever invocations played its episodes.

    Attributes:
        episodes: Episodes planned.
        done: Episodes that finished.
        failed: Episodes whose latest attempt failed.
        judge: The judge ratings recorded.
        codematch: Code-match fractions (code written from the description).
        direct: Direct-code fractions (code the agent submitted).
        tokens: Tokens the agents spent, as recorded (what `pau-mcp report` counts).
        cost_usd: What they cost.
        scoring_tokens: Tokens the scorer's models spent on the run's submissions.
        scoring_cost_usd: What they cost.
        score_errors: Scores of finished episodes that could not be made (the judge's or code writer's model
            failed), as ``(method_id, kind, reason)``.
        answers: In task mode, 1.0 for each correct task and 0.0 for each wrong one.
    """

    episodes: int = 0
    done: int = 0
    failed: int = 0
    judge: list[float] = field(default_factory=list)
    codematch: list[float] = field(default_factory=list)
    direct: list[float] = field(default_factory=list)
    tokens: int = 0
    cost_usd: float = 0.0
    scoring_tokens: int = 0
    scoring_cost_usd: float = 0.0
    score_errors: list[tuple[str, str, str]] = field(default_factory=list)
    answers: list[float] = field(default_factory=list)

    @property
    def unfinished(self) -> int:
        """Episodes neither done nor failed (not run yet, or cut short)."""
        return self.episodes - self.done - self.failed


@dataclass
class RunProgress(Progress["EpisodeRecord"]):
    """Live totals of one invocation of an evaluation run (``Progress``), with its scores.

    Attributes:
        judge: The judge's ratings recorded by this invocation.
        codematch: Its code-match fractions (code written from the description).
        direct: Its direct-code fractions (code the agent submitted).
        whole: The whole run as stored once this invocation ends (earlier invocations included).
        answers: In task mode, 1.0 for each correct task and 0.0 for each wrong one.
    """

    judge: list[float] = field(default_factory=list)
    codematch: list[float] = field(default_factory=list)
    direct: list[float] = field(default_factory=list)
    whole: RunTotals | None = None
    answers: list[float] = field(default_factory=list)

    def count(self, ending: EpisodeRecord) -> None:
        """Add a recorded episode to the live totals, its scoring's tokens and its scores included."""
        super().count(ending)
        self.input_tokens += ending.scoring_input_tokens
        self.output_tokens += ending.scoring_output_tokens
        self.cost_usd += ending.scoring_cost_usd
        if ending.result.state != "done":
            return
        values = ending.values
        if (answer := values.get(TASK_KIND)) is not None:
            self.answers.append(answer)
        if (judge := values.get("judge")) is not None:
            self.judge.append(judge)
        if (match := values.get("codematch")) is not None:
            self.codematch.append(match)
        if (direct := values.get("direct")) is not None:
            self.direct.append(direct)


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


#: How long an episode's session token stays valid (an episode that outlives it fails and is run again).
_EPISODE_TOKEN_S = 24 * 3600


class _Borrowed(httpx2.AsyncBaseTransport):
    """A run's one connection pool, lent to a client that must not close it."""

    def __init__(self, pool: httpx2.AsyncBaseTransport) -> None:
        self._pool = pool

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await self._pool.handle_async_request(request)

    async def aclose(self) -> None:
        pass


def _pool() -> httpx2.AsyncBaseTransport:
    """One connection pool for every episode of a run: a client per episode built its own TLS context (~30 ms).

    Requests go through aiohttp (which sets TCP_NODELAY): about 40% less CPU per request than httpx's own
    transport, and the MCP client's requests are half of what the harness spends per episode.
    """
    return AiohttpTransport()


def _http_client(token: str | None, pool: httpx2.AsyncBaseTransport | None = None) -> httpx2.AsyncClient:
    """An HTTP client sending ``token``, over ``pool`` when given (a client over a borrowed pool costs ~20 us)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = _Borrowed(pool) if pool is not None else _pool()
    return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300), transport=transport)


@contextlib.asynccontextmanager
async def mcp_session(client: httpx2.AsyncClient, url: str, era: str = "modern") -> AsyncIterator[ClientSession]:
    """The official MCP client over Streamable HTTP in an ``--mcp-era``, ready (handshake or discover done).

    Raises:
        MCPError, httpx2.HTTPError: the server refused or could not be reached.
    """
    async with Client(streamable_http_client(url, http_client=client), mode=client_mode(era), cache=None) as mcp:
        yield mcp.session


#: Opens the MCP session of one episode: ``connect(tool, session_key)``.
Connect = Callable[[str, str], contextlib.AbstractAsyncContextManager[ClientSession]]
#: Opens an MCP session scoped to several tools (a task's): ``connect_tools(tools, session_key)``.
ConnectTools = Callable[[Iterable[str], str], contextlib.AbstractAsyncContextManager[ClientSession]]


def _scoped_sessions(
    url: str, pool: httpx2.AsyncBaseTransport, signer: TokenSigner, run: str, era: str
) -> ConnectTools:
    """MCP sessions each under a session token of its own (its label is the episode's session key).

    The token scopes the session to its tools and names its budget, so no request depends on a connection:
    any era, any server process sharing the run store, and a new connection per request all count alike.
    """

    @contextlib.asynccontextmanager
    async def connect(tools: Iterable[str], key: str) -> AsyncIterator[ClientSession]:
        token = signer.issue(key, run=run, methods=tools, expires_in=_EPISODE_TOKEN_S)
        async with _http_client(token, pool) as client, mcp_session(client, url, era) as session:
            yield session

    return connect


async def _served_tools(client: httpx2.AsyncClient, url: str, era: str) -> set[str]:
    """Every tool a running server lists (requests that spend nothing)."""
    async with mcp_session(client, url, era) as session:
        names: set[str] = set()
        cursor = None
        while True:
            listed = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
            names.update(t.name for t in listed.tools)
            cursor = listed.next_cursor
            if cursor is None:
                return names


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


def run_name(suite: str, agent: str, mode: str, model: str) -> str:
    """The name a run gets unless the user chooses one: ``<suite>-<agent>-<mode>-<model>`` in label characters."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{suite}-{agent}-{mode}-{model or 'none'}").strip("-")


def session_key(run: str, method_id: str, attempt: int) -> str:
    """The session label of one attempt of an episode."""
    return f"{run}/{method_id}/{attempt}"


async def play_episode(
    method: Method, tool: str, attempt: int, connect: Connect, config: EvalConfig, agent: Agent, scorer: Any,
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
        kinds = [k for k in config.kinds if k != "direct" or result.code]
        # Without a description nothing was submitted, so nothing is scored (the report counts such episodes apart).
        if config.score and kinds and submission is not None:
            scored = await scorer.score(method.id, result.description, result.code, examples=examples, kinds=kinds)
            record.values = record_scores(store, submission, scored, with_examples=True)
            record.scoring_input_tokens = scored.usage.input_tokens
            record.scoring_output_tokens = scored.usage.output_tokens
            record.scoring_cost_usd = scored.cost_usd
        record.result = EpisodeResult(
            state="done", session_key=key, submission_id=submission, concluded=result.concluded,
            queries=env.queries, input_tokens=result.usage.input_tokens, output_tokens=result.usage.output_tokens,
            cost_usd=result.cost_usd, trajectory=[s.to_json() for s in env.trajectory],
            examples=[list(e) for e in examples],
        )  # fmt: skip
        return record
    except Exception as caught:  # noqa: BLE001 - sorted just below
        exc = _leaf(caught)
        if not isinstance(exc, (LLMError, EvalError, MCPError, httpx2.HTTPError)):
            raise
        # Permanent for this episode (transient provider errors were already retried): recorded, reported, not dropped.
        said = str(exc)
        if isinstance(exc, LLMError) and exc.too_long and env is not None and not _replied(env):
            said = (
                f"{exc.model}: the agent's first request is longer than the model's context: serve the model with a "
                "longer context (llama-server -c, vLLM --max-model-len, Ollama num_ctx); --budget does not shorten it"
            )
        failed = EpisodeResult(
            state="failed", session_key=key, error=f"{type(exc).__name__}: {said}",
            submission_id=store.submission_by_receipt(config.run, key, method.id, env.submission_id)
            if env and env.submission_id
            else None,
            input_tokens=result.usage.input_tokens if result else 0,
            output_tokens=result.usage.output_tokens if result else 0,
            trajectory=[s.to_json() for s in env.trajectory] if env else [],
        )  # fmt: skip
        return EpisodeRecord(method.id, attempt, failed)


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


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside task-group wrappers (the MCP client runs in task groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def check_config(config: EvalConfig) -> None:
    """Refuse a run that could not play a single episode, before anything is created for it.

    Raises:
        EvalError: an unknown agent, a missing model, a model that names no known provider, or a run name
            that cannot label a session.
    """
    problem = label_problem(config.run, "run name")
    if problem:
        raise EvalError(problem)
    if config.examples not in ("published", "deployment"):
        raise EvalError(f"unknown examples {config.examples!r}; choose published or deployment")
    if config.examples == "deployment" and config.protocol == "reference":
        raise EvalError(
            "the reference protocol shows the published examples, as the reference benchmark did; drop "
            "--examples deployment, or use --protocol pau-mcp"
        )
    if config.agent not in AGENTS:
        raise EvalError(f"unknown agent {config.agent!r}; choose from {', '.join(AGENTS)}")
    if config.mode == "tasks" and config.agent != "tools":
        raise EvalError(
            f"task mode is answered by native tool calling (the tools agent), not {config.agent}: leave --agent out"
        )
    if config.docs != "examples" and config.mode != "tasks":
        raise EvalError("--docs chooses how the tools are documented for task mode: add --mode tasks")
    if config.agent == "probe":
        return
    if not config.model:
        raise EvalError(f"the {config.agent} agent needs --model (e.g. openai/gpt-4o-mini)")
    try:
        parse_model(config.model)
    except LLMNotConfigured as exc:
        raise EvalError(str(exc)) from None


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


def run_totals(store: RunStore, run_id: int) -> RunTotals:
    """The whole run as the store holds it: episodes by state, recorded scores, tokens and cost."""
    totals = RunTotals()
    for episode in store.episodes(run_id):
        totals.episodes += 1
        totals.done += episode.state == "done"
        totals.failed += episode.state == "failed"
        totals.tokens += episode.input_tokens + episode.output_tokens
        totals.cost_usd += episode.cost_usd
        scores = episode.scores
        for score in scores.values():
            usage = score.detail.get("usage") or {}
            totals.scoring_tokens += int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
            totals.scoring_cost_usd += float(score.detail.get("cost_usd") or 0.0)
        if episode.state != "done":
            continue
        for kind, score in scores.items():
            if score.status == "error":
                reason = str(score.detail.get("reason") or "no reason was recorded")
                totals.score_errors.append((episode.method_id, kind, reason))
        values = {kind: score.value for kind, score in scores.items() if score.value is not None}
        if TASK_KIND in values:
            totals.answers.append(values[TASK_KIND])
        if "judge" in values:
            totals.judge.append(values["judge"])
        if "codematch" in values:
            totals.codematch.append(values["codematch"])
        if "direct" in values:
            totals.direct.append(values["direct"])
    return totals


#: Plays one attempt of an evaluation episode: ``await play(method, attempt)``.
Play = Callable[[Method, int], Awaitable[EpisodeRecord]]


def planned_methods(settings: Settings, config: EvalConfig) -> list[Method]:
    """The methods a run covers, in plan order (its suite, narrowed by ``methods`` and ``limit``).

    Raises:
        ManifestError: the suite does not exist or a manifest is broken.
    """
    suite = ManifestStore(settings.manifests).suite(config.suite)
    wanted = set(config.methods)
    methods = [m for m in suite.methods.values() if not wanted or m.id in wanted]
    return methods[: config.limit] if config.limit else methods


async def run_eval(
    settings: Settings, config: EvalConfig, scorer: Any, on_progress: Callable[[RunProgress], None] | None = None,
    source: EpisodeSource[Method, EpisodeRecord] | None = None,
) -> RunProgress:  # fmt: skip
    """Run (or resume) an evaluation: its episodes played by ``source``, here by default.

    Whichever source plays the episodes, this process alone writes the run store, and each episode's ending (with
    its session, when a Ray worker recorded it) is recorded exactly once (``pau_mcp.runs.drive``).

    Args:
        settings: The ``Settings`` (run store, manifests, sandbox cache and limits, token for ``--server``).
        config: What to evaluate.
        scorer: A ``pau_mcp.scoring.Scorer`` (used only when ``config.score``, and only by ``LocalEpisodes``).
        on_progress: Called after every episode with the live totals.
        source: Where episodes are played (``pau_mcp.distributed.RayEpisodes`` on a Ray cluster); None: here
            (``LocalEpisodes``).

    Raises:
        EvalError: the run exists with another configuration, the suite is missing, broken or empty, the server
            fails, or the source can play no more episodes (no Ray worker left).
    """
    check_config(config)
    if config.mode == "tasks":  # tasks are not methods: their runs go through ``tasks.run_tasks``
        raise EvalError("a task run is played by pau_mcp.harness.tasks.run_tasks (`pau-mcp eval --mode tasks`)")
    try:
        deployment_key = settings.deployment_key()
    except SettingsError as exc:
        raise EvalError(str(exc)) from None
    try:
        methods = planned_methods(settings, config)
    except ManifestError as exc:
        raise EvalError(str(exc)) from None
    if not methods:
        raise EvalError(f"no methods to evaluate in suite {config.suite!r} with these options")
    try:
        protocol = load_protocol(config.protocol, settings.data_dir)
    except PromptsError as exc:
        raise EvalError(str(exc)) from None
    scoring = getattr(scorer, "protocol", None) if config.score and source is None else None
    if scoring is not None and scoring.name != protocol.name:
        raise EvalError(
            f"the scorer follows the {scoring.name} protocol and the run {protocol.name}: build both from the same "
            "--protocol"
        )
    if config.server:  # a wrong URL, token, tool key or era ends the command here, before the run exists
        async with _http_client(settings.token) as client:
            await _check_served(
                client, config.server, config, {tool_name(deployment_key, m.id) for m in methods}, settings.mcp_era
            )
    return await drive_run(
        settings, config, config.spec(protocol.prompts.digest), methods,
        lambda store: source if source is not None else LocalEpisodes(settings, config, scorer, store, deployment_key),
        on_progress,
    )  # fmt: skip


async def drive_run(
    settings: Settings,
    config: EvalConfig,
    spec: RunSpec,
    items: Sequence[T],
    source_for: Callable[[RunStore], EpisodeSource[T, EpisodeRecord]],
    on_progress: Callable[[RunProgress], None] | None,
) -> RunProgress:
    """Drive an evaluation or task run to its end in the settings' run store, and attach the whole run's totals.

    Raises:
        EvalError: the run cannot start or continue (its identity refused, no worker left, ...).
    """
    store = RunStore(settings.db_path)
    try:
        try:
            progress = await drive(
                store, spec, items, source_for(store), config.concurrency, RunProgress(), on_progress
            )
        except RunError as exc:
            if isinstance(exc, EvalError):
                raise
            raise EvalError(str(exc)) from None  # the run's identity refused: one kind of error for the caller
        progress.whole = run_totals(store, store.run_id(config.run))
        return progress
    finally:
        store.close()


class EpisodeHost:
    """Plays a run's episodes in this process against one MCP server: ``--server``, or one started here.

    The server records each session in ``store``'s file and the scores go to ``store``; ``play`` returns
    the ending for the caller to record. A Ray worker hosts one of these over a run store of its own.

    Args:
        settings: The ``Settings`` (manifests, sandbox cache, token for ``--server``).
        config: The run.
        scorer: A ``pau_mcp.scoring.Scorer`` (used only when ``config.score``).
        store: The run store the server records sessions in.
        deployment_key: Keys tool names; the started server gets it in its settings.
        llm: The agent's LLM client (default: one made from ``settings``); closed with the host.
    """

    def __init__(
        self, settings: Any, config: EvalConfig, scorer: Any, store: RunStore, deployment_key: str,
        llm: LLMClient | None = None,
    ) -> None:  # fmt: skip
        self.settings = settings
        self.config = config
        self.scorer = scorer
        self.store = store
        self.url: str | None = None
        self._key = deployment_key
        self._llm = llm if llm is not None else agent_llm(settings, config)
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
        pool = _pool()
        self._stack.push_async_callback(pool.aclose)
        era = self.settings.mcp_era
        if self.config.server:
            async with _http_client(self.settings.token, pool) as client:
                await _check_served(client, self.config.server, self.config, set(tools), era)
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
        self._connect = _scoped_sessions(self.url, pool, TokenSigner(self._key), self.config.run, era)
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
        if stopped is None and not await _listening(server.url):
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
        scorer: A ``pau_mcp.scoring.Scorer`` (used only when ``config.score``).
        store: The run store the server records sessions in.
        deployment_key: Names the tools and signs each episode's session token.
    """

    workers = 0
    rerun = 0

    def __init__(
        self, settings: Settings, config: EvalConfig, scorer: Any, store: RunStore, deployment_key: str
    ) -> None:
        self._settings = settings
        self._config = config
        self._scorer = scorer
        self._store = store
        self._key = deployment_key

    @contextlib.asynccontextmanager
    async def episodes(self, todo: Sequence[Method]) -> AsyncIterator[Play]:
        """Start the run's server (or check ``--server``) for ``todo``; yields the play function."""
        host = EpisodeHost(self._settings, self._config, self._scorer, self._store, self._key)

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


async def _listening(url: str) -> bool:
    """Whether something accepts TCP connections at ``url``'s host and port (a refused connection: nothing)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        with anyio.fail_after(5):
            stream = await anyio.connect_tcp(parts.hostname or "127.0.0.1", parts.port or 80)
    except OSError:
        return False
    except TimeoutError:
        return True  # busy, not gone
    await stream.aclose()
    return True


async def _unreachable(client: httpx2.AsyncClient, url: str, exc: BaseException) -> str:
    """Why the MCP client could not talk to ``url``, in one line: the HTTP status of a plain request says more
    than the client's error (401: the token; 404: the path)."""
    from urllib.parse import urlsplit

    try:
        answer = await client.post(
            url,
            json={"jsonrpc": "2.0", "id": 0, "method": "ping"},
            headers={"Accept": "application/json, text/event-stream"},
        )
        status: int | None = answer.status_code
    except httpx2.HTTPError:
        status = None
    if status in (401, 403):
        sent = "a token the server refused" if "authorization" in client.headers else "no token"
        return (
            f"the server at {url} answered {status} to {sent}: give this command the server's token with --token "
            "or PAU_MCP_TOKEN"
        )
    if status in (404, 405):
        parts = urlsplit(url)
        hint = f"; `pau-mcp serve --transport http` serves MCP at {parts.scheme}://{parts.netloc}/mcp"
        return f"nothing answers MCP at {url} ({status}: wrong path){hint if parts.path.rstrip('/') != '/mcp' else ''}"
    return (
        f"cannot list the tools of {url}: {type(exc).__name__}: {exc}; check the URL and --token (a server that "
        "does not speak MCP 2026-07-28 needs --mcp-era legacy or auto / PAU_MCP_ERA)"
    )


async def _check_served(client: httpx2.AsyncClient, url: str, config: EvalConfig, tools: set[str], era: str) -> None:
    """Refuse a ``--server`` that does not offer the run's tools (another suite, or another tool key)."""
    try:
        served = await _served_tools(client, url, era)
    except Exception as caught:  # noqa: BLE001 - sorted just below
        exc = _leaf(caught)
        if not isinstance(exc, (MCPError, httpx2.HTTPError)):
            raise
        raise EvalError(await _unreachable(client, url, exc)) from None
    missing = sorted(tools - served)
    if missing:
        raise EvalError(
            f"the server at {url} does not offer {len(missing)} of the {len(tools)} tools expected for "
            f"suite {config.suite!r} (e.g. {missing[0]}): is it serving that suite, with the same tool "
            "key? Give this command the server's key with --tool-key or PAU_MCP_TOOL_KEY, or the "
            "server's data directory with --data-dir"
        )
