"""The environment as a SkyRL-gym ``BaseTextEnv`` (``pip install 'pau-mcp[rl]'``), for SkyRL's GRPO/PPO trainers.

Register it once per process (SkyRL's entry point is a good place) and name it
in the training config::

    from pau_mcp.rl.skyrl_env import register
    register()  # environment.env_class=pau-explore

Each dataset row names its method in a ``method_id`` column (SkyRL passes the
row's extra columns as ``extras``); ``dataset_rows`` makes such rows, with
``prompt`` and ``env_class``, ready for a parquet file. The
environment's settings come from ``env_config`` (SkyRL's
``environment.skyrl_gym.pau-explore`` block), every key optional:

``critic_model`` (default ``PAU_JUDGE_MODEL``), ``critic_mode``
(``asymmetric``, ``symmetric``, or ``unsupervised``: the reference's
UNSUPERVISED reward, which needs a coder model), ``coder_model`` (default
``PAU_CODER_MODEL``), ``max_turns`` (40), ``budget`` (20),
``window`` (5), ``rewards`` (a mapping of ``RewardConfig`` fields; its
``schedule`` key names the base schedule, e.g. ``paper``),
``manifests`` (extra suite directories), ``workers`` (sandbox worker
processes; 0 runs calls in the process).

SkyRL steps environments from a thread pool and may fork: calls run in the
process's own sandbox (``Runtime``), so both are safe.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from ..config import Settings
from ..llm import LLMClient
from ..manifests import ManifestStore
from ..sandboxing import make_sandbox
from .critic import Critic
from .critics import critic_for
from .environment import EnvConfig, ExplorationEnv
from .rewards import RewardConfig
from .runtime import Runtime

__all__ = ["ENV_ID", "PauExploreEnv", "dataset_rows", "register"]

#: The id the environment is registered under.
ENV_ID = "pau-explore"

_SHARED: dict[str, tuple[ManifestStore, Runtime, Critic, EnvConfig]] = {}
_LOCK = threading.Lock()


def register(env_id: str = ENV_ID) -> None:
    """Register ``PauExploreEnv`` with skyrl-gym under ``env_id`` (again is harmless)."""
    from skyrl_gym.envs import register as skyrl_register
    from skyrl_gym.envs.registration import registry

    if env_id not in registry:
        skyrl_register(id=env_id, entry_point=f"{__name__}:PauExploreEnv")


def dataset_rows(method_ids: list[str], env_id: str = ENV_ID) -> list[dict[str, Any]]:
    """SkyRL training rows, one per method: ``prompt`` (a placeholder: ``init`` replaces it), ``env_class``, ``method_id``."""
    return [
        {
            "prompt": [{"role": "user", "content": "Explore a hidden Python function."}],
            "env_class": env_id,
            "method_id": m,
        }
        for m in method_ids
    ]


def _plain(value: Any) -> Any:
    """An OmegaConf node (SkyRL's configs) as plain Python values."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(value, (DictConfig, ListConfig)):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:
        pass
    return value


def _shared(config: Mapping[str, Any]) -> tuple[ManifestStore, Runtime, Critic, EnvConfig]:
    """What every environment of one configuration shares in a process: manifests, sandbox, critic client."""
    key = repr(sorted(config.items()))
    with _LOCK:
        if key not in _SHARED:
            settings = Settings.from_env()
            extra = tuple(Path(p) for p in config.get("manifests") or ())
            manifests = ManifestStore(settings.manifests + extra)
            workers = config.get("workers", 0)
            runtime = Runtime(lambda: make_sandbox(Settings.from_options(workers=workers), processes=bool(workers)))
            model = config.get("critic_model") or settings.judge_model
            if not model:
                raise ValueError(
                    "the pau-explore environment needs a critic model: set critic_model in its env_config, or "
                    "PAU_JUDGE_MODEL"
                )
            coder = config.get("coder_model") or settings.coder_model or None
            critic = critic_for(
                LLMClient.from_settings(settings), model, config.get("critic_mode", "asymmetric"),
                coder_model=coder, sandbox=runtime.sandbox if coder else None,
            )  # fmt: skip
            env_config = EnvConfig(
                max_turns=int(config.get("max_turns", 40)), budget=int(config.get("budget", 20)),
                window=int(config.get("window", 5)), rewards=RewardConfig.from_dict(dict(config.get("rewards") or {})),
            )  # fmt: skip
            _SHARED[key] = (manifests, runtime, critic, env_config)
        return _SHARED[key]


class PauExploreEnv(BaseTextEnv):
    """One hidden method per episode, as a SkyRL text environment.

    Args:
        env_config: The environment's settings (see the module's documentation).
        extras: The dataset row's extra columns; ``method_id`` names the method (also read from
            ``extras["extra_info"]["method_id"]``).

    Raises:
        ValueError: no ``method_id``, or no critic model.
        ManifestError: an unknown method.
    """

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        config = dict(_plain(env_config) or {})
        extras = dict(_plain(extras) or {})
        method_id = extras.get("method_id") or (extras.get("extra_info") or {}).get("method_id")
        if not method_id:
            raise ValueError("each dataset row needs a method_id column naming the hidden method (e.g. builtin/b005)")
        manifests, runtime, critic, env_config_ = _shared(config)
        self.env = ExplorationEnv(manifests.method(str(method_id)), critic, env_config_, runtime)
        self.max_turns = env_config_.max_turns

    def init(self, prompt: Any) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """Start the episode; the dataset's prompt is replaced by the environment's own first messages."""
        return self.env.reset(), {"method_id": self.env.method.id}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """One reply of the policy: the next prompt, this step's reward, and whether the episode is over."""
        result = self.env.step(action)
        self.turns = self.env.turn
        return BaseTextEnvStepOutput(
            observations=result.messages(), reward=result.reward, done=result.done, metadata=result.info
        )

    def get_metrics(self) -> dict[str, Any]:
        """The episode's return, queries, turns, whether it concluded, and the critic's cost."""
        summary = self.env.summary()
        return {k: float(v) for k, v in summary.items() if isinstance(v, (int, float, bool))}
