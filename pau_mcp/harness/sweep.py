"""Sweeps: a whole comparison (models x modes x suites x agents, and task mode x documentation sources) described in
one TOML file.

A sweep file names what to compare; ``expand`` turns it into evaluation runs, named as ``pau-mcp eval``
names them, each with its model's own settings; ``run_state`` says which of them are finished, so a sweep
run again skips those and resumes the rest.

Example::

    suites = ["builtin"]
    modes = ["interactive", "incontext"]
    agents = ["paper"]
    judge_model = "openai/gpt-4o-mini"
    coder_model = "openai/gpt-4o-mini"

    [[models]]
    model = "openai/gpt-4o-mini"
    concurrency = 16

    [[models]]
    model = "anthropic/claude-haiku-4-5"
    concurrency = 4
    reasoning_effort = "low"

Task mode (``modes = [..., "tasks"]``) is answered by the ``tools`` agent: one run per model and per entry of
``docs`` (how the tools are documented: ``examples``, ``none``, ``gold``, an explorer run's name or an exported
documentation file), named as ``pau-mcp eval --mode tasks --docs SOURCE`` names it.

A sweep file is read as the user's input, not trusted: only a regular file of at most
``MAX_SWEEP_BYTES`` (``pau_mcp.userfiles``), nested no deeper than TOML's parser goes, with at most
``MAX_SUITES`` suites, ``MAX_MODELS`` models and ``MAX_METHODS`` methods, and at most ``MAX_RUNS`` runs in
all; anything else is refused before anything runs, with the first ``MAX_PROBLEMS`` problems named.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..llm import LLMError, Overrides
from ..llm.models import parse_model
from ..manifests import ManifestError
from ..runstore import RunStore
from ..userfiles import UnreadableFile, read_text
from .configuration import EvalConfig, EvalError, stored_identity
from .runner import planned_methods, run_name
from .tasks import planned_tasks

__all__ = [
    "MAX_DOCS", "MAX_METHODS", "MAX_MODELS", "MAX_PROBLEMS", "MAX_RUNS", "MAX_SUITES", "MAX_SWEEP_BYTES", "PlannedRun",
    "Sweep",
    "Standing", "SweepError", "SweepModel", "expand", "load_sweep", "run_state", "standings",
]  # fmt: skip

#: The largest sweep file read (a leaderboard's is a few kilobytes; MAX_METHODS method ids take about 2 MB).
MAX_SWEEP_BYTES = 4 * 1024 * 1024
#: The most suites, models and methods one file may list, and the most runs it may expand to.
MAX_SUITES = 100
MAX_MODELS = 1000
MAX_METHODS = 100_000
MAX_RUNS = 2000
#: The most documentation sources task mode may compare in one file.
MAX_DOCS = 100
#: The most problems an error names (the rest are counted).
MAX_PROBLEMS = 20

Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]


class SweepError(ValueError):
    """A sweep file cannot be read or describes an impossible comparison; the message names the file and key."""


class SweepModel(BaseModel):
    """One model of a sweep and its own settings (unset: the command's settings).

    Attributes:
        model: ``provider/model``.
        label: Used in run names instead of the model (two entries of one model need different labels).
        concurrency: Episodes at once for this model's runs (its provider's rate limit decides).
        temperature: The model's sampling temperature.
        max_tokens: Its longest reply per step.
        reasoning_effort: Its reasoning effort.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    label: str | None = Field(None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    concurrency: int | None = Field(None, ge=1, le=4096)
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1, le=1_000_000)
    reasoning_effort: Effort | None = None

    @field_validator("model")
    @classmethod
    def _provider_model(cls, value: str) -> str:
        try:
            parse_model(value)
        except LLMError as exc:
            raise ValueError(str(exc)) from None
        return value


