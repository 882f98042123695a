"""``pau-mcp score`` (score or re-score saved submissions) and ``pau-mcp scorer`` (the scoring endpoint)."""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import click
from click.core import ParameterSource
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from rich.markup import escape

from .. import eventloop
from ..config import options
from ..llm import LLMError, LLMNotConfigured
from ..manifests import ManifestError, call_arguments, call_text
from ..prompts import PromptsError
from ..protocol import load_protocol, protocol_of, reference_example
from ..runstore import CallRecord, CallRow, RunStore, StoreError, shown_outcome
from ..sandboxing import shared_sandbox
from ..scoring.records import record_scores
from .common import (
    CommandFunction,
    bar,
    err,
    make_sandbox,
    manifest_store,
    run_store,
    settings_from,
    show_llm_notices,
    step_printer,
)

__all__ = ["no_cache_option", "score", "scorer"]

_LLM_SETTINGS = (
    "judge_model", "coder_model", "pricing", "llm_timeout_s", "llm_deadline_s", "llm_max_reply_mb", "llm_concurrency", "llm_retries", "model_capabilities",
)  # fmt: skip
_SANDBOX_SETTINGS = (
    "timeout_s", "memory_mb", "max_output_kb", "cache_dir", "workers", "sandbox_engine", "score_seconds",
)  # fmt: skip


def no_cache_option(function: CommandFunction) -> CommandFunction:
    """The ``--no-cache`` flag: neither read nor write the LLM response cache."""
    return click.option(
        "--no-cache", is_flag=True, help="Neither read nor write the LLM response cache (DATA_DIR/llm-cache.db)."
    )(function)


def _log_to_stderr() -> None:
    logger = logging.getLogger("pau_mcp")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("pau-mcp: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)


# -- what gets scored ---------------------------------------------------------------------------


class _PredictionLine(BaseModel):
    """One line of a predictions file: this project's export (with ``id``) or the reference benchmark's own rows.

    The reference's rows have no ``id`` (they are matched to methods by their gold description), count queries
    in ``n_queries``, hold ``all_examples`` as a JSON string of ``[input, output, error]`` triples, and its
    code-prediction files hold the code it extracted in ``predicted_code`` (read as ``code``: direct code).
    """

    model_config = ConfigDict(extra="allow")

    id: str | None = Field(None, min_length=1)
    predicted_description: str | None = ""
    num_queries: int | None = None
    n_queries: int | None = None
    all_examples: list[list[Any]] = Field(default_factory=list)
    code: str | None = None
    predicted_code: str | None = None
    description: str | None = None
    true_description: str | None = None
    header: str | None = None

    @field_validator("all_examples", mode="before")
    @classmethod
    def _decode(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):  # the reference stores the list as JSON text
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"all_examples is text but not JSON ({exc.msg})") from None
        if isinstance(value, list) and any(not isinstance(e, (list, tuple)) or len(e) not in (2, 3) for e in value):
            raise ValueError("each example must be [input, output] or [input, output, error]")
        return value

    @property
    def gold(self) -> str | None:
        """The gold description the line carries (the reference's rows have one), stripped."""
        text = self.description or self.true_description
        return text.strip() if text else None


@dataclass(frozen=True)
class _Item:
    submission_id: int
    method_id: str
    description: str
    code: str | None
    examples: list[tuple[str, ...]]
    initial: list[tuple[str, ...]]  # the method's initial examples: the gold code writer's under the reference


