"""``pau-mcp coverage RUN [RUN ...]``: measure each episode's exploration coverage after the fact (operator only)."""

from __future__ import annotations

import click

from ..config import options
from .common import (
    bar,
    err,
    existing_run_store,
    make_sandbox,
    manifest_store,
    sandbox_limits,
    settings_from,
    step_printer,
)

__all__ = ["coverage"]


@click.command("coverage")
@click.argument("names", metavar="RUN [RUN ...]", nargs=-1, required=True)
@click.option("--force", is_flag=True, help="Measure again the episodes that already have a coverage.")
@options("db", "data_dir", "manifests", "cache_dir", "timeout_s", "memory_mb", "max_output_kb")
def coverage(names: tuple[str, ...], force: bool, **values: object) -> None:
    """Re-run each episode's recorded calls with tracing and store which lines and branches of the hidden function
    they executed, beside those its hidden tests execute.

    For the operator only: the numbers describe the hidden source and are never shown to agents. The agent's
    calls are not repeated through the server: their recorded inputs run in the sandbox (each with ten times
    --timeout, for the tracer). `pau-mcp report` then shows the coverage per run and how it relates to the
    scores; `--classify-failures` gives it to the classifier.
    """
    from ..scoring.run_coverage import measure_runs

    settings = settings_from(values)
    result = measure_runs(
        existing_run_store(settings, "; point --db at one"), list(names), manifests=manifest_store(settings), limits=sandbox_limits(settings), force=force,
        sandbox=lambda: make_sandbox(settings, progress=step_printer()), progress=bar,
    )  # fmt: skip
    if result.status == "error":
        raise click.ClickException(result.message)
    for name in result.empty:
        err.print(f"[yellow]note:[/yellow] run {name} has no episodes (coverage is measured per episode)")
    for line in result.unknown[:10]:
        err.print(f"[yellow]skipped[/yellow] {line}: the method is not installed (add its suite with --manifests)")
    for run in result.runs:
        if not run.episodes:
            click.echo(f"run {run.run}: nothing (more) to measure" + ("" if force else "; --force measures again"))
            continue
        click.echo(
            f"run {run.run}: {run.measured} episodes measured; the agent's calls ran a median "
            f"{_share(run.lines)} of the lines and {_share(run.branches)} of the branches the hidden tests run"
            + (f"; {run.lost} traced calls stopped at a limit before reporting" if run.lost else "")
        )


def _share(value: float | None) -> str:
    return f"{value:.0%}" if value is not None else "n/a"