class Sweep(BaseModel):
    """A comparison: every model in every mode on every suite with every agent.

    Attributes:
        suites: Suites to evaluate.
        modes: ``interactive``, ``incontext`` and/or ``tasks`` (the suite's tasks, answered by the ``tools`` agent).
        agents: ``paper``, ``tools``, ``probe`` and/or ``observer`` (the probe needs no model: one run per suite and
            mode).
        docs: With task mode, how the tools are documented, one run per entry: ``examples``, ``none``, ``gold``,
            a run's name or a file from ``pau-mcp export docs``.
        models: The models and their settings.
        methods: Only these method ids (empty: all).
        limit: Only the first ``limit`` methods of each suite (0: all).
        budget: Queries per method (unset: the command's ``--budget``).
        concurrency: Episodes at once, for models that set none.
        score: Score each submission.
        judge_model: The judge (unset: the command's ``--judge-model``).
        coder_model: The code writer (unset: the command's ``--coder-model``).
        retry_failed: Run failed episodes of every run again.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    suites: list[str] = Field(min_length=1, max_length=MAX_SUITES)
    modes: list[Literal["interactive", "incontext", "tasks"]] = Field(default=["interactive"], min_length=1)
    agents: list[Literal["paper", "tools", "probe", "observer"]] = Field(default=["paper"], min_length=1)
    docs: list[Annotated[str, Field(min_length=1, max_length=1024)]] = Field(
        default=["examples"], min_length=1, max_length=MAX_DOCS
    )
    models: list[SweepModel] = Field(default_factory=list, max_length=MAX_MODELS)
    methods: list[str] = Field(default_factory=list, max_length=MAX_METHODS)
    limit: int = Field(0, ge=0)
    budget: int | None = Field(None, ge=0, le=1_000_000)
    concurrency: int = Field(4, ge=1, le=4096)
    score: bool = True
    judge_model: str | None = None
    coder_model: str | None = None
    retry_failed: bool = False

    @field_validator("judge_model", "coder_model")
    @classmethod
    def _scorer_model(cls, value: str | None) -> str | None:
        if value is not None:
            SweepModel._provider_model(value)
        return value

    @model_validator(mode="after")
    def _models_for_agents(self) -> Sweep:
        needing = [a for a in self.agents if a != "probe"]
        if needing and not self.models:
            raise ValueError(
                f'the {needing[0]} agent needs at least one [[models]] entry (model = "provider/model"); '
                "only the probe agent runs without one"
            )
        if "tasks" in self.modes and "tools" not in self.agents:
            raise ValueError('task mode is answered by the tools agent: add "tools" to agents')
        if self.docs != ["examples"] and "tasks" not in self.modes:
            raise ValueError('docs chooses how the tools are documented in task mode: add "tasks" to modes')
        for name, values in (
            ("suites", self.suites),
            ("modes", self.modes),
            ("agents", self.agents),
            ("docs", self.docs),
        ):
            if len(set(values)) != len(values):
                raise ValueError(f"{name} lists the same value twice: {values}")
        return self


def load_sweep(path: Path) -> Sweep:
    """Read and validate a sweep file.

    Raises:
        SweepError: the file cannot be read, is not TOML, or breaks the schema (each problem named by its key).
    """
    try:
        data = tomllib.loads(read_text(path, limit=MAX_SWEEP_BYTES))
    except UnreadableFile as exc:
        raise SweepError(str(exc)) from None
    except tomllib.TOMLDecodeError as exc:
        raise SweepError(f"{path} is not valid TOML: {exc}") from None
    except (RecursionError, MemoryError):
        raise SweepError(f"{path} nests deeper than TOML's parser goes; a sweep file's lists are flat") from None
    try:
        return Sweep.model_validate(data)
    except ValidationError as exc:
        problems = exc.errors()
        lines = [_problem(error) for error in problems[:MAX_PROBLEMS]]
        if len(problems) > MAX_PROBLEMS:
            lines.append(f"  ... and {len(problems) - MAX_PROBLEMS:,} more problems")
        raise SweepError(f"{path}:\n" + "\n".join(lines)) from None


def _problem(error: Any) -> str:
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]).lstrip(".")
    if error["type"] == "extra_forbidden":
        model = SweepModel if "models" in error["loc"][:1] else Sweep
        known = ", ".join(model.model_fields)
        return f"  {where}: unknown key (known keys: {known})"
    message = error["msg"].removeprefix("Value error, ")
    shown = f" (got {_clip(repr(error['input']))})" if error["type"] not in ("missing",) and where else ""
    return f"  {where or '(file)'}: {message}{shown}"


def _clip(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class PlannedRun:
    """One run of a sweep: its evaluation and the scoring models it uses."""

    config: EvalConfig
    judge_model: str | None
    coder_model: str | None


def expand(sweep: Sweep, settings: Any) -> list[PlannedRun]:
    """The sweep's runs in order: per suite, per model (the probe last), per agent, per mode.

    Args:
        sweep: The validated file.
        settings: The command's settings (what the file leaves unset).

    Raises:
        SweepError: more runs than one sweep runs, or two runs would get one name.
    """
    count = _count(sweep)
    if count > MAX_RUNS:
        raise SweepError(
            f"the sweep expands to {count:,} runs, more than one sweep runs ({MAX_RUNS:,}); split it into several "
            "files (each over some of the suites or models)"
        )
    judge = sweep.judge_model or settings.judge_model
    coder = sweep.coder_model or settings.coder_model
    kinds = tuple(k for k, m in (("judge", judge), ("codematch", coder)) if m) + ("direct",)
    runs = [
        PlannedRun(_config(sweep, settings, suite, agent, model, mode, docs, kinds), judge, coder)
        for suite in sweep.suites
        for agent, model in _pairs(sweep)
        # Task mode is the tools agent's alone, one run per documentation source.
        for mode in sweep.modes
        if mode != "tasks" or agent == "tools"
        for docs in _sources(mode, sweep.docs)
    ]
    _refuse_shared_names(runs)
    return runs


def _count(sweep: Sweep) -> int:
    """How many runs the sweep expands to."""
    agents = len([a for a in sweep.agents if a != "probe"])
    explorations = len([m for m in sweep.modes if m != "tasks"])
    tasks = len(sweep.models) * len(sweep.docs) if "tasks" in sweep.modes else 0
    return len(sweep.suites) * (explorations * (len(sweep.models) * agents + ("probe" in sweep.agents)) + tasks)


def _pairs(sweep: Sweep) -> list[tuple[str, SweepModel | None]]:
    """Each agent with each model, in the file's order of models; the probe (no model) last."""
    pairs: list[tuple[str, SweepModel | None]] = [
        (agent, model) for model in sweep.models for agent in sweep.agents if agent != "probe"
    ]
    return pairs + [("probe", None)] if "probe" in sweep.agents else pairs


