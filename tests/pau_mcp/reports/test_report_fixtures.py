"""A small run store for the report tests, built through ``RunStore`` exactly as the harness writes it.

Two runs of one model over five methods, interactive and in-context, with
scores chosen so every number of the report can be worked out by hand (the
expected values are in the tests that use it). Holds no tests itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pau_mcp.runstore import EpisodeResult, RunStore

METHODS = ["b/m1", "b/m2", "b/m3", "b/m4", "b/m5"]

CONFIG = {"model": "openai/alpha", "agent": "paper", "suite": "builtin", "budget": 20}

# method: (judge status, judge value, code match, concluded, queries); None: the episode failed.
INTERACTIVE: dict[str, tuple[str, float | None, float, bool, int] | None] = {
    "b/m1": ("scored", 5.0, 1.0, True, 10),
    "b/m2": ("scored", 4.0, 0.85, True, 12),
    "b/m3": ("scored", 3.0, 0.5, True, 8),
    "b/m4": ("unscored", None, 0.0, True, 20),
    "b/m5": ("scored", 2.0, 0.2, False, 20),
}
INCONTEXT: dict[str, tuple[str, float | None, float, bool, int] | None] = {
    "b/m1": ("scored", 4.0, 1.0, True, 0),
    "b/m2": ("scored", 4.0, 0.6, True, 0),
    "b/m3": ("scored", 1.0, 0.0, True, 0),
    "b/m4": ("unscored", None, 0.4, True, 0),
    "b/m5": None,
}


def add_run(store: RunStore, name: str, config: dict[str, Any], episodes: Mapping[str, tuple[Any, ...] | None]) -> int:
    """Create a run whose episodes end as given (a tuple: done with those scores; None: failed)."""
    run_id = store.ensure_run(name, "eval", config)
    store.plan_episodes(run_id, list(episodes))
    for method, spec in episodes.items():
        store.start_episode(run_id, method)
        trajectory: list[dict[str, Any]] = [
            {"kind": "model", "text": f"exploring {method} MARKER-{name}"},
            {"kind": "tool_call", "arguments": {"arg0": 1}},
            {"kind": "tool_result", "value": "2"},
        ]
        if spec is None:
            result = EpisodeResult(
                state="failed",
                error="the agent crashed",
                input_tokens=50,
                output_tokens=5,
                cost_usd=0.005,
                trajectory=trajectory,
            )
            store.finish_episode(run_id, method, result)
            continue
        status, judge, codematch, concluded, queries = spec
        session_id = store.ensure_session(run_id, f"{name}/{method}/1", "internal")
        submission = store.record_submission(session_id, method, f"description of {method}", None)
        store.record_score(submission, "judge", status, judge, "openai/judge", {"reply": "..."})
        store.record_score(submission, "codematch", "scored", codematch, "openai/coder", {})
        trajectory.append({"kind": "submit", "description": f"description of {method}"})
        result = EpisodeResult(
            state="done", session_key=f"{name}/{method}/1", submission_id=submission, concluded=concluded, queries=queries,
            input_tokens=100, output_tokens=10, cost_usd=0.01, trajectory=trajectory,
        )  # fmt: skip
        store.finish_episode(run_id, method, result)
    return run_id


def build_store(path: Path) -> RunStore:
    """The two-run fixture: ``alpha-int`` (interactive) and ``alpha-ctx`` (in-context)."""
    store = RunStore(path)
    add_run(store, "alpha-int", CONFIG | {"mode": "interactive"}, INTERACTIVE)
    add_run(store, "alpha-ctx", CONFIG | {"mode": "incontext"}, INCONTEXT)
    return store


def add_pending_run(store: RunStore, name: str = "empty") -> None:
    """A run from another suite whose episodes were planned but none finished."""
    run_id = store.ensure_run(
        name, "eval", {"model": "openai/beta", "agent": "tools", "mode": "interactive", "suite": "other"}
    )
    store.plan_episodes(run_id, ["o/x1", "o/x2"])


def add_probe_run(store: RunStore, name: str = "builtin-probe-interactive-none") -> None:
    """A probe run over the same methods: the code it submitted scored directly, never judged."""
    run_id = store.ensure_run(name, "eval", {"model": "", "agent": "probe", "suite": "builtin", "mode": "interactive"})
    store.plan_episodes(run_id, METHODS)
    for method, value in zip(METHODS, (0.2, 0.4, 0.0, 1.0, 0.6), strict=True):
        store.start_episode(run_id, method)
        session_id = store.ensure_session(run_id, f"{name}/{method}/1", "internal")
        submission = store.record_submission(session_id, method, "", "def test_func(arg0):\n    return arg0\n")
        store.record_score(submission, "direct", "scored", value, None, {})
        result = EpisodeResult(state="done", session_key=f"{name}/{method}/1", submission_id=submission, queries=12)
        store.finish_episode(run_id, method, result)
