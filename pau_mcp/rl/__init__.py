"""Training explorers: an RL environment with an asymmetric critic, rollouts, and SFT datasets from runs.

``ExplorationEnv`` is one hidden method as an environment (``reset``/``step``) in the paper's cycle (reason,
propose an input, reflect), rewarded step by step (``RewardConfig``) by a ``Critic`` (``critic_for`` makes one of
each mode, the reference's unsupervised one included). ``skyrl_env`` and
``trl_env`` adapt it to trainers; ``rollout`` runs a policy over a suite; ``sft`` exports chat datasets.
"""

from .actions import Reflection, parse_input, parse_reflection, visible_text
from .critic import (
    ALL_MODES,
    MODES,
    Critic,
    CriticView,
    Gold,
    LLMCritic,
    Rating,
    ScriptedCritic,
    parse_critic_rating,
)
from .critics import critic_for
from .environment import PHASES, EnvConfig, EpisodeError, ExplorationEnv, StepResult
from .rewards import SCHEDULES, RewardConfig, length_penalty, length_units, termination_term, word_count
from .runtime import ProcessLocal, Runtime, default_runtime
from .unsupervised import UnsupervisedCritic

__all__ = [
    "ALL_MODES",
    "MODES",
    "PHASES",
    "SCHEDULES",
    "Critic",
    "CriticView",
    "EnvConfig",
    "EpisodeError",
    "ExplorationEnv",
    "Gold",
    "LLMCritic",
    "ProcessLocal",
    "Rating",
    "Reflection",
    "RewardConfig",
    "Runtime",
    "ScriptedCritic",
    "StepResult",
    "UnsupervisedCritic",
    "critic_for",
    "default_runtime",
    "length_penalty",
    "length_units",
    "parse_critic_rating",
    "parse_input",
    "parse_reflection",
    "termination_term",
    "visible_text",
    "word_count",
]