def _config(
    sweep: Sweep, settings: Any, suite: str, agent: str, model: SweepModel | None, mode: str, docs: str,
    kinds: tuple[str, ...],
) -> EvalConfig:  # fmt: skip
    """One run of the sweep: the model's own settings where it has them, else the file's, else the command's."""
    overrides = Overrides(
        model.temperature if model and model.temperature is not None else settings.temperature,
        model.max_tokens if model and model.max_tokens is not None else settings.max_tokens,
        model.reasoning_effort if model and model.reasoning_effort else settings.reasoning_effort,
    )
    named_mode = f"tasks-{docs}" if mode == "tasks" else mode
    return EvalConfig(
        run=run_name(suite, agent, named_mode, (model.label or model.model) if model else ""),
        model=model.model if model else "", suite=suite, agent=agent, mode=mode,
        budget=sweep.budget if sweep.budget is not None else settings.budget,
        concurrency=(model.concurrency if model and model.concurrency else sweep.concurrency),
        limit=sweep.limit, methods=tuple(sweep.methods), score=sweep.score, kinds=kinds,
        retry_failed=sweep.retry_failed, overrides=overrides if agent != "probe" else Overrides(), docs=docs,
    )  # fmt: skip


def _refuse_shared_names(runs: list[PlannedRun]) -> None:
    """Refuse two runs of one name: a model listed twice, or two entries of one model that need labels."""
    seen: dict[str, EvalConfig] = {}
    for planned in runs:
        other = seen.setdefault(planned.config.run, planned.config)
        if other is not planned.config and other == planned.config:
            raise SweepError(
                f"the run {planned.config.run!r} is listed twice ({other.model} appears twice in [[models]] with the "
                "same settings); remove one entry"
            )
        if other is not planned.config:
            raise SweepError(
                f"two runs would be named {planned.config.run!r} ({other.model} and {planned.config.model} with "
                'different settings); give one [[models]] entry a label = "..." to name its runs'
            )


def _sources(mode: str, docs: list[str]) -> list[str]:
    """The documentation sources a mode's runs are played with: each of ``docs`` in task mode, else the examples."""
    return docs if mode == "tasks" else ["examples"]


def run_state(store: RunStore, config: EvalConfig, method_ids: list[str]) -> str:
    """Where a run stands: ``new``, ``finished`` (nothing left to run), ``partial``, or ``conflict``.

    ``method_ids``: the ids of the run's episodes (its methods; in task mode, its tasks).

    ``conflict``: the run exists with other options (``EvalConfig.identity``), so it cannot be resumed.
    A failed episode counts as finished unless the run retries failed episodes.
    """
    run_id = store.find_run(config.run)
    if run_id is None:
        return "new"
    if config.spec().conflict(store.run_config(run_id)) is not None:
        return "conflict"
    ended = ("done",) if config.retry_failed else ("done", "failed")
    states = store.episode_states(run_id)
    return "finished" if all(states.get(m) in ended for m in method_ids) else "partial"


@dataclass(frozen=True)
class Standing:
    """Where one run of a sweep stands.

    Attributes:
        planned: The run.
        episodes: Its episodes: its methods (in task mode, its tasks).
        state: ``new``, ``finished``, ``partial`` or ``conflict`` (``run_state``).
        conflict: For a conflict, what the store holds and what the file asks for.
    """

    planned: PlannedRun
    episodes: int
    state: str
    conflict: str | None = None


def standings(settings: Any, store: RunStore, plan: list[PlannedRun]) -> list[Standing]:
    """Where each run of ``plan`` stands in ``store`` (runs of one suite share their methods, or tasks).

    Raises:
        SweepError: a run's suite is missing or broken, or has nothing to run with the file's methods and limit.
    """
    planned_ids: dict[tuple[str, tuple[str, ...], int, bool], list[str]] = {}
    found: list[Standing] = []
    for planned in plan:
        config = planned.config
        tasks = config.mode == "tasks"
        selection = (config.suite, config.methods, config.limit, tasks)
        try:
            if selection not in planned_ids:
                items = planned_tasks(settings, config) if tasks else planned_methods(settings, config)
                planned_ids[selection] = [item.id for item in items]
        except (ManifestError, EvalError) as exc:
            raise SweepError(str(exc)) from None
        ids = planned_ids[selection]
        if not ids:
            what = "tasks" if tasks else "methods"
            raise SweepError(f"no {what} in suite {config.suite!r} with these methods and limit")
        state = run_state(store, config, ids)
        conflict = None
        if state == "conflict":
            stored = stored_identity(store.run_config(store.run_id(config.run)))
            conflict = f"stored with {stored}, the file asks for {config.identity()}"
        found.append(Standing(planned, len(ids), state, conflict))
    return found
