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


@export.command("eee")
@click.argument("run")
@click.option(
    "--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=Path("eee"), show_default=True,
    help="The datastore root: records go to OUT/data/pau-mcp-<suite>/<developer>/<model>/.",
)  # fmt: skip
@click.option("--organization", default="unknown", show_default=True,
              help="Who provides these results (the record's source_organization_name).")  # fmt: skip
@click.option(
    "--relationship", type=click.Choice(["first_party", "third_party", "collaborative", "other"]),
    default="third_party", show_default=True, help="The evaluator's relationship to the model.",
)  # fmt: skip
@click.option("--pass-threshold", type=click.FloatRange(0, 1), default=0.8, show_default=True,
              help="Code match at or above which an instance is correct (and pass^k of epochs).")  # fmt: skip
@options("manifests", "db", "data_dir")
def eee(run: str, out_dir: Path, organization: str, relationship: str, pass_threshold: float, **values: object) -> None:
    """Write RUN as Every Eval Ever records: an aggregate record (every score kind's mean with its uncertainty, and
    pass^k of an `eval --epochs` group) and its instance-level records (each episode's transcript and score).

    Needs the every-eval-ever package (see docs/reports.md: on Python 3.11 it installs with --no-deps
    --ignore-requires-python).
    """
    settings = settings_from(values)
    try:
        from ..reports.eee import export_eee
    except ImportError as exc:
        raise click.ClickException(
            f"export eee needs the every-eval-ever package ({exc}): pip install 'pau-mcp[eee]' on Python 3.12+, or "
            "pip install --no-deps --ignore-requires-python every-eval-ever==0.3.0 on 3.11 (its records and validator "
            "need only pydantic)"
        ) from None
    from ..reports import ReportError

    try:
        files = export_eee(
            run_store(settings), manifest_store(settings), run, out_dir, organization=organization,
            relationship=relationship, threshold=pass_threshold,
        )  # fmt: skip
    except ReportError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"wrote {files.aggregate} and {files.samples} ({files.records} instance-level records)")


@export.command("hf-results")
@click.argument("run")
@click.option(
    "--dataset-id", required=True,
    help="The Hub dataset (owner/name) where the suite is registered as a benchmark; its eval.yaml names the tasks "
    "codematch, judge, direct (and codematch_pass_hat_K).",
)  # fmt: skip
@click.option(
    "--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=Path("."), show_default=True,
    help="The model repository's root: the file goes to OUT/.eval_results/.",
)  # fmt: skip
@click.option("--source-url", help="Where the evidence is (e.g. a dataset holding the exported Inspect logs).")
@click.option("--source-user", help="The Hub user to credit (needs --source-url).")
@click.option("--pass-threshold", type=click.FloatRange(0, 1), default=0.8, show_default=True,
              help="Code match at or above which an episode passes (pass^k of an epoch group).")  # fmt: skip
@options("db", "data_dir")
def hf_results(
    run: str,
    dataset_id: str,
    out_dir: Path,
    source_url: str | None,
    source_user: str | None,
    pass_threshold: float,
    **values: object,
) -> None:
    """Write RUN's scores as the .eval_results/*.yaml file a Hugging Face model page shows (huggingface_hub's
    EvalResultEntry). Needs the hub extra: pip install 'pau-mcp[hub]'."""
    settings = settings_from(values)
    if source_user and not source_url:
        raise click.UsageError("--source-user credits the source at --source-url: give both")
    try:
        from ..reports.hf_results import write_hf_results
    except ImportError as exc:
        raise click.ClickException(
            f"export hf-results needs huggingface_hub ({exc}): pip install 'pau-mcp[hub]'"
        ) from None
    from ..reports import ReportError

    try:
        path = write_hf_results(
            run_store(settings), run, dataset_id, out_dir, source_url=source_url, source_user=source_user,
            threshold=pass_threshold,
        )  # fmt: skip
    except ReportError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"wrote {path} (commit it to the model repository, or open a pull request on the Hub with it)")
