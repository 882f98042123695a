"""Reproducing a published number (``pau-mcp eval --replay RUN``): a finished run played again from what it recorded.

Each done episode is played again by the run's own agent code, with its model's replies read from the recorded
trajectory in order (``RecordedModel``) and each tool result read from the recorded step that answered the same call
(``RecordedEnvironment``): no provider is asked and no hidden function runs. The tools the agent sees are listed by a
real ``pau-mcp serve`` started with the run's settings (budget, examples, protocol, the data directory's deployment
key) over a scratch run store, so the original store is only read. Then every score is made again from what was
recorded: the judge's rating read from its recorded reply by the protocol's rule, code match by running the code
writer's recorded code on the hidden tests, direct code by running the code the replayed agent submitted, both in
the sandbox.

The replay reports whether every score is identical, and otherwise the first episode and step where the replay left
the record: a prompt the agent built differently, a reply it asked for that was never recorded, a call it made
differently, a step it added or dropped, or a score that came out otherwise.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp_types as types

from ..config import Settings, SettingsError
from ..contract import Scoring
from ..llm import Completion, LLMClient, Overrides, ToolCall
from ..manifests import tool_name
from ..prompts import PromptsError
from ..protocol import Protocol, load_protocol
from ..runstore import EpisodeRow, RunStore, StoreError
from ..scoring.judge import parse_rating, parse_rating_anywhere
from .agents import Agent, PaperAgent, ProbeAgent, ToolsAgent
from .configuration import EvalConfig, EvalError
from .environment import Environment
from .hosting import EpisodeHost
from .reference_agent import ReferenceAgent

__all__ = ["Difference", "RecordedEnvironment", "RecordedModel", "ReplayResult", "replay_run"]

#: The agents a replay can play again (the observer also runs its own code in a sandbox of its own: not replayed).
REPLAYABLE = ("paper", "tools", "probe")


@dataclass(frozen=True)
class Difference:
    """Where a replay first left the record.

    Attributes:
        method_id: The episode's method.
        step: The trajectory step (from 0) where it left, or None when the trajectories agree and a score differs.
        what: What differed, in words.
    """

    method_id: str
    step: int | None
    what: str


@dataclass
class ReplayResult:
    """A whole replay.

    Attributes:
        run: The run replayed.
        episodes: Done episodes replayed.
        scores: Scores compared.
        differences: Per episode that differed, where it first did (plan order).
        skipped: Episodes not replayed and why (failed or unfinished ones: nothing to reproduce).
    """

    run: str
    episodes: int = 0
    scores: int = 0
    differences: list[Difference] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        """True when every replayed episode and every score matched the record."""
        return not self.differences


class _Left(Exception):  # noqa: N818 - a signal, not an error: the replay left the record here
    """The replay left the record at ``step``."""

    def __init__(self, step: int, what: str) -> None:
        super().__init__(what)
        self.step = step
        self.what = what


class RecordedModel(LLMClient):
    """The agent's model, answering each request with the next reply the run recorded (and checking the prompt, where
    the run recorded it). Makes no request.

    Args:
        trajectory: The episode's recorded steps.
        replayed: The replay's own trajectory as it grows (the index of the step being made).
    """

    def __init__(self, trajectory: Sequence[Mapping[str, Any]], replayed: Callable[[], int]) -> None:
        super().__init__(cache_path=None)
        self._replies = [(i, step) for i, step in enumerate(trajectory) if step.get("kind") == "model"]
        self._next = 0
        self._replayed = replayed

    async def complete(self, model: str, messages: Sequence[Mapping[str, Any]], **_: Any) -> Completion:
        """The next recorded reply; leaves the record when there is none left or the prompt differs."""
        if self._next >= len(self._replies):
            raise _Left(
                self._replayed(),
                f"the agent asked its model for reply {self._next + 1}, and the run recorded {len(self._replies)}",
            )
        index, step = self._replies[self._next]
        self._next += 1
        prompt = step.get("prompt")
        asked = messages[-1].get("content") if messages else None
        if isinstance(prompt, str) and asked != prompt:
            raise _Left(index, f"the agent's prompt for reply {self._next} differs from the recorded one")
        calls = tuple(
            ToolCall(str(c.get("id", "")), str(c.get("name", "")), str(c.get("arguments", "")))
            for c in step.get("tool_calls") or [] if isinstance(c, dict)
        )  # fmt: skip
        found = step.get("reasoning")
        reasoning = found if isinstance(found, str) else ""
        return Completion(model=model, text=str(step.get("reply") or ""), tool_calls=calls, cached=True,
                          reasoning=reasoning)  # fmt: skip


class RecordedEnvironment(Environment):
    """An episode's environment whose tool results are the recorded ones: each call is checked against the call the
    run recorded at the same step and answered with the result recorded after it."""

    recorded: Sequence[Mapping[str, Any]] = ()

    async def _call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        index = len(self.trajectory) - 1  # the tool_call or submit step just noted
        mine = _plain(self.trajectory[index].to_json())
        theirs = _plain(self.recorded[index]) if index < len(self.recorded) else None
        if mine != theirs:
            raise _Left(index, f"the replay made {_shown(mine)}; the run recorded {_shown(theirs)}")
        answer = self.recorded[index + 1] if index + 1 < len(self.recorded) else None
        if answer is None or answer.get("kind") != "tool_result":
            raise _Left(index + 1, "the run recorded no result for this call")
        structured = answer.get("structured")
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=str(answer.get("text") or ""))],
            structured_content=structured if isinstance(structured, dict) else None,
            is_error=bool(answer.get("is_error")),
        )


async def replay_run(settings: Settings, name: str, scorer: Scoring) -> ReplayResult:
    """Play the done episodes of run ``name`` again from its record and compare every score.

    Args:
        settings: The settings (run store, manifests, data directory with the deployment key, sandbox limits).
        name: The run.
        scorer: A ``pau_mcp.scoring.Scorer`` (no model needed: only its sandbox runs code on the hidden tests).

    Raises:
        EvalError: no such run, not an evaluation run, an agent a replay cannot play, or the server not starting.
    """
    store = RunStore(settings.db_path)
    try:
        try:
            run_id = store.run_id(name)
        except StoreError as exc:
            raise EvalError(str(exc)) from None
        config = _config(name, store.run_config(run_id))
        episodes = store.episodes(run_id, with_trajectories=True)
    finally:
        store.close()
    try:
        protocol = load_protocol(config.protocol, settings.data_dir)
        key = settings.deployment_key()
    except (PromptsError, SettingsError) as exc:
        raise EvalError(str(exc)) from None
    result = ReplayResult(name)
    done = [e for e in episodes if e.state == "done"]
    result.skipped = [(e.method_id, f"{e.state}: nothing to reproduce") for e in episodes if e.state != "done"]
    if not done:
        return result
    with tempfile.TemporaryDirectory(prefix="pau-replay-") as scratch:
        scratch_store = RunStore(Path(scratch) / "replay.db")
        served = settings.model_copy(update={"db": scratch_store.path})
        host = EpisodeHost(
            served, config, scorer, scratch_store, key, llm=LLMClient(cache_path=None), protocol=protocol
        )
        try:
            await host.start({tool_name(key, e.method_id) for e in done})
            for episode in done:
                result.episodes += 1
                difference = await _replay_episode(host, config, protocol, scorer, episode, key)
                result.scores += len([k for k in episode.scores if k in ("judge", "codematch", "direct")])
                if difference is not None:
                    result.differences.append(difference)
        finally:
            await host.close()
            scratch_store.close()
    return result


def _config(name: str, stored: Mapping[str, Any]) -> EvalConfig:
    """The recorded run's configuration, as the replay plays it."""
    if "agent" not in stored or stored.get("mode") == "tasks":
        raise EvalError(f"run {name!r} is not an exploration run of `pau-mcp eval`: only those can be replayed")
    agent = str(stored["agent"])
    if agent not in REPLAYABLE:
        raise EvalError(
            f"run {name!r} was played by the {agent} agent, which a replay cannot play again (it runs code of its own "
            f"outside the record); replayable agents: {', '.join(REPLAYABLE)}"
        )
    overrides = stored.get("overrides") or {}
    return EvalConfig(
        run=name, model=str(stored.get("model") or ""), suite=str(stored.get("suite") or "builtin"), agent=agent,
        mode=str(stored.get("mode") or "interactive"), budget=int(stored.get("budget") or 0), score=False,
        protocol=str(stored.get("protocol") or "pau-mcp"), examples=str(stored.get("examples") or "published"),
        overrides=Overrides(**overrides), cache=False,
    )  # fmt: skip


