"""The environment for TRL's ``GRPOTrainer(environment_factory=...)``: the cycle as three tools.

TRL (``trl`` 1.16) runs a model that calls tools; an environment class offers
its public methods as tools, ``reset(**row)`` starts an episode from a dataset
row, and ``get_reward()`` scores the finished rollout. Here each step of the
paper's cycle is a tool: ``reason(plan)``, ``run(arguments)`` and
``reflect(hypothesis, concluded)``, each answered with the next prompt. A tool
called out of turn is refused with what to call instead and costs
``parse_penalty``. GRPO rewards whole rollouts, so ``get_reward`` returns the
episode's return (the sum of its step rewards), with ``timeout_penalty`` when
the rollout ended without concluding.

Usage (one row per method, a ``method_id`` column)::

    from pau_mcp.rl.trl_env import PauToolEnv
    trainer = GRPOTrainer(model=..., train_dataset=rows, environment_factory=PauToolEnv, args=GRPOConfig(...))

With no arguments the critic is ``PAU_JUDGE_MODEL`` (asymmetric) through the
LLM layer; pass ``functools.partial(PauToolEnv, critic=..., config=...)`` to
choose. The class needs nothing from TRL itself, so importing it needs no torch.
"""

from __future__ import annotations

import threading
from typing import Any

from ..config import Settings
from ..llm import LLMClient
from ..manifests import ManifestStore
from .critic import Critic, LLMCritic
from .environment import EnvConfig, EpisodeError, ExplorationEnv
from .runtime import Runtime, default_runtime

__all__ = ["PauToolEnv"]

_TOOLS = {"reason": "reason(plan)", "propose": "run(arguments)", "reflect": "reflect(hypothesis, concluded)"}
_DEFAULTS: dict[str, Any] = {}
_LOCK = threading.Lock()


def _defaults() -> tuple[ManifestStore, Critic]:
    with _LOCK:
        if not _DEFAULTS:
            settings = Settings.from_env()
            if not settings.judge_model:
                raise ValueError("PauToolEnv needs a critic: pass critic=..., or set PAU_JUDGE_MODEL")
            _DEFAULTS["manifests"] = settings.manifest_store()
            _DEFAULTS["critic"] = LLMCritic(LLMClient.from_settings(settings), settings.judge_model)
        return _DEFAULTS["manifests"], _DEFAULTS["critic"]


class PauToolEnv:
    """One hidden method per rollout, explored through three tools.

    Args:
        critic: Rates the steps (default: ``PAU_JUDGE_MODEL``, asymmetric).
        config: Turn limit, budget, window and rewards.
        runtime: The sandbox and loop (default: the process's shared one).
        manifests: Where methods come from (default: the packaged suites and ``PAU_MCP_MANIFESTS``).
    """

    def __init__(
        self,
        critic: Critic | None = None,
        config: EnvConfig | None = None,
        runtime: Runtime | None = None,
        manifests: ManifestStore | None = None,
    ) -> None:
        if critic is None or manifests is None:
            default_manifests, default_critic = _defaults()
            critic = critic or default_critic
            manifests = manifests or default_manifests
        self._critic = critic
        self._config = config or EnvConfig()
        self._runtime = runtime or default_runtime()
        self._manifests = manifests
        self._env: ExplorationEnv | None = None
        self._penalty = 0.0

    def reset(self, method_id: str | None = None, **row: Any) -> str:
        """Start an episode on the dataset row's ``method_id``; returns the first prompt (TRL appends it to the
        row's last user message).

        Raises:
            ValueError: the row has no ``method_id``.
            ManifestError: an unknown method.
        """
        if not method_id:
            raise ValueError("each dataset row needs a method_id column naming the hidden method (e.g. builtin/b005)")
        self._env = ExplorationEnv(self._manifests.method(method_id), self._critic, self._config, self._runtime)
        self._penalty = 0.0
        first = self._env.reset()[-1]["content"]
        return (
            f"{first}\n\nWork with the tools: call `reason` with your plan, then `run` with the input, then "
            "`reflect` with your hypothesis, and repeat until you conclude."
        )

    def _take(self, phase: str, action: str) -> str:
        env = self._env
        if env is None:
            raise EpisodeError("reset() must be called before the tools")
        if env.done:
            return "The episode is over: you concluded or ran out of turns. Stop calling tools."
        if env.phase != phase:
            self._penalty += self._config.rewards.parse_penalty
            return f"Out of turn: it is time to {env.phase}; call {_TOOLS[env.phase]}."
        result = env.step(action)
        return result.observation or f"Episode over. Your final hypothesis: {env.hypothesis}"

    def reason(self, plan: str) -> str:
        """Say which input you will try next, and why.

        Args:
            plan: A few sentences: the input you will try next, its property, and what you expect it to return.

        Returns:
            The next prompt.
        """
        return self._take("reason", plan)

    def run(self, arguments: str) -> str:
        """Call the hidden function on one input.

        Args:
            arguments: The arguments as a Python literal tuple, e.g. "(3, 'abc')".

        Returns:
            What the function returned or raised, and the next prompt.
        """
        return self._take("propose", f"INPUT: {arguments}")

    def reflect(self, hypothesis: str, concluded: bool) -> str:
        """Update your hypothesis, and say whether you are done.

        Args:
            hypothesis: A complete description of what the function does.
            concluded: True when you are confident the hypothesis covers every case.

        Returns:
            The next prompt, or the end of the episode.
        """
        return self._take("reflect", f"CONCLUDED: {'YES' if concluded else 'NO'}\nHYPOTHESIS: {hypothesis}")

    def get_reward(self) -> float:
        """The rollout's reward: the sum of its step rewards, with the penalties for out-of-turn tools and for
        ending without a conclusion."""
        env = self._env
        if env is None:
            return 0.0
        unfinished = 0.0 if env.done else self._config.rewards.timeout_penalty
        return env.total_reward + self._penalty + unfinished
