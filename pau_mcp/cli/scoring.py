"""``pau-mcp score`` (score or re-score saved submissions) and ``pau-mcp scorer`` (the scoring endpoint)."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import click
from click.core import ParameterSource
from rich.markup import escape

from ..config import options
from ..llm import LLMNotConfigured
from ..runstore import StoreError
from ..sandboxing import shared_sandbox
from .common import (
    CommandFunction,
    bar,
    err,
    make_sandbox,
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


# -- pau-mcp score ------------------------------------------------------------------------------


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
    from ..scoring.rescoring import RescoreRequest, rescore

    settings = settings_from(values)
    request = RescoreRequest(
        source=source, kinds=kinds, gold=gold, suites=suites, with_examples=with_examples,
        knowledge=tuple(_knowledge(knowledge_texts, kinds)), jobs=jobs, run_name=run_name, use_cache=not no_cache,
        protocol_given=click.get_current_context().get_parameter_source("protocol") is ParameterSource.COMMANDLINE,
    )  # fmt: skip
    show_llm_notices()
    try:
        store = run_store(settings)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    # Many submissions at once: worker processes, as fresh instances do not scale over threads of one process.
    scored = rescore(
        request, settings, store, sandbox=lambda: make_sandbox(settings, progress=step_printer(), processes=True),
        progress=bar, notify=_notify,
    )  # fmt: skip
    if scored.status == "usage":
        raise click.UsageError(scored.message)
    if scored.status == "error":
        raise click.ClickException(scored.message)
    if as_json:
        click.echo(json.dumps(scored.summary, indent=2))
    else:
        _print_summary(scored.summary, gold)
    for line in scored.errors[:10]:
        err.print(f"[red]error[/red] {escape(line)}", highlight=False, soft_wrap=True)
    if len(scored.errors) > 10:
        err.print(f"[red]error[/red] ... and {len(scored.errors) - 10} more (each is recorded with its reason)")
    if scored.errors:
        sys.exit(1)


#: How each kind of note ``rescore`` tells is shown on stderr.
_NOTES = {"again": "[dim]{}[/dim]", "note": "[yellow]note:[/yellow] {}", "skipped": "[yellow]skipped[/yellow] {}"}


def _notify(kind: str, text: str) -> None:
    err.print(_NOTES[kind].format(text))


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
