"""``pau-mcp leaderboard RUN... --out DIR``: the runs ranked, as a static page and results.json."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..config import Settings, options
from .common import err, manifest_store, run_store, settings_from

if TYPE_CHECKING:
    from ..freshness import Freshness
    from ..reports.data import RunData

__all__ = ["leaderboard"]


@click.command("leaderboard")
@click.argument("names", metavar="RUN...", nargs=-1, required=True)
@click.option(
    "--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), required=True,
    help="Directory for index.html and results.json.",
)  # fmt: skip
@click.option(
    "--sort",
    type=click.Choice(["codematch", "judge", "pass", "gap", "queries", "tokens", "cost", "time"]),
    default="codematch",
    show_default=True,
    help="The column to rank by (scores and pass^k highest first; the gap, queries, tokens, cost and time lowest "
    "first).",
)
@click.option(
    "--pass-threshold", type=click.FloatRange(0, 1), default=0.8, show_default=True,
    help="Code match at or above which an episode passes (pass^k).",
)  # fmt: skip
@click.option("--resamples", type=click.IntRange(min=1), default=10_000, show_default=True,
              help="Bootstrap resamples per interval.")  # fmt: skip
@click.option("--seed", type=int, default=0, show_default=True, help="Bootstrap seed.")
@options("db", "data_dir", "manifests", "model_capabilities")
def leaderboard(
    names: tuple[str, ...], out_dir: Path, sort: str, pass_threshold: float, resamples: int, seed: int, **values: object
) -> None:
    """Rank runs: one row per model, protocol and suite (and agent and mode), with 95% intervals, pass^k, queries,
    tokens, cost, time, the memorisation gap of variant suites, and a plot of code match against cost.

    An `eval --epochs` run's name stands for its epochs. Writes DIR/index.html and DIR/results.json.
    """
    from ..reports.data import ReportError, load_runs
    from ..reports.leaderboard import build_board, write_board

    settings = settings_from(values)
    store = run_store(settings)
    try:
        runs = load_runs(store, names)
        board = build_board(
            runs, sort=sort, threshold=pass_threshold, resamples=resamples, seed=seed,
            variant_origins=_variant_origins(settings, runs), suite_dates=_suite_dates(settings, runs),
            cutoffs=_cutoffs(settings, runs), freshness=_freshness(settings, runs),
        )  # fmt: skip
    except (ReportError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    page, data = write_board(board, out_dir)
    err.print(f"wrote {page} and {data}")
    click.echo(f"{len(board.rows)} row{'s' * (len(board.rows) != 1)} from {len(runs)} run(s); open {page}")


def _variant_origins(settings: Settings, runs: Sequence[RunData]) -> dict[str, str]:
    """Each variant among the runs' methods -> the method it was made from, read from the installed suites."""
    from ..manifests import ManifestError

    manifests = manifest_store(settings)
    known = set(manifests.names())
    origins: dict[str, str] = {}
    for name in sorted({m.method_id.split("/", 1)[0] for run in runs for m in run.methods} & known):
        try:
            suite = manifests.suite(name)
        except ManifestError:
            continue
        origins.update({m.id: m.provenance.variant_of for m in suite.methods.values() if m.provenance.variant_of})
    return origins


def _suite_dates(settings: Settings, runs: Sequence[RunData]) -> dict[str, str | None]:
    from ..reports.provenance import suite_identity

    manifests = manifest_store(settings)
    return {run.suite: suite_identity(manifests, run.suite).created for run in runs}


def _cutoffs(settings: Settings, runs: Sequence[RunData]) -> dict[str, str | None]:
    from ..llm import CapabilityTable, LLMNotConfigured
    from ..reports.provenance import model_cutoff

    try:
        table = CapabilityTable.load(settings.model_capabilities)
    except LLMNotConfigured as exc:
        raise click.ClickException(str(exc)) from None
    return {run.setting("model"): model_cutoff(table, run.setting("model")) for run in runs}


def _freshness(settings: Settings, runs: Sequence[RunData]) -> dict[tuple[str, str], Freshness]:
    """Each (model, suite)'s freshness: the suite made after the model's release or cutoff (``pau_mcp.freshness``)."""
    from ..freshness import assess_freshness
    from ..llm import CapabilityTable, LLMNotConfigured
    from ..manifests import ManifestError

    try:
        table = CapabilityTable.load(settings.model_capabilities)
    except LLMNotConfigured as exc:
        raise click.ClickException(str(exc)) from None
    manifests = manifest_store(settings)
    verdicts: dict[tuple[str, str], Freshness] = {}
    for run in runs:
        model = run.setting("model")
        try:
            info = manifests.suite(run.suite).info
        except ManifestError:
            continue
        if model:
            verdicts[(model, run.suite)] = assess_freshness(info, model, table.dates(model))
    return verdicts
