"""Rollouts: a policy served by any OpenAI-compatible endpoint, through the environment, over a suite.

A rollout run goes through the same run driver as an evaluation (``pau_mcp.runs.drive``): its episodes are
planned once, each is marked running when it starts and done (or failed) with its whole trajectory when it
ends, so the same command after ``kill -9`` finishes the unfinished episodes and repeats no finished one. Its
episodes are played here (``LocalRollouts``) or on a Ray cluster (``pau_mcp.distributed.RayRollouts``). The trajectory files (``trajectories.jsonl``, one episode a
line; ``steps.parquet``, one step a row) are written from the store when the
run ends, whole and atomically.

Each step the policy gets the system prompt and the current observation (the
observation carries the recent history itself, as in the paper's set-up).
With ``answer_aware`` the policy is also told the gold description, as the
teacher of answer-aware SFT data; the recorded observations never include it.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..llm import LLMClient, LLMError
from ..manifests import Method
from ..prompts import load_prompts
from ..runs import Ending, EpisodeSource, Progress, RunError, RunSpec, drive
from ..runstore import EpisodeResult, EpisodeRow, RunStore
from . import prompts
from .critic import Critic
from .environment import EnvConfig, ExplorationEnv
from .runtime import Runtime

__all__ = [
    "LocalRollouts", "PlayRollout", "RolloutConfig", "RolloutError", "RolloutProgress", "RolloutRecord", "answer_hint",
    "play_rollout", "run_rollout", "write_trajectories",
]  # fmt: skip


class RolloutError(RunError):
    """A rollout cannot start or continue; the message says what to do."""


@dataclass(frozen=True)
class RolloutConfig:
    """One rollout run.

    Attributes:
        run: The run's name in the store (the same name resumes it).
        model: The policy, ``provider/model`` (``openai/<name>`` with ``OPENAI_BASE_URL`` for vLLM or SGLang).
        suite: The suite the methods come from.
        methods: The method ids, in order.
        critic: A description of the critic (model and mode), part of the run's identity.
        env: Turn limit, budget, window and rewards.
        answer_aware: Tell the policy the gold description (teacher data for answer-aware SFT).
        temperature: The policy's sampling temperature (None: the provider's default).
        max_tokens: Longest policy reply per step.
        concurrency: Episodes at once.
        retry_failed: Run failed episodes again.
        share_samples: Replay the policy's sampled replies from the LLM cache across runs; by default a sampled
            reply is replayed only within this run (the client's ``sample_scope`` is the run's name), so a resumed
            run replays its own steps and a new run samples afresh.
        examples: The initial examples the policy sees: ``published``, or ``deployment`` (drawn for the
            deployment key, as ``pau-mcp serve --examples deployment`` serves them; the caller puts them in the
            methods it passes).
    """

    run: str
    model: str
    suite: str
    methods: tuple[str, ...]
    critic: dict[str, Any]
    env: EnvConfig = field(default_factory=EnvConfig)
    answer_aware: bool = False
    temperature: float | None = 1.0
    max_tokens: int | None = 512
    concurrency: int = 4
    retry_failed: bool = False
    share_samples: bool = False
    examples: str = "published"

    def identity(self) -> dict[str, Any]:
        """What must match for a run to be resumed rather than refused (the examples only when not the published
        ones, so that runs recorded before them resume)."""
        identity = {
            "kind": "rl",
            "model": self.model,
            "suite": self.suite,
            "critic": self.critic,
            "env": self.env.to_dict(),
            "answer_aware": self.answer_aware,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.examples != "published":
            identity["examples"] = self.examples
        return identity

    def spec(self) -> RunSpec:
        """The run as the driver opens it."""
        return RunSpec(
            name=self.run, kind="rl", identity=self.identity(), keys=_IDENTITY_KEYS, retry_failed=self.retry_failed
        )


_IDENTITY_KEYS = (
    "kind", "model", "suite", "critic", "env", "answer_aware", "temperature", "max_tokens", "examples",
)  # fmt: skip


@dataclass
class RolloutProgress(Progress["RolloutRecord"]):
    """Live totals of one invocation of a rollout run (``Progress``), with its returns.

    Attributes:
        returns: The return of every episode this invocation finished.
    """

    returns: list[float] = field(default_factory=list)

    def count(self, ending: RolloutRecord) -> None:
        """Add a recorded episode to the live totals, its return included."""
        super().count(ending)
        if ending.result.state == "done":
            self.returns.append((ending.result.trajectory or [{}])[0].get("return", 0.0))


def answer_hint(method: Method) -> str:
    """What an answer-aware teacher is told on top of the system prompt (never recorded as an observation)."""
    return load_prompts().render("rl_teacher", description=method.description)


def _policy_messages(observation: str, hint: str | None) -> list[dict[str, str]]:
    system = prompts.SYSTEM + ("\n\n" + hint if hint else "")
    return [{"role": "system", "content": system}, {"role": "user", "content": observation}]


@dataclass
class RolloutRecord(Ending):
    """How one attempt of a rollout episode ended, wherever it ran (``Ending``; its ``fatal`` error, a bad key or an
    unknown model, ends the whole run once the ending is recorded)."""


async def play_rollout(
    method: Method, attempt: int, config: RolloutConfig, llm: LLMClient, critic: Critic, runtime: Runtime
) -> RolloutRecord:
    """Run one attempt of an episode through the environment; the ending is returned, not recorded."""
    env = ExplorationEnv(method, critic, config.env, runtime)
    first = env.reset()
    observation = first[-1]["content"]
    hint = answer_hint(method) if config.answer_aware else None
    steps: list[dict[str, Any]] = []
    input_tokens = output_tokens = 0
    cost = 0.0
    try:
        while not env.done:
            completion = await llm.complete(
                config.model, _policy_messages(observation, hint), temperature=config.temperature,
                max_tokens=config.max_tokens, sample=f"{method.id}/{env.turn}",
            )  # fmt: skip
            input_tokens += completion.spent.input_tokens
            output_tokens += completion.spent.output_tokens
            cost += completion.cost_usd
            result = await env.astep(completion.text)
            step = dict(env.trajectory[-1])
            step["policy"] = {"input_tokens": completion.usage.input_tokens, "output_tokens": completion.usage.output_tokens,
                              "cost_usd": completion.cost_usd, "cached": completion.cached,
                              "finish_reason": completion.finish_reason}  # fmt: skip
            steps.append(step)
            observation = result.observation
    except LLMError as exc:
        failed = EpisodeResult(
            state="failed", error=f"{type(exc).__name__}: {exc}", queries=env.budget.used(),
            input_tokens=input_tokens + env.critic_usage.input_tokens,
            output_tokens=output_tokens + env.critic_usage.output_tokens,
            cost_usd=cost + env.critic_cost_usd, trajectory=[{"kind": "rl_summary", **env.summary()}, *steps],
        )  # fmt: skip
        return RolloutRecord(method.id, attempt, failed, fatal=exc if exc.fatal else None)
    summary = env.summary()
    done = EpisodeResult(
        state="done", session_key=f"{config.run}/{method.id}", concluded=env.concluded, queries=env.budget.used(),
        input_tokens=input_tokens + summary["critic_input_tokens"],
        output_tokens=output_tokens + summary["critic_output_tokens"], cost_usd=cost + summary["critic_cost_usd"],
        trajectory=[{"kind": "rl_summary", **summary, "policy_cost_usd": cost}, *steps],
    )  # fmt: skip
    return RolloutRecord(method.id, attempt, done)


#: Plays one attempt of a rollout episode: ``await play(method, attempt)``.
PlayRollout = Callable[[Method, int], Awaitable[RolloutRecord]]


class LocalRollouts:
    """Rollout episodes played in this process.

    Args:
        config: The run.
        llm: The policy's client.
        critic: Rates the steps.
        runtime: The sandbox and loop the environments share.
    """

    workers = 0
    rerun = 0

    def __init__(self, config: RolloutConfig, llm: LLMClient, critic: Critic, runtime: Runtime) -> None:
        self._config = config
        self._llm = llm
        self._critic = critic
        self._runtime = runtime

    @contextlib.asynccontextmanager
    async def episodes(self, todo: Sequence[Method]) -> AsyncIterator[PlayRollout]:
        """Yields the play function (the client, critic and runtime are the caller's to close)."""

        async def play(method: Method, attempt: int) -> RolloutRecord:
            return await play_rollout(method, attempt, self._config, self._llm, self._critic, self._runtime)

        yield play


async def run_rollout(
    store: RunStore,
    methods: list[Method],
    config: RolloutConfig,
    source: EpisodeSource[Method, RolloutRecord],
    on_progress: Callable[[RolloutProgress], None] | None = None,
) -> RolloutProgress:
    """Run (or resume) a rollout over ``methods``, its episodes played by ``source`` (``LocalRollouts``, or
    ``pau_mcp.distributed.RayRollouts`` on a Ray cluster).

    Whichever source plays the episodes, this process alone writes the run store, and each episode's ending is
    recorded exactly once (``pau_mcp.runs.drive``).

    Args:
        store: The run store (the run's episodes and trajectories).
        methods: The methods, one episode each.
        config: The run.
        source: Where the episodes are played.
        on_progress: Called after every episode with the live totals.

    Raises:
        RolloutError: the run exists with another configuration, there is nothing to run, the cluster has
            no worker left, or (on a cluster) a model failed for good.
        LLMError: the policy's or the critic's model failed for good (bad key, unknown model, unreachable server).
    """
    if not methods:
        raise RolloutError("no methods to roll out; check --suite, --methods and --limit")
    try:
        return await drive(store, config.spec(), methods, source, config.concurrency, RolloutProgress(), on_progress)
    except RunError as exc:
        if isinstance(exc, RolloutError):
            raise
        raise RolloutError(str(exc)) from None


# -- trajectory files ---------------------------------------------------------------------------


def _episodes(store: RunStore, run: str) -> tuple[dict[str, Any], list[EpisodeRow]]:
    run_id = store.run_id(run)
    return store.run_config(run_id), [e for e in store.episodes(run_id, with_trajectories=True) if e.state == "done"]


def finished_returns(store: RunStore, run: str) -> list[float]:
    """The return of every finished episode of a run as stored, whichever invocation played it."""
    _, episodes = _episodes(store, run)
    return [float((episode.trajectory or [{}])[0].get("return") or 0.0) for episode in episodes]


def write_trajectories(store: RunStore, run: str, directory: Path, parquet: bool = True) -> dict[str, Path]:
    """Write a rollout run's finished episodes: ``trajectories.jsonl`` and (with pyarrow) ``steps.parquet``.

    Each file is written to a temporary name and renamed into place, so a reader never sees half a file.

    Returns:
        The files written, by format (``jsonl``, ``parquet``).

    Raises:
        RolloutError: ``parquet`` without pyarrow installed.
    """
    config, episodes = _episodes(store, run)
    directory.mkdir(parents=True, exist_ok=True)
    records = []
    rows = []
    for episode in episodes:
        summary, *steps = episode.trajectory or [{}]
        record = {
            "run": run,
            "method_id": episode.method_id,
            "attempts": episode.attempts,
            "return": summary.get("return"),
            "concluded": bool(episode.concluded),
            "hypothesis": summary.get("hypothesis"),
            "queries": episode.queries,
            "turns": summary.get("turns"),
            "input_tokens": episode.input_tokens,
            "output_tokens": episode.output_tokens,
            "cost_usd": episode.cost_usd,
            "answer_aware": bool(config.get("answer_aware")),
            "steps": steps,
        }
        records.append(record)
        for step in steps:
            call = step.get("call") or {}
            critic = step.get("critic") or {}
            rows.append({
                "run": run, "method_id": episode.method_id, "turn": step["turn"], "phase": step["phase"],
                "observation": step["observation"], "action": step["action"], "reward": float(step["reward"]),
                "components": json.dumps(step.get("components", {}), sort_keys=True), "done": bool(step["done"]),
                "call_input": call.get("input"), "call_status": call.get("status"), "call_shown": call.get("shown"),
                "call_counted": call.get("counted"), "critic_status": critic.get("status"),
                "critic_score": critic.get("score"), "hypothesis": step.get("hypothesis"),
            })  # fmt: skip
    written: dict[str, Path] = {}
    target = directory / "trajectories.jsonl"
    temporary = target.with_name(f".{target.name}.{os.getpid()}")
    with temporary.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
    temporary.replace(target)
    written["jsonl"] = target
    if parquet:
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise RolloutError(
                "writing steps.parquet needs pyarrow: pip install 'pau-mcp[rl]' (or pass --no-parquet)"
            ) from None
        schema = pa.schema([
            ("run", pa.string()), ("method_id", pa.string()), ("turn", pa.int32()), ("phase", pa.string()),
            ("observation", pa.string()), ("action", pa.string()), ("reward", pa.float64()), ("components", pa.string()),
            ("done", pa.bool_()), ("call_input", pa.string()), ("call_status", pa.string()), ("call_shown", pa.string()),
            ("call_counted", pa.bool_()), ("critic_status", pa.string()), ("critic_score", pa.int32()),
            ("hypothesis", pa.string()),
        ])  # fmt: skip
        table = pa.Table.from_pylist(rows, schema=schema)
        target = directory / "steps.parquet"
        temporary = target.with_name(f".{target.name}.{os.getpid()}")
        pq.write_table(table, temporary)
        temporary.replace(target)
        written["parquet"] = target
    return written
