"""Repeated episodes (``pau-mcp eval --epochs K``): one configuration run K times, each epoch a run of its own.

Epoch k is the run ``<name>-epoch<k>``, made with the sampling seed ``seed + k - 1``: every request of its agent's
model carries that seed where the provider takes one, and the response cache keys every reply by it, so no epoch
ever replays another's replies (``LLMClient(seed=...)``). Each epoch records its group, number, count and seed
(``{"epoch": {...}}`` in its configuration), so the same command resumes every epoch where it stopped, and
``pau-mcp report <name>`` reads the epochs together (``pau_mcp.reports.epochs``: pass@k, pass^k, each epoch's mean
with its interval, outcome consistency). The scorer's replies are not per epoch: a score is a function of what is
scored, so the same description gets the same rating in every epoch.
"""

from __future__ import annotations

from dataclasses import replace

from .configuration import EvalConfig, EvalError

__all__ = ["MAX_EPOCHS", "epoch_configs", "epoch_name"]

#: The most epochs one command runs (each is a whole run of the suite).
MAX_EPOCHS = 100


def epoch_name(group: str, index: int) -> str:
    """The run name of epoch ``index`` (from 1) of the group ``group``."""
    return f"{group}-epoch{index}"


def epoch_configs(config: EvalConfig, epochs: int, seed: int = 0) -> list[EvalConfig]:
    """The runs of ``epochs`` epochs of ``config`` (its ``run`` names the group), each with a seed of its own.

    Raises:
        EvalError: fewer than 2 or more than ``MAX_EPOCHS`` epochs, a task run, or replies shared across runs
            (``--share-samples``: each epoch must draw its own).
    """
    if not 2 <= epochs <= MAX_EPOCHS:
        raise EvalError(f"--epochs runs each method 2 to {MAX_EPOCHS} times (got {epochs}); leave it out for one run")
    if config.mode == "tasks":
        raise EvalError(
            "--epochs repeats explorations (interactive or incontext); a task run is one run: drop --epochs"
        )
    if config.share_samples:
        raise EvalError("--epochs draws every epoch's replies afresh, and --share-samples would replay them: drop one")
    return [
        replace(
            config,
            run=epoch_name(config.run, k),
            seed=seed + k - 1,
            recorded={
                **config.recorded,
                "epoch": {"group": config.run, "index": k, "of": epochs, "seed": seed + k - 1},
            },
        )  # fmt: skip
        for k in range(1, epochs + 1)
    ]
