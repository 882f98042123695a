"""``pau-mcp leaderboard RUN... --out DIR``: the runs ranked, as a static page and results.json."""

from __future__ import annotations

from pathlib import Path

import click

from ..config import options
from .common import err, manifest_store, run_store, settings_from

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
    from ..reports.leaderboard import make_board, write_board

    settings = settings_from(values)
    made = make_board(
        run_store(settings), names, manifests=manifest_store(settings), capabilities=settings.model_capabilities,
        sort=sort, threshold=pass_threshold, resamples=resamples, seed=seed,
    )  # fmt: skip
    if made.board is None:
        raise click.ClickException(made.message)
    board = made.board
    page, data = write_board(board, out_dir)
    err.print(f"wrote {page} and {data}")
    click.echo(f"{len(board.rows)} row{'s' * (len(board.rows) != 1)} from {made.runs} run(s); open {page}")
