"""Driving evaluation runs: the run driver (``pau_mcp.runs.drive``) over a run's episodes, and the run's totals.

An evaluation run is resolved once (``harness.evalrun``) and driven here with an episode source: ``LocalEpisodes``
(this process, against the run's own server or ``--server``: ``harness.hosting``), the task source, or another the
caller chose (``pau_mcp.distributed.RayEpisodes``). The run store keeps the run's state, so running the same command
again after ``kill -9`` finishes the unfinished episodes and never repeats a finished one. LLM replies are cached,
so the repeat costs almost nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from ..config import Settings
from ..contract import TASK_KIND
from ..manifests import ManifestStore, Method
from ..runs import EpisodeSource, Planned, Progress, RunError, RunSpec, drive
from ..runstore import RunStore
from .configuration import EvalConfig, EvalError
from .hosting import EpisodeRecord

__all__ = ["RunProgress", "RunTotals", "drive_run", "planned_methods", "run_name", "run_totals"]


#: What a run's episodes are about: a method (an exploration) or a task.
T = TypeVar("T", bound=Planned)


@dataclass
class RunTotals:
    """What the run store holds for a whole run, whichever invocations played its episodes.

    Attributes:
        episodes: Episodes planned.
        done: Episodes that finished.
        failed: Episodes whose latest attempt failed.
        judge: The judge ratings recorded.
        codematch: Code-match fractions (code written from the description).
        direct: Direct-code fractions (code the agent submitted).
        tokens: Tokens the agents spent, as recorded (what `pau-mcp report` counts).
        cost_usd: What they cost.
        scoring_tokens: Tokens the scorer's models spent on the run's submissions.
        scoring_cost_usd: What they cost.
        score_errors: Scores of finished episodes that could not be made (the judge's or code writer's model
            failed), as ``(method_id, kind, reason)``.
        answers: In task mode, 1.0 for each correct task and 0.0 for each wrong one.
    """

    episodes: int = 0
    done: int = 0
    failed: int = 0
    judge: list[float] = field(default_factory=list)
    codematch: list[float] = field(default_factory=list)
    direct: list[float] = field(default_factory=list)
    tokens: int = 0
    cost_usd: float = 0.0
    scoring_tokens: int = 0
    scoring_cost_usd: float = 0.0
    score_errors: list[tuple[str, str, str]] = field(default_factory=list)
    answers: list[float] = field(default_factory=list)

    @property
    def unfinished(self) -> int:
        """Episodes neither done nor failed (not run yet, or cut short)."""
        return self.episodes - self.done - self.failed


@dataclass
class RunProgress(Progress["EpisodeRecord"]):
    """Live totals of one invocation of an evaluation run (``Progress``), with its scores.

    Attributes:
        judge: The judge's ratings recorded by this invocation.
        codematch: Its code-match fractions (code written from the description).
        direct: Its direct-code fractions (code the agent submitted).
        whole: The whole run as stored once this invocation ends (earlier invocations included).
        answers: In task mode, 1.0 for each correct task and 0.0 for each wrong one.
    """

    judge: list[float] = field(default_factory=list)
    codematch: list[float] = field(default_factory=list)
    direct: list[float] = field(default_factory=list)
    whole: RunTotals | None = None
    answers: list[float] = field(default_factory=list)

    def count(self, ending: EpisodeRecord) -> None:
        """Add a recorded episode to the live totals, its scoring's tokens and its scores included."""
        super().count(ending)
        self.input_tokens += ending.scoring_input_tokens
        self.output_tokens += ending.scoring_output_tokens
        self.cost_usd += ending.scoring_cost_usd
        if ending.result.state != "done":
            return
        values = ending.values
        if (answer := values.get(TASK_KIND)) is not None:
            self.answers.append(answer)
        if (judge := values.get("judge")) is not None:
            self.judge.append(judge)
        if (match := values.get("codematch")) is not None:
            self.codematch.append(match)
        if (direct := values.get("direct")) is not None:
            self.direct.append(direct)


def run_name(suite: str, agent: str, mode: str, model: str) -> str:
    """The name a run gets unless the user chooses one: ``<suite>-<agent>-<mode>-<model>`` in label characters."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{suite}-{agent}-{mode}-{model or 'none'}").strip("-")


def run_totals(store: RunStore, run_id: int) -> RunTotals:
    """The whole run as the store holds it: episodes by state, recorded scores, tokens and cost."""
    totals = RunTotals()
    for episode in store.episodes(run_id):
        totals.episodes += 1
        totals.done += episode.state == "done"
        totals.failed += episode.state == "failed"
        totals.tokens += episode.input_tokens + episode.output_tokens
        totals.cost_usd += episode.cost_usd
        scores = episode.scores
        for score in scores.values():
            usage = score.detail.get("usage") or {}
            totals.scoring_tokens += int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
            totals.scoring_cost_usd += float(score.detail.get("cost_usd") or 0.0)
        if episode.state != "done":
            continue
        for kind, score in scores.items():
            if score.status == "error":
                reason = str(score.detail.get("reason") or "no reason was recorded")
                totals.score_errors.append((episode.method_id, kind, reason))
        values = {kind: score.value for kind, score in scores.items() if score.value is not None}
        if TASK_KIND in values:
            totals.answers.append(values[TASK_KIND])
        if "judge" in values:
            totals.judge.append(values["judge"])
        if "codematch" in values:
            totals.codematch.append(values["codematch"])
        if "direct" in values:
            totals.direct.append(values["direct"])
    return totals


def planned_methods(settings: Settings, config: EvalConfig) -> list[Method]:
    """The methods a run covers, in plan order (its suite, narrowed by ``methods`` and ``limit``).

    Raises:
        ManifestError: the suite does not exist or a manifest is broken.
    """
    suite = ManifestStore(settings.manifests).suite(config.suite)
    wanted = set(config.methods)
    methods = [m for m in suite.methods.values() if not wanted or m.id in wanted]
    return methods[: config.limit] if config.limit else methods


async def drive_run(
    settings: Settings,
    config: EvalConfig,
    spec: RunSpec,
    items: Sequence[T],
    source_for: Callable[[RunStore], EpisodeSource[T, EpisodeRecord]],
    on_progress: Callable[[RunProgress], None] | None,
) -> RunProgress:
    """Drive an evaluation or task run to its end in the settings' run store, and attach the whole run's totals.

    Raises:
        EvalError: the run cannot start or continue (its identity refused, no worker left, ...).
    """
    store = RunStore(settings.db_path)
    try:
        try:
            progress = await drive(
                store, spec, items, source_for(store), config.concurrency, RunProgress(), on_progress
            )
        except RunError as exc:
            if isinstance(exc, EvalError):
                raise
            raise EvalError(str(exc)) from None  # the run's identity refused: one kind of error for the caller
        progress.whole = run_totals(store, store.run_id(config.run))
        return progress
    finally:
        store.close()
