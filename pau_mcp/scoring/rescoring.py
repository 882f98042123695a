"""Scoring saved submissions again, many at once: a run of the run store, a predictions file or a suite's gold
descriptions, each submission with the examples its code writer gets, the scores written to the run store and
summarised (``pau-mcp score``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio

from .. import eventloop
from ..knowledge import knowledge_kind, knowledge_label
from ..llm import LLMError, LLMNotConfigured
from ..manifests import ManifestError, ManifestStore, call_arguments, call_text
from ..manifests.importers.common import Progress, no_progress
from ..prompts import PromptsError
from ..protocol import Protocol, load_protocol, protocol_of, reference_example
from ..runstore import CallRow, RunStore, StoreError, shown_outcome
from .judge import summarise_ratings
from .predictions import Recorded, record_gold, record_predictions
from .records import record_scores
from .service import NothingToScore, Scorer, ScoreResult, UnknownMethod

if TYPE_CHECKING:
    from wasm_runtime import SandboxInterface

    from ..config import Settings
    from ..llm.pricing import Spend

__all__ = ["Notify", "RescoreRequest", "Rescored", "ScoreItem", "rescore", "submission_items"]

#: Told each note as it comes, with its kind: ``again`` (a file recorded before), ``note`` or ``skipped``.
Notify = Callable[[str, str], None]


def _quiet(kind: str, text: str) -> None:
    """The default ``Notify``: tells no one."""


@dataclass(frozen=True)
class RescoreRequest:
    """What to score again, and how.

    Attributes:
        source: A predictions file or a run's name; None with ``gold`` and ``suites``.
        kinds: The scores to compute (empty: every one a submission allows).
        gold: Give the code writer the gold description.
        suites: With ``gold`` and no source, the suites whose methods are scored; with a file of the reference's
            rows, the suites they come from.
        with_examples: Whether the code writer gets the examples (None: what the run did).
        knowledge: The knowledge combinations the code writer is handed, each a code-match score of its own.
        jobs: Submissions scored at once (None: the settings' LLM concurrency).
        run_name: The name a file or gold run is recorded as.
        use_cache: Read and write the LLM response cache.
        protocol_given: The protocol was asked for explicitly (so a run that followed another is refused).
    """

    source: str | None = None
    kinds: tuple[str, ...] = ()
    gold: bool = False
    suites: tuple[str, ...] = ()
    with_examples: bool | None = None
    knowledge: tuple[tuple[str, ...], ...] = ()
    jobs: int | None = None
    run_name: str | None = None
    use_cache: bool = True
    protocol_given: bool = False


@dataclass
class Rescored:
    """What scoring again came to.

    Attributes:
        status: ``scored``; ``usage`` (the request is wrong: the message says what to change); ``error``.
        message: Why nothing (more) was scored, unless scored.
        summary: The run, counts, mean scores and the LLM's spend (``pau-mcp score --json``).
        errors: One line per score that could not be made (each is recorded with its reason).
    """

    status: Literal["scored", "usage", "error"]
    message: str = ""
    summary: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ScoreItem:
    """A saved submission with the examples its code writer gets."""

    submission_id: int
    method_id: str
    description: str
    code: str | None
    examples: list[tuple[str, ...]]
    initial: list[tuple[str, ...]]  # the method's initial examples: the gold code writer's under the reference


@dataclass(frozen=True)
class _Prepared:
    name: str
    protocol: Protocol
    with_examples: bool
    items: list[ScoreItem]


_Planned = list[tuple[ScoreItem, tuple[str, ...], tuple[str, ...] | None]]


def _initial_examples(manifests: ManifestStore, method_id: str, reference: bool = False) -> list[tuple[str, ...]]:
    """A method's initial examples as an evaluation episode observed them (before runs stored their examples);
    under the reference protocol as its dataset lists them (its ``all_examples`` column), the text it keeps."""
    try:
        method = manifests.method(method_id)
    except ManifestError:
        return []
    found: list[tuple[str, ...]] = []
    for case in method.examples:
        if case.outcome is None:
            continue
        literal = call_arguments(call_text(method.entry, case.input)) or case.input
        found.append(
            reference_example(literal, case.outcome.shown(), case.original).listed
            if reference
            else (literal, case.outcome.shown())
        )
    return found


def submission_items(
    store: RunStore, run_id: int, kind: str, manifests: ManifestStore, reference: bool = False
) -> list[ScoreItem]:
    """Every submission of a run with the examples its code writer gets: those the run gave it (stored with the
    episode), else the session's counted calls (after the method's initial examples, for an evaluation run, as
    its episodes saw them), each imported example exactly as its file held it; for a gold run, the method's
    initial examples."""
    episodes = {e.submission_id: e for e in store.episodes(run_id) if e.submission_id is not None}
    calls: dict[tuple[int, str], list[CallRow]] = {}
    for call in store.calls(run_id):
        if call.counted:
            calls.setdefault((call.session_id, call.method_id), []).append(call)
    items = []
    for submission in store.submissions(run_id, answers_only=True):  # not an attempt a kill cut short
        episode = episodes.get(submission.id)
        if episode is not None and episode.examples is not None:
            examples = [tuple(str(part) for part in e) for e in episode.examples]
        else:
            examples = []
            for call in calls.get((submission.session_id, submission.method_id), []):
                imported = (call.outcome or {}).get("imported")
                examples.append(tuple(imported) if imported else (call.arguments, shown_outcome(call)))
            if kind in ("eval", "gold"):
                examples = _initial_examples(manifests, submission.method_id, reference) + examples
        items.append(
            ScoreItem(
                submission_id=submission.id,
                method_id=submission.method_id,
                description=submission.description or "",
                code=submission.code,
                examples=examples,
                initial=_initial_examples(manifests, submission.method_id, reference),
            )
        )
    return items


def _source_run(
    request: RescoreRequest, settings: Settings, store: RunStore, manifests: ManifestStore, notify: Notify
) -> Recorded:
    """The run to score: a predictions file recorded as one, a run by name, or the gold descriptions' run."""
    source = request.source
    if source is not None and Path(source).is_file():
        found = record_predictions(
            store, Path(source), run_name=request.run_name, protocol=settings.protocol, manifests=manifests,
            suites=request.suites, with_examples=request.with_examples,
        )  # fmt: skip
        if found.status == "again":
            notify("again", f"{Path(source)} is already recorded as run {found.name}; scoring its submissions again")
        return found
    if source is not None:
        try:
            return Recorded("again", source, store.run_id(source))
        except StoreError as exc:
            return Recorded("error", message=f"{source} is neither a file nor a run: {exc}")
    if request.gold and request.suites:
        return record_gold(
            store, request.suites, run_name=request.run_name, protocol=settings.protocol, manifests=manifests,
            with_examples=request.with_examples,
        )  # fmt: skip
    return Recorded("usage", message="give FILE_OR_RUN (a predictions file or a run name), or --gold --suite NAME")