def _examples_default(with_examples: bool | None, settings: Any) -> bool:
    """Whether a new file or gold run gives its code writer examples: the reference's always did."""
    return with_examples if with_examples is not None else settings.protocol == "reference"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _resolve_ids(
    path: Path, lines: list[tuple[int, _PredictionLine]], suites: tuple[str, ...], settings: Any
) -> list[str]:
    """Each line's method id: its ``id``, or for the reference's rows the method of ``suites`` with its gold
    description (and header), a tie broken by the row's position (the importers' ``original_id``)."""
    if all(line.id for _, line in lines):
        return [str(line.id) for _, line in lines]
    if not suites:
        raise click.UsageError(
            f"{path} has lines without an id (the reference benchmark's own layout): say which suite its rows come "
            "from with --suite, e.g. --suite pau-test (`pau-mcp import pau`)"
        )
    try:
        methods = list(manifest_store(settings).methods(suites))
    except ManifestError as exc:
        raise click.ClickException(str(exc)) from None
    by_gold: dict[str, list[Any]] = {}
    for method in methods:
        by_gold.setdefault(method.description.strip(), []).append(method)
    ids = []
    for index, (number, line) in enumerate(lines):
        if line.id:
            ids.append(line.id)
            continue
        found = by_gold.get(line.gold or "", []) if line.gold else methods
        if line.header and len(found) > 1:
            found = [m for m in found if m.header == line.header.strip()]
        if len(found) > 1:
            found = [m for m in found if (m.provenance.original_id or "").endswith(f"/{index}")]
        if len(found) != 1:
            what = "no method" if not found else f"{len(found)} methods"
            raise click.ClickException(
                f"{path}:{number}: {what} of {', '.join(suites)} "
                + ("has this line's gold description" if line.gold else "matches this line (it has no description)")
                + "; is it the suite the predictions were made on?"
            )
        ids.append(found[0].id)
    return ids


def _import_file(
    store: RunStore,
    path: Path,
    run_name: str | None,
    settings: Any,
    suites: tuple[str, ...],
    with_examples: bool | None,
) -> tuple[str, int]:
    """Record a predictions file as a run of its own (once per file content), so its scores have a home."""
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    name = run_name or f"file-{path.stem}-{digest[:8]}"
    existing = _recorded(store, name)
    if existing is not None:
        err.print(f"[dim]{path} is already recorded as run {name}; scoring its submissions again[/dim]")
        return name, existing
    lines: list[tuple[int, _PredictionLine]] = []
    for number, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            lines.append((number, _PredictionLine.model_validate_json(line)))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(line)"
            raise click.ClickException(
                f"{path}:{number}: {where}: {first['msg'].removeprefix('Value error, ')}"
            ) from None
    if not lines:
        raise click.ClickException(f"{path} holds no predictions (expected one JSON object per line)")
    ids = _resolve_ids(path, lines, suites, settings)
    config = {
        "file": str(path.resolve()), "sha256": digest, "protocol": settings.protocol,
        "with_examples": _examples_default(with_examples, settings),
    }  # fmt: skip
    run_id = store.ensure_run(name, "file", config)
    for (number, record), method_id in zip(lines, ids, strict=True):
        session = store.ensure_session(run_id, f"line-{number}", "file", path.name)
        for example in record.all_examples:
            raised = len(example) > 2 and example[2] not in (None, "None")
            store.record_call(
                session,
                CallRecord(
                    method_id=method_id,
                    tool="import",
                    arguments=_text(example[0]),
                    counted=True,
                    status="error" if raised else "ok",
                    value=None if raised else _text(example[1]),
                    error_message=_text(example[2]) if raised else None,
                    # The example exactly as the file holds it: the reference protocol's code writer gets it so.
                    outcome={"imported": [_text(part) for part in example]},
                ),
            )
        store.record_submission(
            session, method_id, record.predicted_description or "", record.code or record.predicted_code
        )
    return name, run_id


def _gold_run(
    store: RunStore, settings: Any, suites: tuple[str, ...], run_name: str | None, with_examples: bool | None
) -> tuple[str, int]:
    """A run with one submission per method of the suites, its description the gold one (its code writer gets the
    initial examples when it records ``with_examples``, as the reference's does)."""
    name = run_name or f"gold-{'-'.join(suites)}"
    existing = _recorded(store, name)
    if existing is not None:
        return name, existing
    try:
        methods = list(manifest_store(settings).methods(suites))
    except ManifestError as exc:
        raise click.ClickException(str(exc)) from None
    config = {
        "suites": list(suites), "protocol": settings.protocol,
        "with_examples": _examples_default(with_examples, settings),
    }  # fmt: skip
    run_id = store.ensure_run(name, "gold", config)
    session = store.ensure_session(run_id, "gold", "gold")
    for method in methods:
        store.record_submission(session, method.id, method.description, None)
    return name, run_id


def _initial_examples(manifests: Any, method_id: str, reference: bool = False) -> list[tuple[str, ...]]:
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