def _agent(config: EvalConfig, llm: LLMClient, protocol: Protocol) -> Agent:
    if config.agent == "probe":
        return ProbeAgent()
    if config.agent == "paper":
        if protocol.reference:
            return ReferenceAgent(llm=llm, model=config.model, prompts=protocol.prompts, overrides=config.overrides)
        return PaperAgent(llm=llm, model=config.model, overrides=config.overrides)
    return ToolsAgent(llm=llm, model=config.model, overrides=config.overrides)


async def _replay_episode(
    host: EpisodeHost, config: EvalConfig, protocol: Protocol, scorer: Scoring, episode: EpisodeRow, key: str
) -> Difference | None:
    recorded = episode.trajectory or []
    tool = tool_name(key, episode.method_id)
    async with host.session([tool], f"{config.run}/{episode.method_id}/replay") as session:
        live = await Environment.open(session, tool)
    env = RecordedEnvironment(session=session, tool=live.tool, submit_tool=live.submit_tool)
    env.recorded = recorded
    agent = _agent(config, RecordedModel(recorded, lambda: len(env.trajectory)), protocol)
    try:
        outcome = await agent.run(env, config.mode, config.budget)
        await env.submit(outcome.description or "(no description)", outcome.code)
    except _Left as left:
        return Difference(episode.method_id, left.step, left.what)
    mine = [_plain(step.to_json()) for step in env.trajectory]
    theirs = [_plain(step) for step in recorded]
    for index, (a, b) in enumerate(zip(mine, theirs, strict=False)):
        if a != b:
            return Difference(episode.method_id, index, f"the replay made {_shown(a)}; the run recorded {_shown(b)}")
    if len(mine) != len(theirs):
        return Difference(
            episode.method_id, min(len(mine), len(theirs)),
            f"the replay made {len(mine)} steps and the run recorded {len(theirs)}",
        )  # fmt: skip
    return await _scores(episode, scorer, protocol, outcome.code)


