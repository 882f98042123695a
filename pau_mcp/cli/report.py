"""``pau-mcp report RUN [RUN ...]``: scores, distributions and significance of evaluation runs."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console

from ..config import Settings, options
from ..runstore import RunStore, StoreError
from .common import bar, err, manifest_store, run_store, settings_from, show_llm_notices, step_printer

if TYPE_CHECKING:
    from pau_mcp.reports.analyses import SuiteProfile
    from pau_mcp.reports.data import RunData

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
    # Imported here: numpy (and matplotlib, below) take a moment to load and no other command needs them.
    from pau_mcp.reports.build import build_report
    from pau_mcp.reports.data import ReportError, load_runs
    from pau_mcp.reports.render import method_rows, print_report, run_rows, to_html, to_markdown, write_csv

    settings = settings_from(values)
    show_llm_notices()
    if not names and not suites:
        raise click.UsageError("name at least one RUN (`pau-mcp runs list` shows them), or a suite with --suite")
    store = _store(settings) if names else None
    try:
        runs = load_runs(store, names) if store is not None else []
        profiles = _profiles(settings, runs, suites)
        labels = (
            _classify(settings, store, runs, unscored_as_one, no_cache)
            if classify_failures and store is not None
            else None
        )
        result = build_report(
            runs, unscored_as_one=unscored_as_one, resamples=resamples, seed=seed, failure_labels=labels,
            suites=profiles, variant_origins=_variant_origins(settings, runs), pass_threshold=pass_threshold,
        )  # fmt: skip
    except ReportError as exc:
        raise click.ClickException(str(exc)) from None
    console = Console()
    # Piped without COLUMNS: wide, so a file gets the whole tables; a terminal or COLUMNS sets the width.
    print_report(result, console if console.is_terminal or os.environ.get("COLUMNS") else Console(width=200))
    plots = []
    if plots_dir or html_path:
        from pau_mcp.reports.plots import render_plots, write_plots

        plots = render_plots(result)
    if markdown_path:
        _write(markdown_path, to_markdown(result))
    if csv_path:
        write_csv(run_rows(result), csv_path)
        err.print(f"wrote {csv_path}")
    if methods_path:
        write_csv(method_rows(result), methods_path)
        err.print(f"wrote {methods_path}")
    if plots_dir:
        for path in write_plots(plots, plots_dir):
            err.print(f"wrote {path}")
    if html_path:
        _write(html_path, to_html(result, plots))


def _profiles(settings: Settings, runs: Sequence[RunData], asked: Sequence[str]) -> list[SuiteProfile]:
    """The profiles of the suites asked for and of the runs' suites that are installed (in that order)."""
    from pau_mcp.manifests import ManifestError
    from pau_mcp.reports.analyses import suite_profile

    manifests = manifest_store(settings)
    known = set(manifests.names())
    covered = [name.strip() for run in runs for name in run.suite.split(",") if name.strip() in known]
    profiles = []
    for name in dict.fromkeys([*asked, *covered]):
        try:
            suite = manifests.suite(name)
        except ManifestError as exc:
            raise click.ClickException(f"{exc}; `pau-mcp manifests list` shows the suites") from None
        profiles.append(suite_profile(name, suite.methods.values()))
    return profiles


def _variant_origins(settings: Settings, runs: Sequence[RunData]) -> dict[str, str]:
    """Each variant among the runs' methods -> the method it was made from, read from the installed suites."""
    from pau_mcp.manifests import ManifestError

    manifests = manifest_store(settings)
    known = set(manifests.names())
    origins: dict[str, str] = {}
    for name in sorted({m.method_id.split("/", 1)[0] for run in runs for m in run.methods} & known):
        try:
            suite = manifests.suite(name)
        except ManifestError:
            continue  # a broken suite is reported where it is described; the table just leaves it out
        origins.update({m.id: m.provenance.variant_of for m in suite.methods.values() if m.provenance.variant_of})
    return origins


def _store(settings: Settings) -> RunStore:
    if isinstance(settings.db_path, Path) and not settings.db_path.exists():
        raise click.ClickException(
            f"no run store at {settings.db_path}; run `pau-mcp eval` first, or point --db at one"
        )
    try:
        return run_store(settings)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None


def _classify(
    settings: Settings, store: RunStore, runs: Sequence[RunData], unscored_as_one: bool, no_cache: bool
) -> dict[str, dict[str, str]]:
    from pau_mcp.llm import LLMClient, LLMError
    from pau_mcp.reports.failures import UNCLASSIFIED, classify_cases, failure_cases
    from pau_mcp.scoring import Scorer

    if not settings.judge_model:
        raise click.UsageError(
            "--classify-failures needs a model: pass --judge-model provider/model or set PAU_JUDGE_MODEL"
        )
    try:
        llm = LLMClient.from_settings(settings, use_cache=not no_cache)
        llm.check(settings.judge_model)
        cases = [case for run in runs for case in failure_cases(store, run, unscored_as_one)]
        # The scorer, the only reader of gold data, gives each case its gold description and failing tests.
        scorer = Scorer.from_settings(settings, use_cache=not no_cache, progress=step_printer()) if cases else None
        with bar("classifying failures", len(cases)) as advance:
            labels = classify_cases(
                llm, settings.judge_model, cases, progress=advance, evidence=scorer.evidence if scorer else None
            )
    except LLMError as exc:
        raise click.ClickException(str(exc)) from None
    if llm.spend.unpriced:
        err.print(
            f"[yellow]no price for {', '.join(sorted(llm.spend.unpriced))}: the classifier's cost is not counted[/yellow]"
        )
    given = [label for by_method in labels.values() for label in by_method.values()]
    left = given.count(UNCLASSIFIED)
    unclassified = f"; {left} left unclassified (the label table says why)" if left else ""
    err.print(
        f"classified {len(given) - left} of {len(cases)} failed episodes with {settings.judge_model} "
        f"(${llm.spend.cost_usd:.4f}){unclassified}"
    )
    return labels


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    err.print(f"wrote {path}")
