"""A run as an Inspect AI evaluation log (``pau-mcp export inspect RUN``), written with Inspect's own log API.

One ``.eval`` file per run (an epoch group's epochs are one log, each epoch a sample epoch). Each episode is a
sample: its messages (each prompt recorded, each model reply with its thinking and native tool calls, each tool call
and result, the submission), its events (model turns, tool calls with their status, fuel and whether they counted,
the harness's notes, the scores), its scores (the judge's rating with its reasoning, code match and direct code with
their failures), its tokens and cost, and its state. The log's spec names the model, the suite with its digest, the
protocol and prompts, and pau-mcp's version; its results hold the means of every score kind.

The gold description is never written: a published log must not carry a benchmark's answers. ``inspect view`` opens
the file (``inspect view --log-dir DIR``); ``inspect_ai.log.read_eval_log`` reads it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import inspect_ai
from inspect_ai.event import Event, InfoEvent, ModelEvent, ScoreEvent, ToolEvent
from inspect_ai.log import (
    EvalConfig,
    EvalDataset,
    EvalError,
    EvalLog,
    EvalMetric,
    EvalResults,
    EvalSample,
    EvalScore,
    EvalSpec,
    EvalStats,
    write_eval_log,
)
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageTool,
    ChatMessageUser,
    Content,
    ContentReasoning,
    ContentText,
    GenerateConfig,
    ModelOutput,
    ModelUsage,
)
from inspect_ai.scorer import Score
from inspect_ai.tool import ToolCall, ToolCallError

from pau_mcp import __version__
from pau_mcp.contract import RAN
from pau_mcp.manifests import ManifestStore
from pau_mcp.runstore import CallRow, EpisodeRow, RunStore, ScoreRow

from .conduct import conduct_of
from .data import KINDS, ReportError, epoch_info, run_names
from .provenance import suite_identity

__all__ = ["NO_MODEL", "inspect_log", "log_file_name", "write_inspect_log"]

#: The model a log names for a run without one (the probe agent): Inspect wants ``provider/name``.
NO_MODEL = "none/none"
#: The task every exported log belongs to.
_TASK = "pau-mcp"


def write_inspect_log(store: RunStore, manifests: ManifestStore, name: str, out_dir: Path) -> Path:
    """Write the run (or epoch group) ``name`` as one ``.eval`` log in ``out_dir``; returns its path.

    Raises:
        ReportError: no such run, or a run without episodes (a server's run has sessions, not episodes).
    """
    log = inspect_log(store, manifests, name)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / log_file_name(log, name)
    write_eval_log(log, path, format="eval")
    return path


def log_file_name(log: EvalLog, name: str) -> str:
    """``<created>_pau-mcp-<run>_<eval id>.eval``: Inspect's own pattern, so ``inspect view`` lists it by date."""
    created = log.eval.created.replace(":", "-").replace("+00-00", "").split(".")[0]
    return f"{created}_{_TASK}-{name}_{log.eval.eval_id}.eval"


def inspect_log(store: RunStore, manifests: ManifestStore, name: str) -> EvalLog:
    """The evaluation log of the run (or epoch group) ``name``.

    Raises:
        ReportError: no such run, a run without episodes, or epochs of different configurations.
    """
    members = run_names(store, [name])
    rows = {row.name: row for row in store.runs()}
    missing = [member for member in members if member not in rows]
    if missing:
        known = ", ".join(sorted(rows)[:10]) or "none yet"
        raise ReportError(f"no run named {missing[0]!r} in {store.location} (known: {known}); see `pau-mcp runs list`")
    samples: list[EvalSample] = []
    configs = []
    for member in members:
        row = rows[member]
        info = epoch_info(row.config)
        epoch = info[1] if info is not None and len(members) > 1 else 1
        episodes = store.episodes(row.id, with_trajectories=True)
        if not episodes:
            raise ReportError(
                f"run {member!r} has no episodes (it is a server's run, or a scored file): an Inspect log holds "
                "evaluation episodes; `pau-mcp runs export` writes its sessions"
            )
        calls = _calls_by_session(store.calls(row.id))
        model = str(row.config.get("model") or "") or NO_MODEL
        samples += [_sample(episode, epoch, model, calls.get(episode.session_key or "", [])) for episode in episodes]
        configs.append((member, row.created_at, row.config))
    first_config = configs[0][2]
    identity = {key: value for key, value in first_config.items() if key not in ("epoch", "seed")}
    for member, _, config in configs[1:]:
        other = {key: value for key, value in config.items() if key not in ("epoch", "seed")}
        if other != identity:
            raise ReportError(f"the epochs of {name!r} differ in configuration ({member}): export them one by one")
    return _log(manifests, name, configs, samples)


def _log(
    manifests: ManifestStore, name: str, configs: Sequence[tuple[str, str, dict[str, Any]]], samples: list[EvalSample]
) -> EvalLog:
    config = configs[0][2]
    model = str(config.get("model") or "") or NO_MODEL
    suite = str(config.get("suite") or "")
    identity = suite_identity(manifests, suite) if suite else None
    created = _iso(configs[0][1]) or datetime.now(UTC).isoformat()
    epochs = len(configs)
    spec = EvalSpec(
        eval_id=_eval_id(name, configs),
        run_id=name,
        created=created,
        task=_TASK,
        task_version=__version__,
        task_display_name=f"pau-mcp {suite}".strip(),
        task_args={k: config[k] for k in ("suite", "agent", "mode", "budget", "protocol") if k in config},
        dataset=EvalDataset(
            name=suite or None, samples=len({s.id for s in samples}), sample_ids=sorted({s.id for s in samples})
        ),
        model=model,
        config=EvalConfig(epochs=epochs),
        packages={"pau-mcp": __version__, "inspect_ai": inspect_ai.__version__},
        metadata={
            "pau_mcp": {
                "runs": [{"run": member, "created": created_at, "config": run_config} for member, created_at, run_config
                         in configs],
                "suite": identity.as_dict() if identity else None,
                "prompts": config.get("prompts"),
                "protocol": config.get("protocol", "pau-mcp"),
                "gold": "left out: a published log must not carry the benchmark's answers",
            }
        },
    )  # fmt: skip
    finished = [s for s in samples if (s.metadata or {}).get("state") in ("done", "failed")]
    return EvalLog(
        eval=spec,
        status="success" if len(finished) == len(samples) else "started",
        results=EvalResults(
            total_samples=len(samples),
            completed_samples=sum(1 for s in samples if (s.metadata or {}).get("state") == "done"),
            scores=_results(samples),
        ),
        stats=_stats(samples, model),
        samples=samples,
    )


def _eval_id(name: str, configs: Sequence[tuple[str, str, dict[str, Any]]]) -> str:
    """A stable id of the exported runs (the same runs export with the same id)."""
    import hashlib

    text = json.dumps([name, [(member, created) for member, created, _ in configs]], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:22]


def _results(samples: Sequence[EvalSample]) -> list[EvalScore]:
    scores = []
    for kind in KINDS:
        # The samples' scores are the floats _score makes (Inspect AI types a score's value as any JSON value).
        values = [float(cast(float, s.scores[kind].value)) for s in samples if s.scores and kind in s.scores]
        if not values:
            continue
        mean = math.fsum(values) / len(values)
        stderr = (
            math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1) / len(values))
            if len(values) > 1
            else 0.0
        )
        scores.append(
            EvalScore(
                name=kind, scorer=kind, scored_samples=len(values),
                unscored_samples=sum(1 for s in samples if (s.metadata or {}).get("state") == "done") - len(values),
                metrics={"mean": EvalMetric(name="mean", value=mean), "stderr": EvalMetric(name="stderr", value=stderr)},
            )
        )  # fmt: skip
    return scores


