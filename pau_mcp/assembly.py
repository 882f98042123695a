"""The composition root of runs: the parts an evaluation or a rollout is made of, built from ``Settings`` in one place.

The commands, the Ray workers (``pau_mcp.distributed``), the Inspect task and the tests build an evaluation run
(``eval_run``: its protocol loaded once, its scorer), a run's scorer and a rollout's policy client, critic and sandbox
runtime here, so a part is the same wherever the run plays (the same
protocol, cache scope and limits on a Ray worker as in the command). The run's own MCP server is started from the
run's whole settings object (``pau_mcp.harness.hosting.server_settings``, ``pau_mcp.server.launch``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import anyio

from wasm_runtime import SandboxInterface

from .config import Settings
from .llm import LLMClient
from .manifests import ManifestStore
from .protocol import Protocol, load_protocol
from .sandboxing import make_sandbox, sandbox_limits

if TYPE_CHECKING:
    from .harness import EpisodeRecord, EvalConfig, EvalRun
    from .manifests import Method
    from .rl import Critic, Runtime
    from .rl.rollout import RolloutConfig
    from .runs import EpisodeSource
    from .scoring import Scorer

__all__ = ["RolloutParts", "eval_run", "rollout_parts", "run_scorer"]


def run_scorer(
    settings: Settings,
    sandbox: SandboxInterface,
    *,
    run: str | None = None,
    share_samples: bool = False,
    use_cache: bool = True,
    env: Mapping[str, str] | None = None,
    protocol: Protocol | None = None,
) -> Scorer:
    """The scorer of a run: the settings' judge and code writer, price table, limits and protocol, over ``sandbox``.

    Args:
        settings: The run's settings.
        sandbox: Where code runs (closed by the caller).
        run: The run's name: a judge sampling above temperature 0 replays its replies only within it.
        share_samples: Replay sampled replies across runs too.
        use_cache: Read and write the LLM response cache.
        env: The providers' variables (default: this process's).
        protocol: The run's protocol (default: the settings').

    Raises:
        pau_mcp.prompts.PromptsError: the reference protocol's prompts were never imported.
    """
    from .scoring import Scorer

    return Scorer(
        ManifestStore(settings.manifests), sandbox,
        LLMClient.from_settings(settings, use_cache=use_cache, env=env, sample_scope=run, share_samples=share_samples),
        judge_model=settings.judge_model, coder_model=settings.coder_model, limits=sandbox_limits(settings),
        protocol=protocol if protocol is not None else load_protocol(settings.protocol, settings.data_dir),
    )  # fmt: skip


@dataclass(frozen=True)
class RolloutParts:
    """What a rollout's episodes are played with in one process: the policy's client, the sandbox runtime the
    environments share, and the critic (with a client of its own: it runs on the runtime's event loop, and an SDK
    client belongs to the loop that made it)."""

    llm: LLMClient
    runtime: Runtime
    critic: Critic

    async def aclose(self) -> None:
        """Close the policy's client, the critic's (on the runtime's loop, from a thread: this loop must not wait on
        it), and the runtime."""
        try:
            await self.llm.aclose()
        finally:
            try:
                closing = getattr(self.critic, "aclose", None)
                if closing is not None:
                    await anyio.to_thread.run_sync(self.runtime.run, closing())
            finally:
                self.runtime.close()


def rollout_parts(
    settings: Settings, config: RolloutConfig, *, use_cache: bool = True, env: Mapping[str, str] | None = None
) -> RolloutParts:
    """The parts of a rollout run (``config``) as the settings describe them; the runtime's sandbox is made on first
    use, with worker processes when the settings ask for them.

    Raises:
        ValueError: the critic's mode is unknown, or needs a code writer the run does not name.
    """
    from .rl import Runtime, critic_for

    def client() -> LLMClient:
        return LLMClient.from_settings(
            settings, use_cache=use_cache, env=env, sample_scope=config.run, share_samples=config.share_samples
        )

    runtime = Runtime(lambda: make_sandbox(settings, processes=bool(settings.workers)))
    critic = config.critic
    judge = critic_for(
        client(), critic["model"], critic["mode"], coder_model=critic.get("coder_model"), sandbox=runtime.sandbox
    )
    return RolloutParts(client(), runtime, judge)


def eval_run(
    settings: Settings,
    config: EvalConfig,
    *,
    source: EpisodeSource[Method, EpisodeRecord] | None = None,
    use_cache: bool = True,
    progress: Callable[[str], None] | None = None,
) -> EvalRun:
    """An evaluation (or task) run resolved once: its protocol loaded once, and, when this process plays the episodes,
    a scorer following that protocol over a sandbox of its own (both closed by ``EvalRun.aclose``).

    Scoring runs in sandbox worker processes: the harness's one event loop is what limits a run's throughput, and
    sandbox work in its own process competed with it (docs/benchmarks.md).

    Args:
        settings: The run's settings.
        config: What to evaluate.
        source: Where the episodes are played (``pau_mcp.distributed.RayEpisodes``: its workers score); None: here.
        use_cache: Read and write the LLM response cache (the agent's model's too).
        progress: Receives progress lines while the sandbox is built.

    Raises:
        pau_mcp.harness.EvalError: the run cannot start (the message says why).
    """
    from .harness.evalrun import resolve_run

    if not use_cache:
        config = replace(config, cache=False)
    run = resolve_run(settings, config, None, source=source)
    if source is None:
        sandbox = make_sandbox(settings, progress=progress, processes=config.score)
        run.cleanup.append(sandbox.close)
        run.scorer = run_scorer(
            settings, sandbox, run=config.run, share_samples=config.share_samples, use_cache=use_cache,
            protocol=run.protocol,
        )  # fmt: skip
    return run
