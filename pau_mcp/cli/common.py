"""What every command shares: settings from options, progress on stderr."""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Column

from ..config import Settings, SettingsError

if TYPE_CHECKING:
    from wasm_runtime import Limits, Sandbox, SandboxInterface

    from ..manifests import ManifestStore
    from ..reports.report import Report
    from ..reports.requests import ReportRequest
    from ..runstore import RunStore

__all__ = [
    "CommandFunction",
    "bar", "err", "existing_run_store", "make_sandbox", "manifest_store", "report_of", "run_bar", "run_store",
    "sandbox_limits", "settings_from", "show_llm_notices", "show_report", "step_printer",
]  # fmt: skip

#: A click command function, as an option decorator takes and gives it back.
CommandFunction = TypeVar("CommandFunction", bound=Callable[..., Any])

err = Console(stderr=True)


class _Notices(logging.Handler):
    """Each LLM retry and timeout as one line on stderr, as it happens, with or without a terminal.

    Writes to ``sys.stderr`` as it is when the line comes, so a progress bar that redirects stderr shows the line
    above itself.
    """

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(f"pau-mcp: {self.format(record)}\n")
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - a notice that cannot be shown must not end the command
            self.handleError(record)


def show_llm_notices() -> None:
    """Print the LLM client's notices (retries, timeouts, the switch to streamed replies) on stderr, once per process."""
    logger = logging.getLogger("pau_mcp.llm")
    if not any(isinstance(handler, _Notices) for handler in logger.handlers):
        logger.addHandler(_Notices(logging.WARNING))
        logger.setLevel(logging.WARNING)
        logger.propagate = False  # a server's own log handler would print them a second time


def settings_from(values: dict[str, Any]) -> Settings:
    """Settings from a command's options; a bad value is a usage error (exit 2) naming flag and variable."""
    try:
        return Settings.from_options(**values)
    except SettingsError as exc:
        raise click.UsageError(str(exc)) from None


# The commands' stores and sandbox, built from their settings. Imported on first use, so that `pau-mcp --help` and
# the commands that need neither do not load the sandbox engine.


def run_store(settings: Settings) -> RunStore:
    """The run store at the settings' ``db_path``."""
    from ..runstore import RunStore

    return RunStore(settings.db_path)


def manifest_store(settings: Settings) -> ManifestStore:
    """The packaged suites and the settings' ``--manifests`` directories."""
    from ..manifests import ManifestStore

    return ManifestStore(settings.manifests)


@overload
def make_sandbox(
    settings: Settings, progress: Callable[[str], None] | None = None, processes: Literal[False] = False
) -> Sandbox: ...


@overload
def make_sandbox(
    settings: Settings, progress: Callable[[str], None] | None = None, processes: bool = False
) -> SandboxInterface: ...


def make_sandbox(
    settings: Settings, progress: Callable[[str], None] | None = None, processes: bool = False
) -> SandboxInterface:
    """The sandbox the settings describe (``pau_mcp.sandboxing.make_sandbox``).

    Made inside a command, it stops when the command ends, however it ends: commands also run inside other
    programs (a notebook, a script, the tests), where its worker processes would otherwise outlive them.
    """
    from ..sandboxing import make_sandbox as make

    sandbox = make(settings, progress=progress, processes=processes)
    context = click.get_current_context(silent=True)
    if context is not None:
        context.call_on_close(sandbox.close)
    return sandbox


def sandbox_limits(settings: Settings) -> Limits:
    """The limits of every sandbox call the settings describe."""
    from ..sandboxing import sandbox_limits as limits

    return limits(settings)


# -- reports, made and shown: `pau-mcp report` and the report a sweep ends with ---------------------------------------


def existing_run_store(
    settings: Settings, missing: str = "; run `pau-mcp eval` first, or point --db at one"
) -> RunStore:
    """The run store at ``db_path``, which must exist already (a command that reads runs does not make a store);
    ``missing`` ends the message when it does not."""
    from ..runstore import StoreError

    if isinstance(settings.db_path, Path) and not settings.db_path.exists():
        raise click.ClickException(f"no run store at {settings.db_path}{missing}")
    try:
        return run_store(settings)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None


