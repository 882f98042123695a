"""What an evaluation run is: its configuration (``EvalConfig``), its identity in the run store, the agents it may
use, and the checks that refuse a run before anything is created for it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..contract import label_problem
from ..llm import LLMNotConfigured, Overrides, parse_model
from ..protocol import DEFAULT_PROTOCOL
from ..runs import RunError, RunSpec
from .agents import Agent, PaperAgent, ProbeAgent, ToolsAgent
from .observer import ObserverAgent

__all__ = ["AGENTS", "EvalConfig", "EvalError", "check_config", "stored_identity"]


class EvalError(RunError):
    """An evaluation cannot start or continue; the message says what to do."""


#: The agents a run may use (``--agent``), by name.
AGENTS: dict[str, Callable[..., Agent]] = {
    "paper": PaperAgent, "tools": ToolsAgent, "probe": ProbeAgent, "observer": ObserverAgent,
}  # fmt: skip


@dataclass(frozen=True)
class EvalConfig:
    """One evaluation run.

    Attributes:
        run: The run's name in the store (re-using it resumes the run).
        model: The agent's model (``provider/model``); empty for the probe agent.
        suite: The suite evaluated.
        agent: ``paper``, ``tools``, ``probe`` or ``observer`` (``tools`` answers tasks).
        mode: ``interactive`` (queries), ``incontext`` (the initial examples only) or ``tasks`` (the suite's tasks,
            answered with its tools: ``harness.tasks``).
        budget: Queries per method.
        concurrency: Episodes at once.
        limit: Only the first ``limit`` methods (0: all).
        methods: Only these method ids (empty: all).
        server: A running server's URL (``--server``); None to start one.
        score: Score each submission.
        kinds: Which scores (``judge``, ``codematch`` need models; ``direct`` scores code the agent wrote).
        retry_failed: Run the episodes that failed in an earlier invocation again (the default); False keeps
            them failed.
        overrides: The agent model's request settings chosen by the user (``--temperature``, ...).
        protocol: Whose prompts and rules the agent and the scores follow (``pau-mcp`` or ``reference``).
        cache: Read and write the LLM response cache for the agent's model (``--no-cache``: False).
        share_samples: Replay the agent's sampled replies (temperature above 0) from other runs too
            (``--share-samples``); by default they are replayed only within this run.
        examples: The initial examples the run's server shows (``published``, or ``deployment``: drawn for the
            deployment key; the reference protocol takes only the published ones).
        docs: What the tools are documented with, in task mode (``pau_mcp.documentation``: ``examples``, ``none``,
            ``gold``, a run or an exported file); the run's own server is started with it.
        seed: The sampling seed of every request of the agent's model (one epoch of ``eval --epochs``:
            ``harness.epochs``); part of the identity. None: no seed.
        recorded: Recorded with a new run beside its identity, never compared (an epoch's place in its group).
    """

    run: str
    model: str
    suite: str
    agent: str = "paper"
    mode: str = "interactive"
    budget: int = 20
    concurrency: int = 4
    limit: int = 0
    methods: tuple[str, ...] = ()
    server: str | None = None
    score: bool = True
    kinds: tuple[str, ...] = ("judge", "codematch", "direct")
    retry_failed: bool = True
    overrides: Overrides = field(default_factory=Overrides)
    protocol: str = DEFAULT_PROTOCOL
    cache: bool = True
    share_samples: bool = False
    examples: str = "published"
    docs: str = "examples"
    seed: int | None = None
    recorded: dict[str, Any] = field(default_factory=dict)

    def identity(self) -> dict[str, Any]:
        """What must match for a run to be resumed rather than refused (overrides, examples and docs only when they
        are not the defaults, so that runs recorded before them resume)."""
        identity = {
            k: v for k, v in asdict(self).items() if k in ("model", "suite", "agent", "mode", "budget", "protocol")
        }
        if self.examples != "published":
            identity["examples"] = self.examples
        if self.overrides.any():
            identity["overrides"] = {k: v for k, v in asdict(self.overrides).items() if v is not None}
        if self.docs != "examples":
            identity["docs"] = self.docs
        if self.seed is not None:
            identity["seed"] = self.seed
        return identity

    def spec(self, prompts_digest: str | None = None, with_examples: bool = True) -> RunSpec:
        """The run as the driver opens it: its identity, and what a new run records beside it (the digest of the
        prompts it follows; that its scores were given the examples the agent saw)."""
        recorded: dict[str, Any] = {**self.recorded, "with_examples": True} if with_examples else {**self.recorded}
        if prompts_digest is not None:
            recorded["prompts"] = prompts_digest
        return RunSpec(
            name=self.run, kind="eval", identity=self.identity(), keys=_IDENTITY_KEYS, defaults=_IDENTITY_DEFAULTS,
            recorded=recorded, retry_failed=self.retry_failed,
        )  # fmt: skip


_IDENTITY_KEYS = ("model", "suite", "agent", "mode", "budget", "protocol", "overrides", "examples", "docs", "seed")
#: A run made before protocols were recorded followed ours.
_IDENTITY_DEFAULTS = {"protocol": DEFAULT_PROTOCOL}


def stored_identity(config: dict[str, Any]) -> dict[str, Any]:
    """The identity part of a stored evaluation run's configuration."""
    return {**_IDENTITY_DEFAULTS, **{k: v for k, v in config.items() if k in _IDENTITY_KEYS}}


def check_config(config: EvalConfig) -> None:
    """Refuse a run that could not play a single episode, before anything is created for it.

    Raises:
        EvalError: an unknown agent, a missing model, a model that names no known provider, or a run name
            that cannot label a session.
    """
    problem = label_problem(config.run, "run name")
    if problem:
        raise EvalError(problem)
    if config.examples not in ("published", "deployment"):
        raise EvalError(f"unknown examples {config.examples!r}; choose published or deployment")
    if config.examples == "deployment" and config.protocol == "reference":
        raise EvalError(
            "the reference protocol shows the published examples, as the reference benchmark did; drop "
            "--examples deployment, or use --protocol pau-mcp"
        )
    if config.agent not in AGENTS:
        raise EvalError(f"unknown agent {config.agent!r}; choose from {', '.join(AGENTS)}")
    if config.mode == "tasks" and config.agent != "tools":
        raise EvalError(
            f"task mode is answered by native tool calling (the tools agent), not {config.agent}: leave --agent out"
        )
    if config.docs != "examples" and config.mode != "tasks":
        raise EvalError("--docs chooses how the tools are documented for task mode: add --mode tasks")
    if config.agent == "probe":
        return
    if not config.model:
        raise EvalError(f"the {config.agent} agent needs --model (e.g. openai/gpt-4o-mini)")
    try:
        parse_model(config.model)
    except LLMNotConfigured as exc:
        raise EvalError(str(exc)) from None
