"""An evaluation run resolved once: its protocol, deployment key, methods (or tasks), scorer and episode source.

``resolve_run`` checks a run's configuration and gathers what its episodes need, loading the protocol once (or
taking the one the caller loaded: ``pau_mcp.assembly.eval_run`` builds the run's scorer with it); ``play_run``
hands the run to the one run driver. Everything downstream (the episode host, the agents, the task source) gets
these parts from the ``EvalRun`` instead of resolving them again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..config import Settings, SettingsError
from ..contract import Scoring
from ..manifests import ManifestError, ManifestStore, Method, Task, tool_name
from ..prompts import PromptsError
from ..protocol import Protocol, load_protocol
from ..runs import EpisodeSource
from .client import check_served, http_client
from .configuration import EvalConfig, EvalError, check_config
from .hosting import EpisodeRecord, LocalEpisodes
from .runner import RunProgress, drive_run, planned_methods
from .tasks import LocalTasks, planned_tasks

__all__ = ["EvalRun", "play_run", "resolve_run", "run_eval"]


@dataclass
class EvalRun:
    """One evaluation or task run, resolved once.

    Attributes:
        settings: The run's settings (run store, manifests, sandbox limits, token for ``--server``).
        config: What to evaluate.
        protocol: Whose prompts and rules the agent and the scores follow (loaded once for the run).
        key: The deployment key: it names the tools and signs each episode's session token.
        methods: The methods the episodes explore, in plan order; in task mode, every method of the suite (the
            tools its tasks call).
        tasks: In task mode, the tasks the episodes answer, in plan order; else empty.
        scorer: Scores submissions and checks task answers (None: nothing is scored here, as on Ray).
        source: Where the episodes are played (``pau_mcp.distributed.RayEpisodes``); None: in this process.
        cleanup: Called when the run is closed, after the scorer (its sandbox's ``close``).
    """

    settings: Settings
    config: EvalConfig
    protocol: Protocol
    key: str
    methods: list[Method]
    tasks: list[Task] = field(default_factory=list)
    scorer: Scoring | None = None
    source: EpisodeSource[Method, EpisodeRecord] | None = None
    cleanup: list[Callable[[], None]] = field(default_factory=list)

    async def aclose(self) -> None:
        """Close the scorer, then what the run was built with (its sandbox)."""
        try:
            if self.scorer is not None:
                await self.scorer.aclose()
        finally:
            for close in self.cleanup:
                close()


def resolve_run(
    settings: Settings, config: EvalConfig, scorer: Scoring | None, *, protocol: Protocol | None = None,
    source: EpisodeSource[Method, EpisodeRecord] | None = None,
) -> EvalRun:  # fmt: skip
    """The run ``config`` describes, checked and resolved: the protocol is loaded here unless given.

    Raises:
        EvalError: the configuration cannot play an episode, the suite is missing, broken or empty, the deployment key
            or the protocol's prompts cannot be read, task mode was sent to Ray, or the scorer follows another
            protocol than the run.
    """
    check_config(config)
    tasks_mode = config.mode == "tasks"
    if tasks_mode and source is not None:
        raise EvalError("task mode runs its episodes here: leave out --ray")
    try:
        key = settings.deployment_key()
        tasks = planned_tasks(settings, config) if tasks_mode else []
        if tasks_mode:
            methods = list(ManifestStore(settings.manifests).suite(config.suite).methods.values())
        else:
            methods = planned_methods(settings, config)
        protocol = protocol if protocol is not None else load_protocol(config.protocol, settings.data_dir)
    except (SettingsError, ManifestError, PromptsError) as exc:
        raise EvalError(str(exc)) from None
    if tasks_mode and not tasks:
        raise EvalError(f"no tasks to run in suite {config.suite!r} with these options")
    if not methods:
        raise EvalError(f"no methods to evaluate in suite {config.suite!r} with these options")
    scoring = scorer.protocol if scorer is not None and config.score and source is None else None
    if scoring is not None and scoring.name != protocol.name:
        raise EvalError(
            f"the scorer follows the {scoring.name} protocol and the run {protocol.name}: build both from the same "
            "--protocol"
        )
    return EvalRun(settings, config, protocol, key, methods, tasks, scorer, source)


async def play_run(run: EvalRun, on_progress: Callable[[RunProgress], None] | None = None) -> RunProgress:
    """Play (or resume) a resolved run to its end: its episodes played by its source, here by default.

    Whichever source plays the episodes, this process alone writes the run store, and each episode's ending (with
    its session, when a Ray worker recorded it) is recorded exactly once (``pau_mcp.runs.drive``).

    Raises:
        EvalError: the run exists with another configuration, ``--server`` cannot be used, the server fails, the
            source can play no more episodes (no Ray worker left), or a task run has no scorer to check its answers.
    """
    settings, config, scorer, key, protocol = run.settings, run.config, run.scorer, run.key, run.protocol
    if run.tasks:
        if scorer is None:
            raise EvalError("task mode checks each answer in the scorer's sandbox: run it with a scorer")
        tools = [m.id for m in run.methods]
        return await drive_run(
            settings, config, config.spec(protocol.prompts.digest, with_examples=False), run.tasks,
            lambda store: LocalTasks(settings, config, scorer, store, key, tools, protocol), on_progress,
        )  # fmt: skip
    if config.server:  # a wrong URL, token, tool key or era ends the command here, before the run exists
        async with http_client(settings.token) as client:
            await check_served(
                client, config.server, config.suite, {tool_name(key, m.id) for m in run.methods}, settings.mcp_era
            )
    source = run.source
    return await drive_run(
        settings, config, config.spec(protocol.prompts.digest), run.methods,
        lambda store: source if source is not None else LocalEpisodes(settings, config, scorer, store, key, protocol),
        on_progress,
    )  # fmt: skip


async def run_eval(
    settings: Settings, config: EvalConfig, scorer: Scoring | None,
    on_progress: Callable[[RunProgress], None] | None = None, source: EpisodeSource[Method, EpisodeRecord] | None = None,
) -> RunProgress:  # fmt: skip
    """Resolve and play an evaluation (or task) run: ``play_run(resolve_run(...))``.

    Args:
        settings: The ``Settings`` (run store, manifests, sandbox cache and limits, token for ``--server``).
        config: What to evaluate.
        scorer: Scores the submissions (used only when ``config.score``, and only here, not on Ray); task mode
            checks its answers with it.
        on_progress: Called after every episode with the live totals.
        source: Where episodes are played (``pau_mcp.distributed.RayEpisodes`` on a Ray cluster); None: here
            (``LocalEpisodes``).

    Raises:
        EvalError: as ``resolve_run`` and ``play_run`` say.
    """
    return await play_run(resolve_run(settings, config, scorer, source=source), on_progress)