def report_of(settings: Settings, request: ReportRequest, store: RunStore | None) -> Report:
    """The report ``request`` asks for (``pau_mcp.reports.requests.make_report``), what classifying failures came to on
    stderr; a refusal ends the command (exit 2 for usage, else 1)."""
    from ..reports.requests import make_report

    made = make_report(request, settings, store, progress=bar, step=step_printer())
    if made.status == "usage":
        raise click.UsageError(made.message)
    if made.report is None:
        raise click.ClickException(made.message)
    if (classified := made.classified) is not None:
        if classified.unpriced:
            err.print(
                f"[yellow]no price for {', '.join(classified.unpriced)}: the classifier's cost is not counted[/yellow]"
            )
        left = classified.cases - classified.labelled
        unclassified = f"; {left} left unclassified (the label table says why)" if left else ""
        err.print(
            f"classified {classified.labelled} of {classified.cases} failed episodes with {classified.model} "
            f"(${classified.cost_usd:.4f}){unclassified}"
        )
    return made.report


def show_report(
    result: Report,
    *,
    markdown_path: Path | None = None,
    csv_path: Path | None = None,
    methods_path: Path | None = None,
    plots_dir: Path | None = None,
    html_path: Path | None = None,
) -> None:
    """Print a report's tables to the terminal, and write the files asked for (each named on stderr)."""
    # Imported here: numpy (and matplotlib, below) take a moment to load and no other command needs them.
    from ..reports.render import method_rows, print_report, run_rows, to_html, to_markdown, write_csv

    console = Console()
    # Piped without COLUMNS: wide, so a file gets the whole tables; a terminal or COLUMNS sets the width.
    print_report(result, console if console.is_terminal or os.environ.get("COLUMNS") else Console(width=200))
    plots = []
    if plots_dir or html_path:
        from ..reports.plots import render_plots

        plots = render_plots(result)
    if markdown_path:
        _write(markdown_path, to_markdown(result))
    for path, rows in ((csv_path, run_rows), (methods_path, method_rows)):
        if path:
            write_csv(rows(result), path)
            err.print(f"wrote {path}")
    if plots_dir:
        from ..reports.plots import write_plots

        for path in write_plots(plots, plots_dir):
            err.print(f"wrote {path}")
    if html_path:
        _write(html_path, to_html(result, plots))


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    err.print(f"wrote {path}")


def step_printer() -> Callable[[str], None]:
    """A callback printing each step to stderr with the time since the first one."""
    started = time.perf_counter()

    def say(line: str) -> None:
        err.print(f"[dim]{time.perf_counter() - started:5.1f}s[/dim] {line}")

    return say


def _columns(*more: ProgressColumn) -> tuple[ProgressColumn, ...]:
    """The bar and its count first, the description last and cut to what the terminal has left: a long run name
    (or a narrow terminal) shortens the description, never the count."""
    return (
        BarColumn(bar_width=20),
        MofNCompleteColumn(table_column=Column(no_wrap=True)),
        TimeElapsedColumn(table_column=Column(no_wrap=True)),
        *more,
        TextColumn("{task.description}", table_column=Column(no_wrap=True, overflow="ellipsis", ratio=1)),
    )


@contextmanager
def bar(description: str, total: int) -> Iterator[Callable[..., None]]:
    """A progress bar on stderr; yields ``advance(n=1)``."""
    columns = _columns(TimeRemainingColumn(table_column=Column(no_wrap=True)))
    with Progress(*columns, console=err, transient=False, expand=True) as progress:
        task = progress.add_task(description, total=total)
        yield lambda *_args, n=1: progress.advance(task, n)


@contextmanager
def run_bar(run: str, on_ray: bool) -> Iterator[Callable[[Any], None]]:
    """A run's progress on stderr (``eval``, ``rl rollout``); yields ``show(progress)`` for the run's live totals:
    episodes counted, then failures, tokens and cost, then the run's name (what a narrow terminal cuts first)."""
    with Progress(*_columns(), console=err, expand=True) as progress:
        task = progress.add_task(run, total=None)

        def show(p: Any) -> None:
            tokens = p.input_tokens + p.output_tokens
            where = f" · {p.workers} Ray workers, {p.rerun} re-run" if on_ray else ""
            progress.update(
                task, total=p.total, completed=p.done + p.failed + p.skipped,
                description=f"failed {p.failed} · {tokens:,} tokens · ${p.cost_usd:.4f}{where} · {run}",
            )  # fmt: skip

        yield show


# -- what the commands that play runs share (eval, sweep, rl rollout) -------------------------------------------------

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..distributed import Cluster
    from ..harness import EvalConfig, RunProgress
    from ..llm import LLMClient

__all__ += ["check_configs", "check_models", "connect_cluster", "execute", "ray_options"]