def _recorded(store: RunStore, name: str) -> int | None:
    """The id of a run recorded before under ``name`` with submissions to score again, or None."""
    run_id = store.find_run(name)
    run = store.run(run_id) if run_id is not None else None
    return run.id if run is not None and run.submissions else None


def _items(store: RunStore, run_id: int, kind: str, manifests: Any, reference: bool = False) -> list[_Item]:
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
            _Item(
                submission_id=submission.id,
                method_id=submission.method_id,
                description=submission.description or "",
                code=submission.code,
                examples=examples,
                initial=_initial_examples(manifests, submission.method_id, reference),
            )
        )
    return items


def _run_settings(
    store: RunStore, run_id: int, name: str, kind: str, settings: Any, with_examples: bool | None
) -> tuple[str, bool]:
    """The protocol and the examples setting to re-score a run with: its own, unless the user says otherwise.

    Raises:
        click.UsageError: ``--protocol`` names another protocol than the run followed.
    """
    config = store.run_config(run_id)
    protocol = protocol_of(config)
    source = click.get_current_context().get_parameter_source("protocol")
    if settings.protocol != protocol:
        if source is ParameterSource.COMMANDLINE:
            raise click.UsageError(
                f"run {name} followed the {protocol} protocol; scoring it under {settings.protocol} would mix two "
                f"protocols' prompts and rules. Leave out --protocol, or export it (`pau-mcp runs export {name}`) "
                "and score the file as a run of its own"
            )
        err.print(f"[yellow]note:[/yellow] run {name} followed the {protocol} protocol: scored under it")
    if with_examples is None:
        # Evaluation runs always gave the code writer the agent's examples, before they recorded that too.
        with_examples = bool(config.get("with_examples", kind == "eval"))
    return protocol, with_examples


# -- pau-mcp score ------------------------------------------------------------------------------


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _summary(results: list[Any], skipped: list[str], spend: Any, run_name: str, submissions: int) -> dict[str, Any]:
    from ..knowledge import knowledge_label
    from ..scoring import summarise_ratings

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


def _fractions(parts: list[Any]) -> dict[str, Any]:
    fractions = [p.fraction for p in parts if p is not None and p.status == "scored" and p.fraction is not None]
    return {"count": len(parts), "mean": _mean(fractions), "errors": sum(p.status == "error" for p in parts)}


def _dollars(amount: float) -> str:
    return f"${amount:.2f}" if amount >= 1 else f"${amount:.6f}".rstrip("0").rstrip(".") if amount else "$0"


def _print_summary(summary: dict[str, Any], gold: bool) -> None:
    def fmt(value: float | None, digits: int = 3) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    click.echo(
        f"run {summary['run']}: {summary['submissions']} submissions scored"
        + (f", {summary['skipped']} skipped" if summary["skipped"] else "")
    )
    judge = summary["judge"]
    if judge["count"]:
        click.echo(
            f"judge:       mean {fmt(judge['mean_scored'], 2)} over {judge['scored']} scored ({judge['unscored']} unscored, {judge['errors']} errors)"
        )
        if judge["unscored"]:
            click.echo(f"             mean {fmt(judge['mean_unscored_as_1'], 2)} with {judge['note']}")
    label = "code match (gold description):" if gold else "code match:"
    for kind, name in (("codematch", label), ("direct", "direct code:")):
        part = summary[kind]
        if part["count"]:
            click.echo(
                f"{name:<12} mean {fmt(part['mean'])} over {part['count'] - part['errors']} scored; {part['errors']} errors"
            )
    for combination, part in summary.get("knowledge", {}).items():
        source = "gold description" if gold else "the run's descriptions"
        click.echo(
            f"code match from {combination} ({source}): mean {fmt(part['mean'])} over "
            f"{part['count'] - part['errors']} scored; {part['errors']} errors"
        )
    llm = summary["llm"]
    unpriced = f" (unpriced, counted as $0: {', '.join(llm['unpriced_models'])})" if llm["unpriced_models"] else ""
    click.echo(
        f"LLM:         {llm['calls']} calls ({llm['cached_calls']} from the cache), "
        f"{llm['input_tokens']:,} input + {llm['output_tokens']:,} output tokens, {_dollars(llm['cost_usd'])}{unpriced}"
    )