def _stats(samples: Sequence[EvalSample], model: str) -> EvalStats:
    started = [s.started_at for s in samples if s.started_at]
    completed = [s.completed_at for s in samples if s.completed_at]
    usage = ModelUsage()
    for sample in samples:
        for used in (sample.model_usage or {}).values():
            usage = usage + used
    return EvalStats(
        started_at=min(started) if started else "", completed_at=max(completed) if completed else "",
        model_usage={model: usage} if usage.total_tokens or usage.total_cost else {},
    )  # fmt: skip


def _calls_by_session(calls: Iterable[CallRow]) -> dict[str, list[CallRow]]:
    found: dict[str, list[CallRow]] = {}
    for call in calls:
        found.setdefault(call.session_key, []).append(call)
    return found


def _sample(episode: EpisodeRow, epoch: int, model: str, calls: Sequence[CallRow]) -> EvalSample:
    started = _iso(episode.started_at)
    completed = _iso(episode.finished_at)
    transcript = _Transcript(model, started, calls)
    for index, step in enumerate(episode.trajectory or []):
        transcript.add(index, step)
    description = _description(episode.trajectory or [])
    scores = {
        kind: _score(row, description)
        for kind, row in episode.scores.items() if row.status == "scored" and row.value is not None
    }  # fmt: skip
    for kind, score in scores.items():
        transcript.events.append(ScoreEvent(score=score, scorer=kind, timestamp=transcript.at))
    unscored = {
        kind: {"status": row.status, "reason": row.detail.get("reason")}
        for kind, row in episode.scores.items() if kind not in scores
    }  # fmt: skip
    conduct = conduct_of(episode.trajectory or [])
    usage = ModelUsage(
        input_tokens=episode.input_tokens, output_tokens=episode.output_tokens,
        total_tokens=episode.input_tokens + episode.output_tokens, total_cost=episode.cost_usd,
    )  # fmt: skip
    return EvalSample(
        id=episode.method_id,
        epoch=epoch,
        input=f"Explore the hidden method {episode.method_id} through its MCP tool, then submit what it does.",
        target="",
        messages=transcript.messages,
        output=ModelOutput.from_content(model, transcript.submitted or ""),
        scores=scores,
        metadata={
            "state": episode.state, "session": episode.session_key, "attempts": episode.attempts,
            "concluded": episode.concluded, "queries": episode.queries, "cost_usd": episode.cost_usd,
            "malformed_actions": conduct.malformed_actions, "invalid_arguments": conduct.invalid_arguments,
            "refusals": conduct.refusals, "unscored": unscored,
        },
        events=transcript.events,
        model_usage={model: usage},
        started_at=started,
        completed_at=completed,
        total_time=_seconds(started, completed),
        error=EvalError(message=episode.error, traceback="", traceback_ansi="") if episode.state == "failed" and
        episode.error else None,
    )  # fmt: skip