def ray_options(command: CommandFunction) -> CommandFunction:
    """The ``--ray`` and ``--ray-workers`` options of the commands that can spread episodes over a cluster."""
    command = click.option(
        "--ray-workers",
        type=click.IntRange(1, 4096),
        help="Episode workers on the Ray cluster, each holding one CPU (default: one per node with a CPU).",
    )(command)
    return click.option(
        "--ray",
        "ray_address",
        is_flag=False,
        flag_value="auto",
        default=None,
        metavar="[ADDRESS]",
        help="Spread episodes over a Ray cluster: its ADDRESS (host:port, ray://host:10001); alone, RAY_ADDRESS or "
        "the cluster started on this machine; `local`, a cluster of this machine for this command "
        "(pip install 'pau-mcp[ray]'; docs/scaling.md).",
    )(command)


def connect_cluster(address: str | None, workers: int | None) -> Cluster | None:
    """The Ray cluster ``--ray`` names, or None without ``--ray``; a cluster that cannot be used ends the command."""
    if address is None:
        if workers is not None:
            raise click.UsageError("--ray-workers needs --ray")
        return None
    from ..distributed import ClusterError, RayOptions, connect

    try:
        cluster = connect(RayOptions(address=address, workers=workers))
    except ClusterError as exc:
        raise click.ClickException(str(exc)) from None
    err.print(f"Ray cluster: {cluster.nodes} node(s) with CPUs; {cluster.workers} episode worker(s) per run")
    return cluster


def check_configs(configs: Sequence[EvalConfig]) -> None:
    """Refuse runs that cannot play an episode (no model, an unknown provider) before any run or sandbox exists."""
    from ..harness import EvalError, check_config

    for config in configs:
        try:
            check_config(config)
        except EvalError as exc:
            raise click.ClickException(str(exc)) from None


def check_models(settings: Settings, configs: Sequence[EvalConfig]) -> None:
    """One cheap check per model of these runs before any run exists (and before the sandbox starts).

    A wrong key, URL or model name fails in seconds, in one line, instead of in every episode.
    """
    from .. import eventloop
    from ..llm import LLMClient, LLMError

    models: list[str] = []
    for config in configs:
        if config.agent != "probe" and config.model:
            models.append(config.model)
        if config.agent == "observer" and settings.coder_model:
            models.append(settings.coder_model)
        if config.score and config.mode != "tasks":  # a task's answer is checked with no model
            models += [m for m in (settings.judge_model, settings.coder_model) if m]
    models = list(dict.fromkeys(models))
    if not models:
        return
    try:
        for warning in eventloop.run(_preflight, LLMClient.from_settings(settings, use_cache=False), models):
            err.print(f"[yellow]note:[/yellow] {warning}")
    except LLMError as exc:
        raise click.ClickException(str(exc)) from None


async def _preflight(llm: LLMClient, models: list[str]) -> list[str]:
    try:
        return await llm.preflight(models)
    finally:
        await llm.aclose()


def execute(
    settings: Settings, config: EvalConfig, *, no_cache: bool = False, cluster: Cluster | None = None, note: bool = True
) -> RunProgress:
    """Run (or resume) one evaluation (``assembly.eval_run``, then ``harness.play_run``) with a progress bar on stderr;
    returns its progress.

    ``note``: say when judge and code-match scores are off for want of their models.

    Raises:
        click.ClickException: the run cannot start or continue (the message says why).
    """
    from .. import eventloop
    from ..assembly import eval_run
    from ..harness import play_run
    from ..llm import LLMNotConfigured
    from ..runs import RunError

    try:
        source = None
        if cluster is not None:
            from ..distributed.evaluation import RayEpisodes

            source = RayEpisodes(cluster, settings, config)
        run = eval_run(settings, config, source=source, use_cache=not no_cache, progress=step_printer())
    except RunError as exc:
        raise click.ClickException(str(exc)) from None
    context = click.get_current_context(silent=True)
    if context is not None:  # the run closes them; should it never start, the command's end does (twice: no-op)
        for close in run.cleanup:
            context.call_on_close(close)
    if note and config.score and len(config.kinds) < 3 and config.mode != "tasks":
        err.print("[yellow]note:[/yellow] judge and code-match scores need --judge-model/PAU_JUDGE_MODEL and "
                  "--coder-model/PAU_CODER_MODEL; without them only code the agent submits is scored")  # fmt: skip
    with run_bar(config.run, on_ray=cluster is not None) as show:

        async def main() -> RunProgress:
            try:
                return await play_run(run, show)
            finally:
                await run.aclose()

        try:
            return eventloop.run(main)
        except (RunError, LLMNotConfigured) as exc:
            raise click.ClickException(str(exc)) from None
