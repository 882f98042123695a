"""``pau-mcp coverage RUN [RUN ...]``: measure each episode's exploration coverage after the fact (operator only)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import anyio
import click

from .. import eventloop
from ..config import options
from ..runstore import StoreError
from .common import bar, err, make_sandbox, manifest_store, run_store, sandbox_limits, settings_from, step_printer

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
    from ..manifests import ManifestError
    from ..scoring.coverage import measure_coverage

    settings = settings_from(values)
    if isinstance(settings.db_path, Path) and not settings.db_path.exists():
        raise click.ClickException(f"no run store at {settings.db_path}; point --db at one")
    try:
        store = run_store(settings)
        runs = [(name, store.run_id(name)) for name in dict.fromkeys(names)]
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    plan: list[tuple[str, int, str, list[str]]] = []
    for name, run_id in runs:
        calls: dict[tuple[str, str], list[str]] = {}
        for call in store.calls(run_id):
            # The agent's own calls: a counterexample (feedback) was run by the scorer, not by the agent.
            if call.counted and call.status != "counterexample":
                calls.setdefault((call.session_key, call.method_id), []).append(call.arguments)
        episodes = store.episodes(run_id)
        if not episodes:
            err.print(f"[yellow]note:[/yellow] run {name} has no episodes (coverage is measured per episode)")
        for episode in episodes:
            if episode.state not in ("done", "failed") or (episode.coverage and not force):
                continue
            inputs = calls.get((episode.session_key or "", episode.method_id), [])
            plan.append((name, run_id, episode.method_id, inputs))
    manifests = manifest_store(settings)
    # Tracing is an option of the in-process sandbox, not of worker processes.
    sandbox = make_sandbox(settings, progress=step_printer()) if plan else None
    measured: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in runs}
    unknown: list[str] = []

    async def main() -> None:
        if sandbox is None:  # nothing planned
            return
        with bar("measuring coverage", len(plan)) as advance:
            for name, run_id, method_id, inputs in plan:
                try:
                    method = manifests.method(method_id)
                except ManifestError:
                    unknown.append(f"{name}: {method_id}")
                    advance()
                    continue
                found = await measure_coverage(sandbox, method, inputs, limits=sandbox_limits(settings))
                await anyio.to_thread.run_sync(store.record_coverage, run_id, method_id, found)
                measured[name].append(found)
                advance()

    eventloop.run(main)
    for line in unknown[:10]:
        err.print(f"[yellow]skipped[/yellow] {line}: the method is not installed (add its suite with --manifests)")
    for name, found in measured.items():
        if not found:
            click.echo(f"run {name}: nothing (more) to measure" + ("" if force else "; --force measures again"))
            continue
        done = [c for c in found if c["status"] == "measured"]
        lines = [c["lines"]["agent_of_tests"] for c in done if c["lines"]["agent_of_tests"] is not None]
        branches = [c["branches"]["agent_of_tests"] for c in done if c["branches"]["agent_of_tests"] is not None]
        lost = sum(c["lost"] for c in done)
        click.echo(
            f"run {name}: {len(done)} episodes measured; the agent's calls ran a median "
            f"{_share(lines)} of the lines and {_share(branches)} of the branches the hidden tests run"
            + (f"; {lost} traced calls stopped at a limit before reporting" if lost else "")
        )


def _share(values: list[float]) -> str:
    return f"{statistics.median(values):.0%}" if values else "n/a"
