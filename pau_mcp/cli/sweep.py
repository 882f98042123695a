"""``pau-mcp sweep FILE``: every run of a comparison, here or on a Ray cluster, then the report over them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.markup import escape

from ..config import options
from .common import (
    check_configs,
    check_models,
    connect_cluster,
    err,
    execute,
    ray_options,
    report_of,
    run_store,
    settings_from,
    show_llm_notices,
    show_report,
)

if TYPE_CHECKING:
    from ..config import Settings
    from ..harness.sweep import PlannedRun
    from ..runstore import RunStore

__all__ = ["sweep"]

_SWEEP_SETTINGS = (
    "manifests", "budget", "db", "data_dir", "tool_key", "judge_model", "coder_model", "pricing", "llm_timeout_s", "llm_deadline_s", "llm_max_reply_mb",
    "llm_concurrency", "llm_retries", "timeout_s", "memory_mb", "max_output_kb", "max_argument_kb", "cache_dir",
    "workers", "model_capabilities", "temperature", "max_tokens", "reasoning_effort",
)  # fmt: skip

_FILE = click.Path(dir_okay=False, path_type=Path)


@click.command("sweep")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--dry-run", is_flag=True, help="List the runs and where each stands; run nothing.")
@click.option("--no-cache", is_flag=True, help="Do not read or write the LLM response cache when scoring.")
@click.option("--markdown", "markdown_path", type=_FILE, help="Also write the final report as Markdown.")
@click.option("--html", "html_path", type=_FILE, help="Also write the final report as one HTML page.")
@ray_options
@options(*_SWEEP_SETTINGS)
def sweep(file: Path, dry_run: bool, no_cache: bool, markdown_path: Path | None, html_path: Path | None,
          ray_address: str | None, ray_workers: int | None, **values: object) -> None:  # fmt: skip
    """Run a whole comparison described in FILE (TOML): models x modes x suites x agents, then report on it.

    Runs are named as `pau-mcp eval` names them. Finished runs are skipped and unfinished ones resumed, so the
    same command after an interruption (or with more models added to FILE) does only what is left. With --ray
    every run spreads its episodes over the cluster (task runs play here). The file's keys are in docs/scaling.md
    ("Sweeps").
    """
    from ..harness.sweep import SweepError, expand, load_sweep, standings
    from ..reports.requests import ReportRequest

    settings = settings_from(values)
    show_llm_notices()
    try:
        plan = expand(load_sweep(file), settings)
    except SweepError as exc:
        raise click.UsageError(str(exc)) from None
    store = run_store(settings)
    try:
        stands = standings(settings, store, plan)
    except SweepError as exc:
        raise click.UsageError(f"{file}: {exc}") from None
    for standing in stands:
        label = {"finished": "skip: finished", "partial": "resume", "new": "new", "conflict": "conflict"}[
            standing.state
        ]
        what = "tasks" if standing.planned.config.mode == "tasks" else "methods"
        click.echo(f"{standing.planned.config.run}  {standing.episodes} {what}  {label}")
    conflicts = [f"  {s.planned.config.run}: {s.conflict}" for s in stands if s.conflict is not None]
    if conflicts:
        raise click.UsageError(
            f"{file}: {len(conflicts)} run(s) exist with other options, so they cannot be resumed:\n"
            + "\n".join(conflicts)
            + '\nchange the file back, give those models a label = "..." (new run names), or use another --db'
        )
    if dry_run:
        return
    todo = [s.planned for s in stands if s.state != "finished"]
    # Every run of a sweep shares its scoring models: the file's, else the command's.
    run_settings = settings.model_copy(update={"judge_model": plan[0].judge_model, "coder_model": plan[0].coder_model})
    failed, unscored = _swept(run_settings, todo, no_cache, ray_address, ray_workers)
    names = [planned.config.run for planned in plan if _has_finished_episode(store, planned.config.run)]
    if names:
        click.echo("")
        report = report_of(settings, ReportRequest(names=tuple(names)), store)
        show_report(report, markdown_path=markdown_path, html_path=html_path)
    if failed:
        err.print(f"[red]{failed} episode(s) failed[/red]; run the sweep again with retry_failed = true to retry them")
    if unscored:
        err.print(f"[red]{unscored} score(s) could not be made[/red]; `pau-mcp score RUN` scores a run again")
    if failed or unscored:
        sys.exit(1)


def _swept(
    settings: Settings, todo: list[PlannedRun], no_cache: bool, ray_address: str | None, ray_workers: int | None
) -> tuple[int, int]:
    """Check, then play the runs left to play, printing how each ended; returns the episodes that failed and the
    scores that could not be made."""
    from ..harness.outcome import score_errors, summary

    check_configs([planned.config for planned in todo])
    check_models(settings, [planned.config for planned in todo])
    if todo and todo[0].config.score and len(todo[0].config.kinds) < 3:
        err.print("[yellow]note:[/yellow] judge and code-match scores need judge_model and coder_model (in the file, "
                  "or --judge-model and --coder-model); without them only code the agents submit is scored")  # fmt: skip
    cluster = connect_cluster(ray_address, ray_workers) if todo else None
    failed = unscored = 0
    try:
        for planned in todo:
            # Task mode plays its episodes here (each task's calls go to one server of this machine).
            here = planned.config.mode == "tasks"
            progress = execute(
                settings, planned.config, no_cache=no_cache, cluster=None if here else cluster, note=False
            )
            failed += progress.failed
            for line in summary(settings, planned.config, progress, on_ray=cluster is not None and not here):
                click.echo(line)
            for line in progress.errors[:5]:
                err.print(f"[red]failed[/red] {escape(line)}", highlight=False, soft_wrap=True)
            errors = score_errors(progress)
            unscored += len(errors)
            for line in errors[:5]:
                err.print(f"[red]score error[/red] {escape(line)}", highlight=False, soft_wrap=True)
    finally:
        if cluster is not None:
            cluster.close()
    return failed, unscored


def _has_finished_episode(store: RunStore, run: str) -> bool:
    run_id = store.find_run(run)
    return run_id is not None and "done" in store.episode_states(run_id).values()
