"""A run as Every Eval Ever records (``pau-mcp export eee RUN``), built with the ``every-eval-ever`` package's own
types and laid out as its datastore lays records out.

One aggregate record (``data/pau-mcp-<suite>/<developer>/<model>/<uuid>.json``) holds one result per score kind the
run recorded (the judge's rating, code match, direct code) with its mean, standard deviation, standard error and 95%
bootstrap interval, and pass^k of code match when the run is an epoch group. Beside it, ``<uuid>_samples.jsonl``
holds the instance-level records: per episode and score kind, the agentic transcript (every prompt, reply, tool call
and result), the submitted description as the answer, the score, tokens and time. The aggregate names that file with
its SHA-256. As in the Inspect log, the gold description is never written: each instance's ``reference`` is empty.

``every-eval-ever`` asks for Python 3.12; its types and validator run on 3.11 too, installed without its other
dependencies (``pip install --no-deps --ignore-requires-python every-eval-ever``; docs/reports.md).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from every_eval_ever.eval_types import (
    ConfidenceInterval,
    DetailedEvaluationResults,
    EvalLibrary,
    EvaluationLog,
    EvaluationResult,
    Format,
    HashAlgorithm,
    JudgeConfig,
    LlmScoring,
    MetricConfig,
    ModelInfo,
    ScoreDetails,
    ScoreType,
    SourceDataPrivate,
    SourceMetadata,
    StandardError,
    Uncertainty,
)
from every_eval_ever.helpers.io import datastore_output_dir, datastore_repo_file_path
from every_eval_ever.helpers.schema import SCHEMA_VERSION
from every_eval_ever.instance_level_types import (
    AnswerAttributionItem,
    Evaluation,
    Input,
    InstanceLevelEvaluationLog,
    InteractionType,
    Message,
    Performance,
    TokenUsage,
    ToolCall,
)

from pau_mcp import __version__
from pau_mcp.manifests import ManifestStore
from pau_mcp.runstore import EpisodeRow, RunStore

from .data import ReportError, load_runs, run_names
from .epochs import DEFAULT_THRESHOLD, method_means, outcomes, pass_hat
from .provenance import suite_identity
from .stats import bootstrap_interval

__all__ = ["EEEFiles", "export_eee"]

#: What each score kind is, for the records: (name, description, lowest, highest, judged by a model).
_KINDS: dict[str, tuple[str, str, float, float, bool]] = {
    "judge": ("Judge rating", "An LLM judge's 1-5 rating of the agent's description against the hidden function's "
              "behaviour.", 1.0, 5.0, True),
    "codematch": ("Code match", "The share of the hidden tests that code an LLM wrote from the agent's description "
                  "gets right.", 0.0, 1.0, True),
    "direct": ("Direct code", "The share of the hidden tests that the code the agent submitted gets right.", 0.0,
               1.0, False),
}  # fmt: skip
# Fractions are counts of matching tests: a value within this of the threshold is on it.
_TOLERANCE = 1e-9


@dataclass(frozen=True)
class EEEFiles:
    """What an export wrote.

    Attributes:
        aggregate: The aggregate record.
        samples: The instance-level records (JSON lines).
        records: Instance-level records written.
        aggregate_path: The aggregate's path inside the datastore (``data/...``), as the validator checks it.
        samples_path: The samples' path inside the datastore.
    """

    aggregate: Path
    samples: Path
    records: int
    aggregate_path: str
    samples_path: str


def export_eee(
    store: RunStore, manifests: ManifestStore, name: str, out_dir: Path, *, organization: str = "unknown",
    relationship: str = "third_party", threshold: float = DEFAULT_THRESHOLD, resamples: int = 10_000, seed: int = 0,
) -> EEEFiles:  # fmt: skip
    """Write the run (or epoch group) ``name`` as Every Eval Ever records under ``out_dir`` (the datastore's root: its
    ``data`` directory is made there).

    Raises:
        ReportError: no such run, a run without episodes, runs of several configurations, or no score to publish.
    """
    members = run_names(store, [name])
    runs = load_runs(store, members)
    if any(not run.episodes for run in runs):
        raise ReportError(f"run {name!r} has no episodes: Every Eval Ever records describe evaluation episodes")
    config = runs[0].config
    identity = {k: v for k, v in config.items() if k not in ("epoch", "seed")}
    if any({k: v for k, v in run.config.items() if k not in ("epoch", "seed")} != identity for run in runs):
        raise ReportError(f"the runs of {name!r} differ in configuration: export them one by one")
    rows = store.runs()
    created = {row.name: row.created_at for row in rows}
    episodes = [(run.name, episode) for run in runs for episode in store.episodes(run.run_id, with_trajectories=True)]
    kinds = [kind for kind in _KINDS if any(kind in e.scores for _, e in episodes)]
    if not kinds:
        raise ReportError(f"run {name!r} has no scores to publish yet: score it first (`pau-mcp score {name}`)")
    suite = str(config.get("suite") or "")
    model = str(config.get("model") or "")
    model_id = model if "/" in model else f"pau-mcp/{model or config.get('agent', 'probe')}"
    collection = f"pau-mcp-{suite}" if suite else "pau-mcp"
    retrieved = str(int(time.time()))
    evaluation_id = f"{collection}/{model_id}/{retrieved}"
    file_uuid = str(uuid.uuid4())
    directory = datastore_output_dir(out_dir / "data", collection, model_id)
    directory.mkdir(parents=True, exist_ok=True)
    samples_path = directory / f"{file_uuid}_samples.jsonl"
    samples_repo = datastore_repo_file_path(collection, model_id, None, samples_path.name)
    count = 0
    with samples_path.open("w", encoding="utf-8") as handle:
        for run_name, episode in episodes:
            for kind in kinds:
                record = _instance(evaluation_id, model_id, collection, kind, run_name, episode, threshold)
                if record is not None:
                    handle.write(record.model_dump_json(exclude_none=True) + "\n")
                    count += 1
    source = _source(collection, suite, config, suite_identity(manifests, suite).digest if suite else "")
    results = [
        result for kind in kinds
        if (result := _result(collection, source, kind, runs, episodes, threshold, resamples, seed, config)) is not None
    ]  # fmt: skip
    if len(runs) > 1 and "codematch" in kinds:
        results.append(_pass_hat_result(collection, source, runs, threshold))
    stamps = [created[run.name] for run in runs if run.name in created]
    log = EvaluationLog(
        schema_version=SCHEMA_VERSION,
        evaluation_id=evaluation_id,
        evaluation_timestamp=str(int(_epoch(min(stamps)))) if stamps else None,
        retrieved_timestamp=retrieved,
        source_metadata=SourceMetadata(
            source_name="pau-mcp",
            source_type="evaluation_run",
            source_organization_name=organization,
            evaluator_relationship=relationship,
            additional_details={"runs": ", ".join(run.name for run in runs), "pau_mcp_version": __version__},
        ),
        eval_library=EvalLibrary(name="pau-mcp", version=__version__),
        model_info=ModelInfo(
            name=model or f"(no model: the {config.get('agent', 'probe')} agent)",
            id=model_id,
            developer=model_id.split("/", 1)[0],
            additional_details=_strings(
                {k: config.get(k) for k in ("agent", "mode", "protocol", "budget", "examples", "overrides")}
            ),
        ),  # fmt: skip
        evaluation_results=results,
        detailed_evaluation_results=DetailedEvaluationResults(
            format=Format.jsonl,
            file_path=samples_repo,
            hash_algorithm=HashAlgorithm.sha256,
            checksum=hashlib.sha256(samples_path.read_bytes()).hexdigest(),
            total_rows=count,
        ),  # fmt: skip
    )
    aggregate = directory / f"{file_uuid}.json"
    aggregate.write_text(log.model_dump_json(exclude_none=True, indent=2) + "\n", encoding="utf-8")
    return EEEFiles(
        aggregate,
        samples_path,
        count,
        datastore_repo_file_path(collection, model_id, None, aggregate.name),
        samples_repo,
    )


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _strings(values: Mapping[str, Any]) -> dict[str, str]:
    """Key-value details as the schema wants them: every value a string, empty ones left out."""
    return {
        key: value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        for key, value in values.items() if value not in (None, "", {})
    }  # fmt: skip


def _source(collection: str, suite: str, config: Mapping[str, Any], digest: str) -> SourceDataPrivate:
    """The suite as the records name it: its name, the digest of its methods, the prompts the run followed."""
    return SourceDataPrivate(
        dataset_name=collection, source_type="other",
        additional_details=_strings(
            {"suite": suite, "suite_digest": digest, "prompts": config.get("prompts"), "pau_mcp_version": __version__}
        ),
    )  # fmt: skip


def _result_id(kind: str) -> str:
    return f"pau-mcp.{kind}"


def _result(
    collection: str, source: SourceDataPrivate, kind: str, runs: Sequence[Any], episodes: Sequence[tuple[str, EpisodeRow]],
    threshold: float, resamples: int, seed: int, config: Mapping[str, Any],
) -> EvaluationResult | None:  # fmt: skip
    """The mean of one score kind over methods (each method's mean over the epochs) with its uncertainty."""
    values = list(method_means(runs, kind).values())
    if not values:
        return None
    interval = bootstrap_interval(values, resamples=resamples, seed=seed)
    mean = interval.mean
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    title, description, lowest, highest, judged = _KINDS[kind]
    models = sorted({row.model for _, e in episodes if (row := e.scores.get(kind)) is not None and row.model})
    scoring = (
        LlmScoring(
            judges=[JudgeConfig(model_info=ModelInfo(name=m, id=m, developer=m.split("/", 1)[0])) for m in models],
            input_prompt=f"pau-mcp's {kind} prompt (prompts digest {config.get('prompts')})",
        )
        if judged and models
        else None
    )
    return EvaluationResult(
        evaluation_result_id=_result_id(kind),
        evaluation_name=f"{collection} {title.lower()}",
        source_data=source,
        metric_config=MetricConfig(
            evaluation_description=description,
            metric_id=f"pau_mcp.{kind}",
            metric_name=title,
            metric_kind="score" if kind == "judge" else "pass_rate",
            metric_unit="points" if kind == "judge" else "proportion",
            lower_is_better=False,
            score_type=ScoreType.continuous,
            min_score=lowest,
            max_score=highest,
            llm_scoring=scoring,
        ),  # fmt: skip
        score_details=ScoreDetails(
            score=mean,
            details=_strings({"methods": len(values), "epochs": len(runs), "pass_threshold": threshold}),
            uncertainty=Uncertainty(
                standard_error=StandardError(value=std / math.sqrt(len(values)), method="analytic"),
                confidence_interval=ConfidenceInterval(
                    lower=interval.low if interval.low is not None else mean,
                    upper=interval.high if interval.high is not None else mean,
                    confidence_level=0.95,
                    method="percentile bootstrap over methods",
                ),
                standard_deviation=std,
                num_samples=len(values),
                num_bootstrap_samples=resamples,
            ),
        ),  # fmt: skip
    )


def _pass_hat_result(
    collection: str, source: SourceDataPrivate, runs: Sequence[Any], threshold: float
) -> EvaluationResult:
    """pass^k of code match over the methods every epoch played (k = the epochs)."""
    k = len(runs)
    played = len(outcomes(runs, threshold))
    score = pass_hat(runs, threshold) or 0.0
    return EvaluationResult(
        evaluation_result_id=f"pau-mcp.codematch.pass_hat_{k}",
        evaluation_name=f"{collection} code match pass^{k}",
        source_data=source,
        metric_config=MetricConfig(
            evaluation_description=f"The chance that all {k} epochs of a method reach code match {threshold:g}.",
            metric_id="pass_hat_k",
            metric_name=f"pass^{k}",
            metric_kind="pass_rate",
            metric_unit="proportion",
            metric_parameters={"k": k, "threshold": threshold},
            lower_is_better=False,
            score_type=ScoreType.continuous,
            min_score=0.0,
            max_score=1.0,
        ),  # fmt: skip
        score_details=ScoreDetails(score=score, uncertainty=Uncertainty(num_samples=played)),
    )


def _instance(
    evaluation_id: str, model_id: str, collection: str, kind: str, run: str, episode: EpisodeRow, threshold: float
) -> InstanceLevelEvaluationLog | None:
    row = episode.scores.get(kind)
    if row is None or row.status != "scored" or row.value is None:
        return None
    messages, calls, answer_turn, description = _messages(episode.trajectory or [])
    value = float(row.value)
    correct = value >= 3 if kind == "judge" else value >= threshold - _TOLERANCE
    seconds = _seconds(episode.started_at, episode.finished_at)
    return InstanceLevelEvaluationLog(
        schema_version=SCHEMA_VERSION,
        evaluation_id=evaluation_id,
        model_id=model_id,
        evaluation_name=f"{collection} {_KINDS[kind][0].lower()}",
        evaluation_result_id=_result_id(kind),
        sample_id=f"{episode.method_id}#{run}",
        sample_hash=hashlib.sha256(episode.method_id.encode()).hexdigest(),
        interaction_type=InteractionType.agentic,
        input=Input(raw=f"Explore the hidden method {episode.method_id} through its MCP tool.", reference=[]),
        messages=messages or None,
        answer_attribution=[
            AnswerAttributionItem(
                turn_idx=answer_turn,
                source=f"messages[{answer_turn}].tool_calls[submit].description",
                extracted_value=description,
                extraction_method="submit tool call",
                is_terminal=True,
            )
        ],  # fmt: skip
        evaluation=Evaluation(score=value, is_correct=correct, num_turns=max(1, len(messages)), tool_calls_count=calls),
        token_usage=TokenUsage(
            input_tokens=episode.input_tokens,
            output_tokens=episode.output_tokens,
            total_tokens=episode.input_tokens + episode.output_tokens,
        ),  # fmt: skip
        performance=Performance(latency_ms=seconds * 1000) if seconds is not None else None,
        error=episode.error,
        metadata=_strings(
            {
                "run": run,
                "state": episode.state,
                "queries": episode.queries,
                "concluded": episode.concluded,
                "cost_usd": episode.cost_usd,
                "score_status": row.status,
                "score_model": row.model,
                "explanation": row.detail.get("reply") if kind == "judge" else row.detail.get("reason"),
                "failures": row.detail.get("failures"),
            }
        ),  # fmt: skip
    )


def _messages(trajectory: Sequence[Mapping[str, Any]]) -> tuple[list[Message], int, int, str]:
    """The transcript as turns, the tool calls made, the turn of the submission, and the description submitted."""
    turns: list[dict[str, Any]] = []
    calls = 0
    answer_turn, description = 0, ""
    open_call = ""
    for index, step in enumerate(trajectory):
        kind = step.get("kind")
        if kind == "model":
            if isinstance(step.get("prompt"), str) and step["prompt"]:
                turns.append({"role": "user", "content": step["prompt"]})
            native = [
                ToolCall(id=str(c.get("id") or f"call-{index}-{n}"), name=str(c.get("name") or ""),
                         arguments=_object(str(c.get("arguments") or "")))
                for n, c in enumerate(step.get("tool_calls") or []) if isinstance(c, dict)
            ]  # fmt: skip
            reasoning = step.get("reasoning") if isinstance(step.get("reasoning"), str) else None
            turns.append(
                {"role": "assistant", "content": str(step.get("reply") or ""), "reasoning_trace": reasoning,
                 "tool_calls": native or None}
            )  # fmt: skip
        elif kind in ("tool_call", "submit"):
            calls += 1
            name = "submit" if kind == "submit" else str(step.get("tool") or "")
            arguments = (
                {"description": step.get("description"), "code": step.get("code")}
                if kind == "submit" else step.get("arguments") if isinstance(step.get("arguments"), dict) else None
            )  # fmt: skip
            open_call = f"step-{index}"
            call = ToolCall(id=open_call, name=name, arguments=arguments)
            last = turns[-1] if turns else None
            if last is not None and last["role"] == "assistant" and not last.get("tool_calls"):
                last["tool_calls"] = [call]
            else:
                turns.append({"role": "assistant", "content": None, "tool_calls": [call]})
            if kind == "submit":
                answer_turn, description = len(turns) - 1, str(step.get("description") or "")
        elif kind == "tool_result":
            turns.append({"role": "tool", "content": str(step.get("text") or ""), "tool_call_id": [open_call]})
    return [Message(turn_idx=i, **turn) for i, turn in enumerate(turns)], calls, answer_turn, description


def _object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text or "{}")
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _seconds(started: str | None, finished: str | None) -> float | None:
    if not started or not finished:
        return None
    return max(0.0, _epoch(finished) - _epoch(started))