def _run_settings(
    store: RunStore, run_id: int, name: str, kind: str, settings: Settings, request: RescoreRequest, notify: Notify
) -> tuple[str, bool] | Rescored:
    """The protocol and the examples setting to re-score a run with: its own, unless the request says otherwise;
    refused when the request names another protocol than the run followed."""
    config = store.run_config(run_id)
    protocol = protocol_of(config)
    if settings.protocol != protocol:
        if request.protocol_given:
            return Rescored(
                "usage",
                f"run {name} followed the {protocol} protocol; scoring it under {settings.protocol} would mix two "
                f"protocols' prompts and rules. Leave out --protocol, or export it (`pau-mcp runs export {name}`) "
                "and score the file as a run of its own",
            )
        notify("note", f"run {name} followed the {protocol} protocol: scored under it")
    with_examples = request.with_examples
    if with_examples is None:
        # Evaluation runs always gave the code writer the agent's examples, before they recorded that too.
        with_examples = bool(config.get("with_examples", kind == "eval"))
    return protocol, with_examples


def _prepare(
    request: RescoreRequest, settings: Settings, store: RunStore, manifests: ManifestStore, notify: Notify
) -> _Prepared | Rescored:
    """The run, its protocol and its submissions, or why they cannot be scored."""
    found = _source_run(request, settings, store, manifests, notify)
    if found.status == "usage" or found.status == "error":
        return Rescored(found.status, found.message)
    name, run_id = found.name, found.run_id
    recorded = store.run(run_id)
    kind = recorded.kind if recorded is not None else ""
    if recorded is not None and recorded.config.get("mode") == "tasks":
        return Rescored(
            "usage", f"run {name} is a task run: its answers were checked when it ran; see `pau-mcp report {name}`"
        )
    chosen = _run_settings(store, run_id, name, kind, settings, request, notify)
    if isinstance(chosen, Rescored):
        return chosen
    protocol_name, with_examples = chosen
    if request.knowledge and protocol_name == "reference":
        return Rescored("usage", "--knowledge needs this project's prompts; the reference protocol has one code prompt")
    try:
        protocol = load_protocol(protocol_name, settings.data_dir)
    except PromptsError as exc:
        return Rescored("error", str(exc))
    items = submission_items(store, run_id, kind, manifests, protocol.reference)
    if not items:
        return Rescored("error", f"run {name} has no submissions to score")
    return _Prepared(name, protocol, with_examples, items)


