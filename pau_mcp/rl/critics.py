"""Which critic a mode makes: the language-model critics (``critic``) or the unsupervised one (``unsupervised``).

Above both, so that neither imports the other.
"""

from __future__ import annotations

from collections.abc import Callable

from wasm_runtime import SandboxInterface

from ..llm import LLMClient
from .critic import ALL_MODES, MODES, Critic, LLMCritic
from .unsupervised import UnsupervisedCritic

__all__ = ["critic_for"]


def critic_for(
    llm: LLMClient,
    model: str,
    mode: str = "asymmetric",
    *,
    coder_model: str | None = None,
    sandbox: Callable[[], SandboxInterface] | None = None,
) -> Critic:
    """The critic of a mode: ``LLMCritic`` for ``asymmetric`` and ``symmetric``, ``UnsupervisedCritic`` for
    ``unsupervised`` (which needs ``coder_model`` and ``sandbox``).

    Raises:
        ValueError: an unknown mode, or a mode that needs a coder model or a sandbox without one.
    """
    if mode == "unsupervised":
        if not coder_model or sandbox is None:
            raise ValueError(
                "the unsupervised critic writes code from the gold description: it needs a coder model "
                "(--coder-model / PAU_CODER_MODEL) and a sandbox"
            )
        return UnsupervisedCritic(llm, model, coder_model, sandbox)
    if mode not in MODES:
        raise ValueError(f"unknown critic mode {mode!r}; choose {', '.join(ALL_MODES)}")
    return LLMCritic(llm, model, mode, coder_model=coder_model, sandbox=sandbox)
