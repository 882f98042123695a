"""Evaluation runs: one agent over a suite, one MCP session per method, resumable after any crash.

``run_eval`` prepares a run (its methods, protocol and server checks) and hands it to the one run driver
(``pau_mcp.runs.drive``) with an episode source: ``LocalEpisodes`` (this process, against the run's own server or
``--server``) unless the caller chose another (``pau_mcp.distributed.RayEpisodes``). The run store keeps the
run's state, so running the same command again after ``kill -9`` finishes the unfinished episodes and never
repeats a finished one. LLM replies are cached, so the repeat costs almost nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..config import Settings, SettingsError
from ..contract import TASK_KIND
from ..manifests import ManifestError, ManifestStore, Method, tool_name
from ..prompts import PromptsError
from ..protocol import load_protocol
from ..runs import EpisodeSource, Planned, Progress, RunError, RunSpec, drive
from ..runstore import RunStore
from .client import check_served, http_client
from .configuration import EvalConfig, EvalError, check_config
from .hosting import EpisodeRecord, LocalEpisodes

__all__ = ["RunProgress", "RunTotals", "drive_run", "planned_methods", "run_eval", "run_name", "run_totals"]


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


async def run_eval(
    settings: Settings, config: EvalConfig, scorer: Any, on_progress: Callable[[RunProgress], None] | None = None,
    source: EpisodeSource[Method, EpisodeRecord] | None = None,
) -> RunProgress:  # fmt: skip
    """Run (or resume) an evaluation: its episodes played by ``source``, here by default.

    Whichever source plays the episodes, this process alone writes the run store, and each episode's ending (with
    its session, when a Ray worker recorded it) is recorded exactly once (``pau_mcp.runs.drive``).

    Args:
        settings: The ``Settings`` (run store, manifests, sandbox cache and limits, token for ``--server``).
        config: What to evaluate.
        scorer: A ``pau_mcp.scoring.Scorer`` (used only when ``config.score``, and only by ``LocalEpisodes``).
        on_progress: Called after every episode with the live totals.
        source: Where episodes are played (``pau_mcp.distributed.RayEpisodes`` on a Ray cluster); None: here
            (``LocalEpisodes``).

    Raises:
        EvalError: the run exists with another configuration, the suite is missing, broken or empty, the server
            fails, or the source can play no more episodes (no Ray worker left).
    """
    check_config(config)
    if config.mode == "tasks":  # tasks are not methods: their runs go through ``tasks.run_tasks``
        raise EvalError("a task run is played by pau_mcp.harness.tasks.run_tasks (`pau-mcp eval --mode tasks`)")
    try:
        deployment_key = settings.deployment_key()
    except SettingsError as exc:
        raise EvalError(str(exc)) from None
    try:
        methods = planned_methods(settings, config)
    except ManifestError as exc:
        raise EvalError(str(exc)) from None
    if not methods:
        raise EvalError(f"no methods to evaluate in suite {config.suite!r} with these options")
    try:
        protocol = load_protocol(config.protocol, settings.data_dir)
    except PromptsError as exc:
        raise EvalError(str(exc)) from None
    scoring = getattr(scorer, "protocol", None) if config.score and source is None else None
    if scoring is not None and scoring.name != protocol.name:
        raise EvalError(
            f"the scorer follows the {scoring.name} protocol and the run {protocol.name}: build both from the same "
            "--protocol"
        )
    if config.server:  # a wrong URL, token, tool key or era ends the command here, before the run exists
        async with http_client(settings.token) as client:
            await check_served(
                client,
                config.server,
                config.suite,
                {tool_name(deployment_key, m.id) for m in methods},
                settings.mcp_era,
            )
    return await drive_run(
        settings, config, config.spec(protocol.prompts.digest), methods,
        lambda store: source if source is not None else LocalEpisodes(settings, config, scorer, store, deployment_key),
        on_progress,
    )  # fmt: skip


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
