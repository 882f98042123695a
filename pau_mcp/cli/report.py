"""``pau-mcp report RUN [RUN ...]``: scores, distributions and significance of evaluation runs."""

from __future__ import annotations

from pathlib import Path

import click

from ..config import options
from .common import existing_run_store, report_of, settings_from, show_llm_notices, show_report

__all__ = ["report"]

_FILE = click.Path(dir_okay=False, path_type=Path)


@click.command("report")
@click.argument("names", metavar="[RUN ...]", nargs=-1)
@click.option(
    "--suite",
    "suites",
    multiple=True,
    help="Also describe this suite (methods by number of arguments, test-suite sizes); repeatable. The suites of "
    "the runs are described anyway; with no RUN, only the suites.",
)
@click.option(
    "--unscored-as-one",
    is_flag=True,
    help="Count unscored judge replies as 1 (the reference's rule) instead of leaving them out.",
)
@click.option(
    "--resamples",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="Bootstrap resamples per paired test.",
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Bootstrap seed: the same seed gives the same p-values."
)
@click.option(
    "--pass-threshold",
    type=click.FloatRange(0, 1),
    default=0.8,
    show_default=True,
    help="Code match at or above which an episode passes, for the pass@k and pass^k of repeated epochs.",
)
@click.option("--markdown", "markdown_path", type=_FILE, help="Also write the report as Markdown.")
@click.option("--csv", "csv_path", type=_FILE, help="Also write one CSV row of raw numbers per run.")
@click.option("--csv-methods", "methods_path", type=_FILE, help="Also write one CSV row per run and method.")
@click.option(
    "--plots",
    "plots_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write PNG plots into this directory.",
)
@click.option("--html", "html_path", type=_FILE, help="Also write one self-contained HTML page with tables and plots.")
@click.option("--classify-failures", is_flag=True, help="Label each failed episode with an LLM (the --judge-model).")
@click.option(
    "--no-cache", is_flag=True, help="With --classify-failures: neither read nor write the LLM response cache."
)
@options(
    "db", "data_dir", "manifests", "cache_dir", "judge_model", "pricing", "llm_timeout_s", "llm_deadline_s", "llm_max_reply_mb", "llm_concurrency",
    "llm_retries",
)  # fmt: skip
def report(
    names: tuple[str, ...],
    suites: tuple[str, ...],
    unscored_as_one: bool,
    resamples: int,
    seed: int,
    pass_threshold: float,
    markdown_path: Path | None,
    csv_path: Path | None,
    methods_path: Path | None,
    plots_dir: Path | None,
    html_path: Path | None,
    classify_failures: bool,
    no_cache: bool,
    **values: object,
) -> None:
    """Report on evaluation runs RUN ... (an `eval --epochs` run's name stands for its epochs): per-run scores, Max over runs, modes and paired bootstrap tests, and the
    paper's analyses (upper bound, rank correlation, self-contradiction, suite profiles).

    Prints tables to the terminal; --markdown, --csv, --csv-methods, --plots and --html write files too.
    """
    from ..reports.requests import ReportRequest

    settings = settings_from(values)
    show_llm_notices()
    if not names and not suites:
        raise click.UsageError("name at least one RUN (`pau-mcp runs list` shows them), or a suite with --suite")
    request = ReportRequest(
        names=names, suites=suites, unscored_as_one=unscored_as_one, resamples=resamples, seed=seed,
        pass_threshold=pass_threshold, classify_failures=classify_failures, use_cache=not no_cache,
    )  # fmt: skip
    result = report_of(settings, request, existing_run_store(settings) if names else None)
    show_report(
        result, markdown_path=markdown_path, csv_path=csv_path, methods_path=methods_path, plots_dir=plots_dir,
        html_path=html_path,
    )  # fmt: skip