@click.command()
@click.argument("source", required=False, metavar="[FILE_OR_RUN]")
@click.option(
    "--scores",
    "kinds",
    multiple=True,
    type=click.Choice(["judge", "codematch", "direct"]),
    help="Scores to compute (repeatable; default: every one a submission allows).",
)
@click.option(
    "--gold", is_flag=True, help="Give the code writer the gold description: each method's upper bound for code match."
)
@click.option(
    "--suite",
    "suites",
    multiple=True,
    help="With --gold and no FILE_OR_RUN: score every method of this suite (repeatable).",
)
@click.option(
    "--with-examples/--without-examples",
    default=None,
    help="Give the code writer the calls the agent observed (as the reference does; for the gold description, the "
    "initial examples), or not. Default: what the run did (an evaluation run gave them); for a new file or gold run, "
    "with them under --protocol reference, else without.",
)
@click.option(
    "--knowledge",
    "knowledge_texts",
    multiple=True,
    metavar="COMPONENTS",
    help="Hand the code writer only these components: signature, description and examples, comma-separated, in any "
    "combination, or `all` for every combination (repeatable). Each is a code-match score of its own "
    "(codematch:COMPONENTS; with --gold, from the gold description). Examples are the agent's, else the method's "
    "initial ones.",
)
@click.option("--jobs", type=click.IntRange(1, 1024), help="Submissions scored at once (default: --llm-concurrency).")
@click.option(
    "--run", "run_name", help="Name of the run a predictions file is recorded as (default: file-<stem>-<hash>)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@no_cache_option
@options("db", "data_dir", "manifests", "protocol", *_LLM_SETTINGS, *_SANDBOX_SETTINGS)
def score(
    source: str | None, kinds: tuple[str, ...], gold: bool, suites: tuple[str, ...], with_examples: bool | None,
    knowledge_texts: tuple[str, ...], jobs: int | None,
    run_name: str | None, as_json: bool, no_cache: bool, **values: object,
) -> None:  # fmt: skip
    """Score or re-score saved submissions: a run of the run store by name, or a predictions JSONL file.

    A run is re-scored with its own protocol and settings (the examples its code writer had). A file (one
    {"id", "predicted_description", "num_queries", "all_examples", "code"?} per line, as `pau-mcp runs export`
    writes, or the reference benchmark's own rows, matched to the methods of --suite by gold description) is
    recorded as a run of its own first, under --protocol. Scores are written to the run store; a summary
    follows. Exits 1 when some score could not be made (each is recorded with its reason).
    """
    from ..scoring import NothingToScore, Scorer, UnknownMethod

    settings = settings_from(values)
    combinations = _knowledge(knowledge_texts, kinds)
    show_llm_notices()
    try:
        store = run_store(settings)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    if source is not None and Path(source).is_file():
        name, run_id = _import_file(store, Path(source), run_name, settings, suites, with_examples)
    elif source is not None:
        try:
            name, run_id = source, store.run_id(source)
        except StoreError as exc:
            raise click.ClickException(f"{source} is neither a file nor a run: {exc}") from None
    elif gold and suites:
        name, run_id = _gold_run(store, settings, suites, run_name, with_examples)
    else:
        raise click.UsageError("give FILE_OR_RUN (a predictions file or a run name), or --gold --suite NAME")
    recorded = store.run(run_id)
    kind = recorded.kind if recorded is not None else ""
    if recorded is not None and recorded.config.get("mode") == "tasks":
        raise click.UsageError(
            f"run {name} is a task run: its answers were checked when it ran; see `pau-mcp report {name}`"
        )
    protocol_name, with_examples = _run_settings(store, run_id, name, kind, settings, with_examples)
    if combinations and protocol_name == "reference":
        raise click.UsageError("--knowledge needs this project's prompts; the reference protocol has one code prompt")
    try:
        protocol = load_protocol(protocol_name, settings.data_dir)
    except PromptsError as exc:
        raise click.ClickException(str(exc)) from None
    items = _items(store, run_id, kind, manifest_store(settings), protocol.reference)
    if not items:
        raise click.ClickException(f"run {name} has no submissions to score")

    # Many submissions at once: worker processes, as fresh instances do not scale over threads of one process.
    sandbox = make_sandbox(settings, progress=step_printer(), processes=True)
    scorer_ = Scorer.from_settings(settings, use_cache=not no_cache, sandbox=sandbox, protocol=protocol)
    if scorer_.llm is not None:  # a judge that samples (the reference protocol's) is replayed only for this run
        scorer_.llm.sample_scope = name
    plan: list[tuple[_Item, tuple[str, ...], tuple[str, ...] | None]] = []
    skipped: list[str] = []
    for item in items:
        try:
            scorer_.method(item.method_id)
        except UnknownMethod as exc:
            raise click.ClickException(f"submission {item.submission_id}: {exc}") from None
        chosen_combinations: list[tuple[str, ...] | None] = [*combinations] if combinations else [None]
        for combination in chosen_combinations:
            requested = kinds or (("codematch",) if gold or combination else None)
            try:
                chosen = scorer_.kinds_for(item.description, item.code, requested, gold, combination)
            except NothingToScore as exc:
                what = f" with {'+'.join(combination)}" if combination else ""
                skipped.append(f"submission {item.submission_id} ({item.method_id}){what}: {exc}")
                continue
            plan.append((item, chosen, combination))
    chosen_kinds = {kind for _, chosen, _ in plan for kind in chosen}
    try:
        scorer_.check(chosen_kinds)
    except LLMNotConfigured as exc:
        hint = "; or score the submitted code alone, which needs no model: --scores direct"
        raise click.UsageError(f"{exc}{hint}" if not kinds and "direct" in chosen_kinds else str(exc)) from None
    # One cheap check per model before any scoring: a wrong key, URL or model name fails now, in one line.
    models = [
        m
        for kind, m in (("judge", settings.judge_model), ("codematch", settings.coder_model))
        if kind in chosen_kinds and m
    ]
    llm = scorer_.llm  # set whenever a chosen kind needs a model: ``check`` said so above
    try:
        for warning in eventloop.run(llm.preflight, models) if models and llm is not None else ():
            err.print(f"[yellow]note:[/yellow] {warning}")
    except LLMError as exc:
        raise click.ClickException(str(exc)) from None
    for line in skipped:
        err.print(f"[yellow]skipped[/yellow] {line}")

    results: list[Any] = []
    scored_ids: set[int] = set()
    failure: list[LLMError] = []

    async def run_all() -> None:
        limiter = anyio.CapacityLimiter(jobs or settings.llm_concurrency)
        with bar(f"scoring {name}", len(plan)) as advance:
            async with anyio.create_task_group() as group:

                async def one(item: _Item, chosen: tuple[str, ...], combination: tuple[str, ...] | None) -> None:
                    async with limiter:
                        try:
                            # The reference's gold code writer gets the method's initial examples, never a run's.
                            given = item.initial if gold and protocol.reference else item.examples
                            result = await scorer_.score(
                                item.method_id, item.description, item.code, kinds=chosen, gold=gold,
                                examples=given if with_examples else None, counterexample=True,
                                knowledge=combination,
                            )  # fmt: skip
                        except LLMError as exc:  # fatal: every other submission would fail the same way
                            failure.append(exc)
                            group.cancel_scope.cancel()
                            return
                    record_scores(store, item.submission_id, result, with_examples=with_examples)
                    results.append(result)
                    scored_ids.add(item.submission_id)
                    advance()

                for item, chosen, combination in plan:
                    group.start_soon(one, item, chosen, combination)
        await scorer_.aclose()

    eventloop.run(run_all)
    if failure:
        raise click.ClickException(f"scoring stopped after {len(results)} of {len(plan)} submissions: {failure[0]}")
    assert scorer_.llm is not None
    summary = _summary(results, skipped, scorer_.llm.spend, name, len(scored_ids))
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        _print_summary(summary, gold)
    errors = [
        f"{result.method_id} {kind}: {' '.join(str(part.reason or 'no reason was recorded').split())}"
        for result in results
        for kind, part in (
            ("judge", result.judge),
            (_codematch_kind(result), result.codematch),
            ("direct", result.direct),
        )
        if part is not None and part.status == "error"
    ]
    for line in errors[:10]:
        err.print(f"[red]error[/red] {escape(line)}", highlight=False, soft_wrap=True)
    if len(errors) > 10:
        err.print(f"[red]error[/red] ... and {len(errors) - 10} more (each is recorded with its reason)")
    if errors:
        sys.exit(1)


def _codematch_kind(result: Any) -> str:
    from ..knowledge import knowledge_kind

    if getattr(result, "knowledge", None):
        return knowledge_kind(result.knowledge, getattr(result, "gold", False))
    return "codematch_gold" if getattr(result, "gold", False) else "codematch"


def _knowledge(texts: tuple[str, ...], kinds: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The knowledge combinations ``--knowledge`` asks for, each once, in the order given (``all``: every one)."""
    from ..knowledge import all_combinations, parse_knowledge

    if not texts:
        return []
    if set(kinds) - {"codematch"}:
        raise click.UsageError("--knowledge chooses what the code writer gets: it goes with --scores codematch only")
    found: list[tuple[str, ...]] = []
    for text in texts:
        try:
            chosen = all_combinations() if text.strip().lower() == "all" else [parse_knowledge(text)]
        except ValueError as exc:
            raise click.UsageError(f"--knowledge {text}: {exc}") from None
        found += [combination for combination in chosen if combination not in found]
    return found


# -- pau-mcp scorer -----------------------------------------------------------------------------


@click.command()
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to listen on (non-loopback needs --scorer-token)."
)
@click.option(
    "--port", default=8100, show_default=True, type=click.IntRange(0, 65535), help="Port (0: pick a free one)."
)
@click.option(
    "--max-request-kb",
    default=1024,
    show_default=True,
    type=click.IntRange(1, 1024 * 1024),
    help="Largest request body, in KiB (413 beyond).",
)
@no_cache_option
@options(
    "manifests", "data_dir", "scorer_token", "max_connections", "read_timeout_s", *_LLM_SETTINGS, *_SANDBOX_SETTINGS,
    "auth", "issuer", "resource", "introspection_client", "introspection_secret", "clock_skew_s",
)  # fmt: skip
def scorer(host: str, port: int, max_request_kb: int, no_cache: bool, **values: object) -> None:
    """Serve the scorer as an HTTP JSON endpoint: POST /v1/score, GET /v1/health, GET /openapi.json."""
    from ..oauth import sign_in_from
    from ..scoring import Scorer
    from ..scoring.http import EndpointError, serve

    settings = settings_from(values)
    _log_to_stderr()
    log = logging.getLogger("pau_mcp.scoring")
    # Concurrent requests: worker processes, shared fairly between the submissions being scored.
    box_settings, shares = shared_sandbox(settings)
    sandbox = make_sandbox(box_settings, progress=step_printer(), processes=True)
    scorer_ = Scorer.from_settings(settings, use_cache=not no_cache, sandbox=sandbox, shares=shares)
    for kind in ("judge", "codematch"):
        try:
            scorer_.check({kind})
        except LLMNotConfigured as exc:
            log.warning("the %s score is unavailable: %s", kind, exc)
    try:
        serve(
            scorer_, host, port, token=settings.scorer_token, max_request_bytes=max_request_kb * 1024,
            max_connections=settings.max_connections, read_timeout_s=settings.read_timeout_s,
            signin=sign_in_from(settings, _scorer_bearer(settings.scorer_token), "pau-mcp scorer"),
        )  # fmt: skip
    except EndpointError as exc:
        raise click.UsageError(str(exc)) from None
    except KeyboardInterrupt:
        pass


def _scorer_bearer(token: str | None) -> Any:
    """The scorer token as sign-in's other bearer credential (``--auth oauth`` keeps it working); None without one."""
    if token is None:
        return None
    import hmac

    from mcp.server.auth.provider import AccessToken

    from ..oauth import SCOPES

    async def check(given: str) -> AccessToken | None:
        if hmac.compare_digest(given.encode(), token.encode()):
            return AccessToken(token=given, client_id="pau-mcp-scorer", scopes=list(SCOPES))
        return None

    return check
