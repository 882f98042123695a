"""Runs: the one resumable-run driver every kind of run (evaluation, RL rollout) goes through, wherever its
episodes are played."""

from __future__ import annotations

from .driver import Ending, EpisodeSource, Planned, Play, Progress, RunError, RunSpec, drive, open_run

__all__ = ["Ending", "EpisodeSource", "Planned", "Play", "Progress", "RunError", "RunSpec", "drive", "open_run"]
