"""``pau-mcp export sft``: the paper's SFT baselines as chat datasets from recorded runs."""

from __future__ import annotations

from pathlib import Path

import click

from ..config import options
from .common import manifest_store, run_store, settings_from

__all__ = ["export"]


@click.group()
def export() -> None:
    """Datasets from recorded runs."""


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
