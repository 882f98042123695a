"""``pau-mcp export sft`` (the paper's SFT baselines as chat datasets), ``pau-mcp export docs`` (an explorer's
final descriptions as tool documentation), and the results formats the field reads: ``export inspect`` (an Inspect
AI log), ``export eee`` (Every Eval Ever records) and ``export hf-results`` (a Hugging Face model page's
``.eval_results`` files), from recorded runs."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..config import options
from .common import manifest_store, run_store, settings_from

__all__ = ["export"]


@click.group()
def export() -> None:
    """Datasets, tool documentation and published results from recorded runs."""


@export.command("sft")
@click.argument("runs", nargs=-1, required=True)
@click.option("--kind", type=click.Choice(["distill", "final", "answer-aware"]), required=True,
              help="distill: good teacher trajectories; final: gold final descriptions; answer-aware: trajectories of a teacher told the answer.")  # fmt: skip
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    required=True,
    help="Directory for train.jsonl.",
)
@click.option("--min-score", type=click.FloatRange(0, 1), default=0.75, show_default=True,
              help="Keep trajectories whose outcome (0..1: judge rating, code match or final critic rating) is at least this.")  # fmt: skip
@click.option("--filter", "step_filter", type=click.Choice(["outcome", "reference"]), default="outcome",
              show_default=True,
              help="distill: outcome keeps whole episodes by --min-score; reference keeps steps by the reference's "
              "warm-up rule (runs under --protocol reference; docs/training.md).")  # fmt: skip
@options("manifests", "db", "data_dir")
def sft(runs: tuple[str, ...], kind: str, out_dir: Path, min_score: float, step_filter: str, **values: object) -> None:
    """Write a chat-format SFT dataset (messages JSONL, as TRL's SFTTrainer reads it) from recorded runs.

    RUNS are `pau-mcp eval` runs of the paper agent or `pau-mcp rl rollout` runs. The result loads with
    `datasets.load_dataset("json", data_files="OUT/train.jsonl")`.
    """
    from ..prompts import PromptsError
    from ..rl.sft import ExportError, export_sft
    from ..runstore import StoreError

    settings = settings_from(values)
    try:
        report = export_sft(
            run_store(settings), manifest_store(settings), list(runs), kind, out_dir, min_score,
            step_filter=step_filter, data_dir=settings.data_dir,
        )  # fmt: skip
    except (ExportError, StoreError, PromptsError) as exc:
        raise click.ClickException(str(exc)) from None
    skipped = ", ".join(f"{n} {why}" for why, n in sorted(report.skipped.items())) or "none"
    click.echo(
        f"wrote {report.examples} examples from {report.episodes} episodes to {report.path} (skipped: {skipped})"
    )


@export.command("docs")
@click.argument("run")
@click.option(
    "-o", "--out", "output", type=click.Path(dir_okay=False, path_type=Path), help="Write here instead of stdout."
)
@click.option(
    "--format",
    "form",
    type=click.Choice(["json", "markdown"]),
    default="json",
    show_default=True,
    help="json: the file `pau-mcp serve --docs FILE` and `eval --docs FILE` read; markdown: for people.",
)
@options("manifests", "db", "data_dir")
def docs(run: str, output: Path | None, form: str, **values: object) -> None:
    """Write each method's final description in RUN as tool documentation.

    The same documentation is served, with no file, by `pau-mcp serve --docs RUN`; the file carries it to another
    machine. Methods whose episode failed or whose agent gave no description are listed under "skipped".
    """
    from ..documentation import DocsError, docs_document, docs_json, docs_markdown

    settings = settings_from(values)
    try:
        document = docs_document(run_store(settings), manifest_store(settings), run)
    except DocsError as exc:
        raise click.ClickException(str(exc)) from None
    text = docs_json(document) if form == "json" else docs_markdown(document)
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")
    skipped = len(document["skipped"])
    note = f", {skipped} without documentation" + (' (listed under "skipped")' if form == "json" else "")
    where = f"; written to {output}" if output else ""
    count = len(document["methods"])
    click.echo(
        f"{count} method{'s' * (count != 1)} documented from run {run}{note if skipped else ''}{where}", err=True
    )


@export.command("inspect")
@click.argument("run")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("logs"),
    show_default=True,
    help="Directory for the .eval log (Inspect's own default log directory); `inspect view --log-dir DIR` shows it.",
)
@options("manifests", "db", "data_dir")
def inspect_(run: str, out_dir: Path, **values: object) -> None:
    """Write RUN as an Inspect AI evaluation log (.eval): one sample per episode, with every message, tool call and
    result, the scores with their reasons, tokens and cost. An `eval --epochs` run's name writes its epochs as one log.

    Needs the inspect extra: pip install 'pau-mcp[inspect]'.
    """
    settings = settings_from(values)
    try:
        from ..reports.inspect_log import write_inspect_log
    except ImportError as exc:
        raise click.ClickException(f"export inspect needs Inspect AI ({exc}): pip install 'pau-mcp[inspect]'") from None
    from ..reports import ReportError

    try:
        path = write_inspect_log(run_store(settings), manifest_store(settings), run, out_dir)
    except ReportError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"wrote {path} (open it with `inspect view --log-dir {out_dir}`)")