def _plan(scorer: Scorer, items: list[ScoreItem], request: RescoreRequest, skipped: list[str]) -> _Planned | Rescored:
    """Each submission with the scores it gets (one entry per knowledge combination); those with none in
    ``skipped``, with why."""
    plan: _Planned = []
    for item in items:
        try:
            scorer.method(item.method_id)
        except UnknownMethod as exc:
            return Rescored("error", f"submission {item.submission_id}: {exc}")
        combinations: list[tuple[str, ...] | None] = [*request.knowledge] if request.knowledge else [None]
        for combination in combinations:
            requested = request.kinds or (("codematch",) if request.gold or combination else None)
            try:
                chosen = scorer.kinds_for(item.description, item.code, requested, request.gold, combination)
            except NothingToScore as exc:
                what = f" with {'+'.join(combination)}" if combination else ""
                skipped.append(f"submission {item.submission_id} ({item.method_id}){what}: {exc}")
                continue
            plan.append((item, chosen, combination))
    return plan


def _check_models(
    scorer: Scorer, settings: Settings, request: RescoreRequest, plan: _Planned, notify: Notify
) -> Rescored | None:
    """Refused when a chosen score needs a model not configured, or a model cannot be reached: one cheap check per
    model before any scoring, so a wrong key, URL or model name fails now, in one line."""
    chosen_kinds = {kind for _, chosen, _ in plan for kind in chosen}
    try:
        scorer.check(chosen_kinds)
    except LLMNotConfigured as exc:
        hint = "; or score the submitted code alone, which needs no model: --scores direct"
        return Rescored("usage", f"{exc}{hint}" if not request.kinds and "direct" in chosen_kinds else str(exc))
    models = [
        m
        for kind, m in (("judge", settings.judge_model), ("codematch", settings.coder_model))
        if kind in chosen_kinds and m
    ]
    llm = scorer.llm  # set whenever a chosen kind needs a model: ``check`` said so above
    try:
        for warning in eventloop.run(llm.preflight, models) if models and llm is not None else ():
            notify("note", warning)
    except LLMError as exc:
        return Rescored("error", str(exc))
    return None


async def _score_all(
    scorer: Scorer, store: RunStore, prepared: _Prepared, plan: _Planned, request: RescoreRequest, limit: int,
    progress: Progress,
) -> tuple[list[ScoreResult], set[int], LLMError | None]:  # fmt: skip
    """Score the plan, ``limit`` at once, recording each result; stops at the first LLM error (every other
    submission would fail the same way)."""
    results: list[ScoreResult] = []
    scored_ids: set[int] = set()
    failure: list[LLMError] = []
    limiter = anyio.CapacityLimiter(limit)
    reference = prepared.protocol.reference
    with progress(f"scoring {prepared.name}", len(plan)) as advance:
        async with anyio.create_task_group() as group:

            async def one(item: ScoreItem, chosen: tuple[str, ...], combination: tuple[str, ...] | None) -> None:
                async with limiter:
                    try:
                        # The reference's gold code writer gets the method's initial examples, never a run's.
                        given = item.initial if request.gold and reference else item.examples
                        result = await scorer.score(
                            item.method_id, item.description, item.code, kinds=chosen, gold=request.gold,
                            examples=given if prepared.with_examples else None, counterexample=True,
                            knowledge=combination,
                        )  # fmt: skip
                    except LLMError as exc:
                        failure.append(exc)
                        group.cancel_scope.cancel()
                        return
                record_scores(store, item.submission_id, result, with_examples=prepared.with_examples)
                results.append(result)
                scored_ids.add(item.submission_id)
                advance()

            for item, chosen, combination in plan:
                group.start_soon(one, item, chosen, combination)
    await scorer.aclose()
    return results, scored_ids, failure[0] if failure else None