async def _scores(episode: EpisodeRow, scorer: Scoring, protocol: Protocol, code: str | None) -> Difference | None:
    """Every recorded score made again from the record; the first that differs, or None."""
    for kind in ("judge", "codematch", "direct"):
        row = episode.scores.get(kind)
        if row is None or row.status == "error":
            continue
        if kind == "judge":
            reply = str(row.detail.get("reply") or "")
            rating = parse_rating_anywhere(reply) if protocol.reference else parse_rating(reply)
            again: tuple[str, float | None] = ("scored", float(rating)) if rating is not None else ("unscored", None)
        else:
            source = row.detail.get("code") if kind == "codematch" else code
            made = await scorer.score(episode.method_id, code=source, kinds=("direct",))
            direct = made.direct
            again = (direct.status, direct.fraction) if direct is not None else ("error", None)
        if again != (row.status, row.value):
            return Difference(
                episode.method_id, None,
                f"its {kind} score came out {again[1]} ({again[0]}); the run recorded {row.value} ({row.status})",
            )  # fmt: skip
    return None


def _plain(value: Any) -> Any:
    """A step as plain JSON, as the run store keeps it."""
    return json.loads(json.dumps(value, default=str))


def _shown(step: Any) -> str:
    text = json.dumps(step, sort_keys=True, default=str)
    return text if len(text) <= 300 else text[:297] + "..."
