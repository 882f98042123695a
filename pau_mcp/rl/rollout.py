"""Rollouts: a policy served by any OpenAI-compatible endpoint, through the environment, over a suite.

A rollout run lives in the run store like an evaluation (``RunStore``'s
episode table): its episodes are planned once, each is marked running when it
starts and done (or failed) with its whole trajectory when it ends, so the
same command after ``kill -9`` finishes the unfinished episodes and repeats no
finished one. The trajectory files (``trajectories.jsonl``, one episode a
line; ``steps.parquet``, one step a row) are written from the store when the
run ends, whole and atomically.

Each step the policy gets the system prompt and the current observation (the
observation carries the recent history itself, as in the paper's set-up).
With ``answer_aware`` the policy is also told the gold description, as the
teacher of answer-aware SFT data; the recorded observations never include it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from ..llm import LLMClient, LLMError
from ..manifests import Method
from ..runstore import EpisodeResult, RunStore
from . import prompts
from .critic import Critic
from .environment import EnvConfig, ExplorationEnv
from .runtime import Runtime

__all__ = ["RolloutConfig", "RolloutError", "RolloutProgress", "answer_hint", "run_rollout", "write_trajectories"]


class RolloutError(RuntimeError):
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

    def identity(self) -> dict[str, Any]:
        """What must match for a run to be resumed rather than refused."""
        return {
            "kind": "rl",
            "model": self.model,
            "suite": self.suite,
            "critic": self.critic,
            "env": self.env.to_dict(),
            "answer_aware": self.answer_aware,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }


@dataclass
class RolloutProgress:
    """Live totals of a rollout run."""

    total: int = 0
    done: int = 0
    failed: int = 0
    skipped: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    returns: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def answer_hint(method: Method) -> str:
    """What an answer-aware teacher is told on top of the system prompt (never recorded as an observation)."""
    return (
        "You are a teacher demonstrating good exploration. You already know what the function does:\n"
        f"{method.description}\n"
        "Explore as if you did not know it: choose inputs that would reveal this behaviour to someone who does not, "
        "and conclude only once your experiments have shown every part of it. Never mention that you were told."
    )


def _policy_messages(observation: str, hint: str | None) -> list[dict[str, str]]:
    system = prompts.SYSTEM + ("\n\n" + hint if hint else "")
    return [{"role": "system", "content": system}, {"role": "user", "content": observation}]


async def _episode(
    method: Method, config: RolloutConfig, llm: LLMClient, critic: Critic, runtime: Runtime, store: RunStore,
    run_id: int, progress: RolloutProgress,
) -> None:  # fmt: skip
    store.start_episode(run_id, method.id)
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
                max_tokens=config.max_tokens,
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
        _fail(store, run_id, method, steps, input_tokens, output_tokens, cost, env, progress, exc)
        if exc.fatal:
            raise
        return
    summary = env.summary()
    total_in = input_tokens + summary["critic_input_tokens"]
    total_out = output_tokens + summary["critic_output_tokens"]
    total_cost = cost + summary["critic_cost_usd"]
    store.finish_episode(
        run_id, method.id,
        EpisodeResult(
            state="done", session_key=f"{config.run}/{method.id}", concluded=env.concluded, queries=env.budget.used,
            input_tokens=total_in, output_tokens=total_out, cost_usd=total_cost,
            trajectory=[{"kind": "rl_summary", **summary, "policy_cost_usd": cost}, *steps],
        ),
    )  # fmt: skip
    progress.done += 1
    progress.input_tokens += total_in
    progress.output_tokens += total_out
    progress.cost_usd += total_cost
    progress.returns.append(summary["return"])


def _fail(
    store: RunStore, run_id: int, method: Method, steps: list[dict[str, Any]], input_tokens: int, output_tokens: int,
    cost: float, env: ExplorationEnv, progress: RolloutProgress, exc: Exception,
) -> None:  # fmt: skip
    store.finish_episode(
        run_id, method.id,
        EpisodeResult(
            state="failed", error=f"{type(exc).__name__}: {exc}", queries=env.budget.used,
            input_tokens=input_tokens + env.critic_usage.input_tokens,
            output_tokens=output_tokens + env.critic_usage.output_tokens,
            cost_usd=cost + env.critic_cost_usd, trajectory=[{"kind": "rl_summary", **env.summary()}, *steps],
        ),
    )  # fmt: skip
    progress.failed += 1
    progress.errors.append(f"{method.id}: {exc}")


async def run_rollout(
    store: RunStore,
    methods: list[Method],
    config: RolloutConfig,
    llm: LLMClient,
    critic: Critic,
    runtime: Runtime,
    on_progress: Callable[[RolloutProgress], None] | None = None,
) -> RolloutProgress:
    """Run (or resume) a rollout over ``methods``.

    Args:
        store: The run store (the run's episodes and trajectories).
        methods: The methods, one episode each.
        config: The run.
        llm: The policy's client.
        critic: Rates the steps.
        runtime: The sandbox and loop the environments share.
        on_progress: Called after every episode with the live totals.

    Raises:
        RolloutError: the run exists with another configuration, or there is nothing to run.
        LLMError: the policy's or the critic's model failed for good (bad key, unknown model, unreachable server).
    """
    if not methods:
        raise RolloutError("no methods to roll out; check --suite, --methods and --limit")
    known = {row["name"] for row in store.runs()}
    run_id = store.ensure_run(config.run, kind="rl", config=config.identity())
    if config.run in known:
        stored = store.run_config(run_id)
        if stored != config.identity():
            raise RolloutError(
                f"run {config.run!r} exists with another configuration ({_difference(stored, config.identity())}); "
                "resume it with the same options or choose another --run"
            )
    store.plan_episodes(run_id, [m.id for m in methods])
    if config.retry_failed:
        store.reopen_failed(run_id)
    open_ids = set(store.open_episodes(run_id))
    todo = [m for m in methods if m.id in open_ids]
    progress = RolloutProgress(total=len(methods), skipped=len(methods) - len(todo))
    if on_progress:
        on_progress(progress)
    limiter = anyio.Semaphore(max(1, config.concurrency))

    async def one(method: Method) -> None:
        async with limiter:
            await _episode(method, config, llm, critic, runtime, store, run_id, progress)
            if on_progress:
                on_progress(progress)

    async with anyio.create_task_group() as group:
        for method in todo:
            group.start_soon(one, method)
    return progress


def _difference(stored: dict[str, Any], wanted: dict[str, Any]) -> str:
    keys = sorted(k for k in set(stored) | set(wanted) if stored.get(k) != wanted.get(k))
    return "; ".join(f"{k}: stored {stored.get(k)!r}, asked {wanted.get(k)!r}" for k in keys[:3]) or "unknown"


# -- trajectory files ---------------------------------------------------------------------------


def _episodes(store: RunStore, run: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    run_id = store.run_id(run)
    return store.run_config(run_id), [e for e in store.episodes(run_id, with_trajectories=True) if e["state"] == "done"]


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
        summary, *steps = episode["trajectory"] or [{}]
        record = {
            "run": run,
            "method_id": episode["method_id"],
            "attempts": episode["attempts"],
            "return": summary.get("return"),
            "concluded": bool(episode["concluded"]),
            "hypothesis": summary.get("hypothesis"),
            "queries": episode["queries"],
            "turns": summary.get("turns"),
            "input_tokens": episode["input_tokens"],
            "output_tokens": episode["output_tokens"],
            "cost_usd": episode["cost_usd"],
            "answer_aware": bool(config.get("answer_aware")),
            "steps": steps,
        }
        records.append(record)
        for step in steps:
            call = step.get("call") or {}
            critic = step.get("critic") or {}
            rows.append({
                "run": run, "method_id": episode["method_id"], "turn": step["turn"], "phase": step["phase"],
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