def rescore(
    request: RescoreRequest,
    settings: Settings,
    store: RunStore,
    *,
    sandbox: Callable[[], SandboxInterface],
    progress: Progress = no_progress,
    notify: Notify = _quiet,
) -> Rescored:
    """Score saved submissions again and record the scores in the run store.

    A run is re-scored with its own protocol and settings (the examples its code writer had); a file is recorded as
    a run of its own first, under the settings' protocol.

    Args:
        request: What to score, and how.
        settings: Models, price table, cache, sandbox limits, manifests and protocol.
        store: The run store the submissions come from and the scores go to.
        sandbox: Makes the sandbox the code runs in, once there is something to score.
        progress: A progress bar factory.
        notify: Told each note as it comes (a file recorded before, a protocol kept, a model's warning, a
            submission skipped).
    """
    manifests = ManifestStore(settings.manifests)
    prepared = _prepare(request, settings, store, manifests, notify)
    if isinstance(prepared, Rescored):
        return prepared
    scorer = Scorer.from_settings(settings, use_cache=request.use_cache, sandbox=sandbox(), protocol=prepared.protocol)
    if scorer.llm is not None:  # a judge that samples (the reference protocol's) is replayed only for this run
        scorer.llm.sample_scope = prepared.name
    skipped: list[str] = []
    plan = _plan(scorer, prepared.items, request, skipped)
    if isinstance(plan, Rescored):
        return plan
    refused = _check_models(scorer, settings, request, plan, notify)
    if refused is not None:
        return refused
    for line in skipped:
        notify("skipped", line)
    limit = request.jobs or settings.llm_concurrency
    results, scored_ids, failure = eventloop.run(_score_all, scorer, store, prepared, plan, request, limit, progress)
    if failure is not None:
        return Rescored("error", f"scoring stopped after {len(results)} of {len(plan)} submissions: {failure}")
    assert scorer.llm is not None
    summary = _summary(results, skipped, scorer.llm.spend, prepared.name, len(scored_ids))
    return Rescored("scored", summary=summary, errors=_errors(results))


def _codematch_kind(result: ScoreResult) -> str:
    if result.knowledge:
        return knowledge_kind(result.knowledge, result.gold)
    return "codematch_gold" if result.gold else "codematch"


def _errors(results: list[ScoreResult]) -> list[str]:
    """One line per score that could not be made, with its reason."""
    return [
        f"{result.method_id} {kind}: {' '.join(str(part.reason or 'no reason was recorded').split())}"
        for result in results
        for kind, part in (
            ("judge", result.judge),
            (_codematch_kind(result), result.codematch),
            ("direct", result.direct),
        )
        if part is not None and part.status == "error"
    ]


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _fractions(parts: list[Any]) -> dict[str, Any]:
    fractions = [p.fraction for p in parts if p is not None and p.status == "scored" and p.fraction is not None]
    return {"count": len(parts), "mean": _mean(fractions), "errors": sum(p.status == "error" for p in parts)}


def _summary(
    results: list[ScoreResult], skipped: list[str], spend: Spend, run_name: str, submissions: int
) -> dict[str, Any]:
    judged = [r.judge for r in results if r.judge is not None]
    ratings = summarise_ratings(judged, unscored_as=1)
    summary: dict[str, Any] = {
        "run": run_name,
        "submissions": submissions,
        "skipped": len(skipped),
        "judge": {
            "count": len(judged),
            "mean_scored": ratings.mean_scored,
            "mean_unscored_as_1": ratings.mean,
            "scored": ratings.scored,
            "unscored": ratings.unscored,
            "errors": ratings.errors,
            "note": ratings.note(),
        },
    }
    for kind in ("codematch", "direct"):
        parts = [getattr(r, kind) for r in results if getattr(r, kind) is not None and not r.knowledge]
        summary[kind] = _fractions(parts)
    combinations = dict.fromkeys(knowledge_label(r.knowledge) for r in results if r.knowledge)
    if combinations:
        summary["knowledge"] = {
            label: _fractions([r.codematch for r in results if r.knowledge and knowledge_label(r.knowledge) == label])
            for label in combinations
        }
    summary["llm"] = {
        "calls": spend.calls,
        "cached_calls": spend.cached_calls,
        "input_tokens": spend.usage.input_tokens,
        "output_tokens": spend.usage.output_tokens,
        "cost_usd": round(spend.cost_usd, 6),
        "unpriced_models": sorted(spend.unpriced),
    }
    return summary
