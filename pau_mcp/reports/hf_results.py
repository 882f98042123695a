"""A run's scores as the ``.eval_results/*.yaml`` file a Hugging Face model repository shows on its page
(``pau-mcp export hf-results RUN``), written with ``huggingface_hub``'s own ``EvalResultEntry``.

One entry per score kind, each a task of the benchmark dataset named with ``--dataset-id`` (the Hub dataset where a
suite is registered as a benchmark, whose ``eval.yaml`` names these tasks): ``codematch`` and ``direct`` as percentages
of the hidden tests matched, ``judge`` as the mean 1-5 rating, and for an epoch group ``codematch_pass_hat_<k>`` as
a percentage. Means are over methods (each method's mean over the epochs). The entries carry the run's date and, when
given, a source (a repository holding the exported logs); an exploring run used tools, so it is written to
``<suite>_with_tools.yaml`` with ``notes: "With tools"``, as the Hub asks of tool-using results, and an in-context run
to ``<suite>.yaml`` without notes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import yaml
from huggingface_hub import EvalResultEntry, eval_result_entries_to_yaml

from pau_mcp.runstore import RunStore

from .data import ReportError, RunData, load_runs, run_names
from .epochs import DEFAULT_THRESHOLD, method_means, pass_hat

__all__ = ["hf_entries", "write_hf_results"]


def hf_entries(
    store: RunStore, name: str, dataset_id: str, *, source_url: str | None = None, source_user: str | None = None,
    threshold: float = DEFAULT_THRESHOLD,
) -> tuple[list[EvalResultEntry], str]:  # fmt: skip
    """The entries of the run (or epoch group) ``name`` and the file name they belong in.

    Raises:
        ReportError: no such run, a run without episodes or without scores, or a dataset id that is not
            ``owner/name``.
    """
    if dataset_id.count("/") != 1 or not all(dataset_id.split("/")):
        raise ReportError(f"--dataset-id is a Hub dataset id, owner/name (got {dataset_id!r})")
    runs = load_runs(store, run_names(store, [name]))
    if any(not run.episodes for run in runs):
        raise ReportError(f"run {name!r} has no episodes: a model's results come from `pau-mcp eval` runs")
    created = {row.name: row.created_at for row in store.runs()}
    dates = sorted(created[run.name] for run in runs if run.name in created)
    date = dates[0][:10] if dates else None
    source = {"source_url": source_url, "source_name": f"pau-mcp run {name}", "source_user": source_user}
    if source_url is None:
        source = {}
    interactive = runs[0].mode != "incontext"
    notes = "With tools" if interactive else None
    entries = []
    for kind, scale in (("codematch", 100.0), ("judge", 1.0), ("direct", 100.0)):
        mean = _mean(runs, kind)
        if mean is not None:
            entries.append(EvalResultEntry(dataset_id, kind, round(mean * scale, 2), date=date, notes=notes, **source))
    if len(runs) > 1 and (hat := pass_hat(runs, threshold)) is not None:
        k = len(runs)
        entries.append(
            EvalResultEntry(
                dataset_id, f"codematch_pass_hat_{k}", round(hat * 100, 2), date=date, notes=notes, **source
            )
        )
    if not entries:
        raise ReportError(f"run {name!r} has no scores yet: score it first (`pau-mcp score {name}`)")
    suite = runs[0].suite.replace(",", "_").replace(" ", "")
    return entries, f"pau-mcp-{suite}{'_with_tools' if interactive else ''}.yaml"


def write_hf_results(
    store: RunStore, name: str, dataset_id: str, out_dir: Path, *, source_url: str | None = None,
    source_user: str | None = None, threshold: float = DEFAULT_THRESHOLD,
) -> Path:  # fmt: skip
    """Write ``out_dir/.eval_results/<file>.yaml`` (``out_dir`` is the model repository's root); returns its path."""
    entries, file_name = hf_entries(
        store, name, dataset_id, source_url=source_url, source_user=source_user, threshold=threshold
    )
    folder = out_dir / ".eval_results"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file_name
    path.write_text(yaml.safe_dump(eval_result_entries_to_yaml(entries), sort_keys=False), encoding="utf-8")
    return path


def _mean(runs: Sequence[RunData], kind: str) -> float | None:
    means = list(method_means(runs, kind).values())
    return math.fsum(means) / len(means) if means else None