def _description(trajectory: Sequence[Mapping[str, Any]]) -> str | None:
    """The description the episode submitted (its last ``submit`` step), or None."""
    for step in reversed(trajectory):
        if step.get("kind") == "submit":
            return str(step.get("description") or "")
    return None


def _score(row: ScoreRow, description: str | None) -> Score:
    """A recorded score as Inspect's: the judge with its reply (its reasoning), code scores with their failures."""
    detail = row.detail
    metadata: dict[str, Any]
    if row.kind == "judge":
        explanation = str(detail.get("reply") or detail.get("reason") or "")
        metadata = {"status": row.status, "model": row.model}
    else:
        explanation = str(detail.get("reason") or "")
        metadata = {
            "status": row.status, "model": row.model, "failures": detail.get("failures"), "code": detail.get("code"),
            "matches": sum(1 for m in detail.get("matches") or [] if m), "tests": len(detail.get("matches") or []),
        }  # fmt: skip
    return Score(value=float(row.value or 0.0), answer=description, explanation=explanation, metadata=metadata)


class _Transcript:
    """An episode's recorded steps turned into Inspect messages and events, tool calls linked to their results."""

    def __init__(self, model: str, started: str | None, calls: Sequence[CallRow]) -> None:
        self.model = model
        self.at = datetime.fromisoformat(started) if started else datetime.now(UTC)
        self.messages: list[ChatMessage] = []
        self.events: list[Event] = []
        self.submitted: str | None = None
        self._calls = list(calls)
        self._assistant: ChatMessageAssistant | None = None
        self._open: list[ToolCall] = []  # calls the last reply asked for, not yet answered
        self._current: ToolCall | None = None

    def add(self, index: int, step: Mapping[str, Any]) -> None:
        kind = step.get("kind")
        if kind == "model":
            self._model(index, step)
        elif kind == "tool_call":
            self._call(index, str(step.get("tool") or ""), _arguments(step.get("arguments")))
        elif kind == "submit":
            self.submitted = str(step.get("description") or "")
            arguments = {"description": self.submitted, **({"code": step["code"]} if step.get("code") else {})}
            self._call(index, "submit", arguments)
        elif kind == "tool_result":
            self._result(step)
        else:
            data = {key: value for key, value in step.items() if key != "kind"}
            self.events.append(InfoEvent(source=f"pau-mcp {kind}", data=_jsonable(data), timestamp=self.at))

    def _model(self, index: int, step: Mapping[str, Any]) -> None:
        prompt = step.get("prompt")
        asked: list[ChatMessage] = []
        if isinstance(prompt, str) and prompt:
            asked = [ChatMessageUser(content=prompt)]
            self.messages += asked
        reply = str(step.get("reply") or "")
        reasoning = step.get("reasoning")
        content: str | list[Content] = reply
        if isinstance(reasoning, str) and reasoning:
            content = [ContentReasoning(reasoning=reasoning), ContentText(text=reply)]
        calls = []
        for number, call in enumerate(step.get("tool_calls") or []):
            if not isinstance(call, dict):
                continue
            text = str(call.get("arguments") or "")
            parsed = _parsed(text)
            calls.append(
                ToolCall(
                    id=str(call.get("id") or f"call-{index}-{number}"), function=str(call.get("name") or ""),
                    arguments=parsed if parsed is not None else {},
                    parse_error=None if parsed is not None else f"the arguments are not a JSON object: {text[:200]}",
                )
            )  # fmt: skip
        self._assistant = ChatMessageAssistant(content=content, tool_calls=calls or None, model=self.model)
        self._open = list(calls)
        self.messages.append(self._assistant)
        output = ModelOutput.from_content(self.model, content, stop_reason="tool_calls" if calls else "stop")
        output.choices[0].message.tool_calls = calls or None
        self.events.append(
            ModelEvent(
                model=self.model, input=asked, tools=[], tool_choice="auto", config=GenerateConfig(), output=output,
                timestamp=self.at,
            )
        )  # fmt: skip

    def _call(self, index: int, function: str, arguments: dict[str, Any]) -> None:
        for call in self._open:
            if call.function == function and call.arguments == arguments:
                self._open.remove(call)
                self._current = call
                return
        call = ToolCall(id=f"step-{index}", function=function, arguments=arguments)
        if self._assistant is not None and not self._assistant.tool_calls:
            self._assistant.tool_calls = [call]  # the reply whose input the harness called the tool with
        else:
            self._assistant = ChatMessageAssistant(content="", tool_calls=[call], model=self.model)
            self.messages.append(self._assistant)
        self._current = call

    def _result(self, step: Mapping[str, Any]) -> None:
        call = self._current or ToolCall(id="unmatched", function="", arguments={})
        self._current = None
        found = step.get("structured")
        structured: dict[str, Any] = found if isinstance(found, dict) else {}
        status = str(structured.get("status") or ("error" if step.get("is_error") else "ok"))
        text = str(step.get("text") or "")
        metadata: dict[str, Any] = {"status": status}
        if call.function != "submit":
            recorded = self._calls.pop(0) if self._calls else None
            matches = recorded is not None and recorded.status == status
            metadata["counted"] = recorded.counted if matches and recorded else status in RAN
            metadata["fuel"] = (recorded.outcome or {}).get("fuel") if matches and recorded else None
            for key in ("queries_used", "queries_left"):
                if key in structured:
                    metadata[key] = structured[key]
        error = ToolCallError("unknown", text[:2000]) if step.get("is_error") else None
        self.messages.append(
            ChatMessageTool(content=text, tool_call_id=call.id, function=call.function, error=error, metadata=metadata)
        )
        self.events.append(
            ToolEvent(
                id=call.id, function=call.function, arguments=_jsonable(call.arguments), result=text, error=error,
                metadata=metadata, timestamp=self.at,
            )
        )  # fmt: skip


def _arguments(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {"arguments": value}


def _parsed(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text or "{}")
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _jsonable(value: Any) -> Any:
    """``value`` as plain JSON (the trajectory's values already are; anything else becomes its text)."""
    return json.loads(json.dumps(value, default=str))


def _iso(stamp: str | None) -> str | None:
    """A run store time (``...Z``) as ISO 8601 with its offset, as Inspect writes times."""
    if not stamp:
        return None
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).isoformat()


def _seconds(started: str | None, completed: str | None) -> float | None:
    if not started or not completed:
        return None
    return (datetime.fromisoformat(completed) - datetime.fromisoformat(started)).total_seconds()
