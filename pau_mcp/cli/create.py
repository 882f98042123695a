"""``pau-mcp create SOURCE``, ``pau-mcp create --variants-of SUITE`` and ``pau-mcp create --tasks-for SUITE``: new
suites, variants of a suite's methods, and tasks over a suite's methods.

Exit 0 when a suite was written (refused functions are listed with their reasons), 1 when nothing was kept, the
source could not be read or a model could not be used at all (what was decided is kept: the same command goes on
from there), 2 for usage errors.
"""

from __future__ import annotations

import contextlib
import json
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..config import options
from .common import bar, err, make_sandbox, sandbox_limits, settings_from, step_printer

if TYPE_CHECKING:
    from ..creation.requests import Made, ReportT

__all__ = ["create"]

_KINDS = ("constant", "comparison", "arithmetic", "argument-order", "edge-case", "composition")
_DATASETS = ("cruxeval", "mbpp", "humaneval", "code-alpaca", "magicoder")


@click.command("create")
@click.argument("source", required=False, metavar="[SOURCE]")
@click.option(
    "--from",
    "from_path",
    type=click.Path(exists=True, path_type=Path),
    help="The dataset's rows: a .parquet, .jsonl, .json or .csv file, or a folder (a saved dataset or data files); "
    "without it the dataset is loaded from the Hugging Face hub.",
)
@click.option("--variants-of", "variants_of", metavar="SUITE", help="Make variants of this suite's methods instead.")
@click.option(
    "--tasks-for",
    "tasks_for",
    metavar="SUITE",
    help="Make tasks for this suite instead: questions whose answers chain calls of its methods, drawn from their "
    "hidden tests (the suite must be in a --manifests directory).",
)
@click.option(
    "--hops",
    default="1,2,3",
    show_default=True,
    help="With --tasks-for: the chain lengths wanted, comma-separated (1 to 5).",
)
@click.option(
    "--tasks-per-hop",
    type=click.IntRange(1, 1000),
    default=5,
    show_default=True,
    help="With --tasks-for: tasks wanted of each length.",
)
@click.option(
    "--model", required=True, help="The model that writes validators, inputs and descriptions (provider/model)."
)
@click.option(
    "--suite", help="The new suite's name (default: <dataset>-<split>, the file or folder name, <SUITE>-variants)."
)
@click.option(
    "--split", type=click.Choice(["test", "train"]), help="The suite's split (default: the paper's for the dataset)."
)
@click.option(
    "--gold",
    type=click.Choice(["auto", "docs", "model"]),
    default="auto",
    show_default=True,
    help="Gold descriptions from the source's docs, then the model's (auto); the docs only; the model only.",
)
@click.option(
    "--gold-min-match",
    type=click.FloatRange(0, 1),
    default=0.8,
    show_default=True,
    help="Keep a gold description only if code written from it matches this share of the hidden tests.",
)
@click.option("--examples", type=click.IntRange(1, 10), default=2, show_default=True, help="Examples shown to agents.")
@click.option("--min-tests", type=click.IntRange(1, 1000), default=4, show_default=True, help="Fewest hidden tests.")
@click.option("--max-tests", type=click.IntRange(1, 1000), default=20, show_default=True, help="Most hidden tests.")
@click.option(
    "--inputs", "asked", type=click.IntRange(1, 60), default=20, show_default=True, help="Calls asked of the model."
)
@click.option("--no-validator", is_flag=True, help="Do not add a model-written input validator (the paper did).")
@click.option(
    "--change",
    "changes",
    multiple=True,
    type=click.Choice(_KINDS),
    help="With --variants-of: the kinds of change allowed (repeatable; default all).",
)
@click.option(
    "--per-method",
    type=click.IntRange(1, 10),
    default=1,
    show_default=True,
    help="With --variants-of: variants per method.",
)
@click.option(
    "--tries",
    type=click.IntRange(1, 100),
    default=10,
    show_default=True,
    help="With --variants-of: most changes tried per method.",
)
@click.option(
    "--after",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    metavar="YYYY-MM-DD",
    help="Only functions first published after this day: for a .py file or folder, dated by each file's first git "
    "commit, else its modification time (the report says which).",
)
@click.option("--limit", type=click.IntRange(min=1), help="Only the first N functions (methods).")
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seeds every random choice: the same seed and model replies make the same suite.",
)
@click.option(
    "--state",
    "state_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The state file (default: DATA_DIR/creation/<suite>.jsonl).",
)
@click.option("--restart", is_flag=True, help="Forget the state of an earlier run of this suite and begin again.")
@click.option("--replace", is_flag=True, help="Overwrite an existing suite of that name.")
@click.option("--no-cache", is_flag=True, help="Do not read or write the LLM response cache.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (every function's steps).")
@options(
    "manifests", "data_dir", "cache_dir", "timeout_s", "memory_mb", "max_output_kb", "coder_model", "pricing",
    "model_capabilities", "llm_timeout_s", "llm_deadline_s", "llm_max_reply_mb", "llm_concurrency", "llm_retries",
)  # fmt: skip
def create(
    source: str | None, from_path: Path | None, variants_of: str | None, tasks_for: str | None, hops: str,
    tasks_per_hop: int, model: str, suite: str | None,
    split: str | None, gold: str, gold_min_match: float, examples: int, min_tests: int, max_tests: int, asked: int,
    no_validator: bool, changes: tuple[str, ...], per_method: int, tries: int, after: datetime | None,
    limit: int | None, seed: int,
    state_path: Path | None, restart: bool, replace: bool, no_cache: bool, as_json: bool, **values: Any,
) -> None:  # fmt: skip
    """Make a new suite from SOURCE the way the paper made PAU, or variants of a suite's methods.

    SOURCE is one of the paper's datasets (cruxeval, mbpp, humaneval, code-alpaca, magicoder), read with the
    Hugging Face `datasets` library from --from or the hub, or a .py file or folder of your own functions. Each
    function is anonymised, given an input validator and model-proposed inputs run in the sandbox, split into
    examples and coverage-chosen hidden tests, and kept only if code written from its gold description matches
    --gold-min-match of those tests. Every function's outcome is recorded; an interrupted run goes on where it
    stopped. The suite is written under the first --manifests directory and never published.
    """
    from ..creation import CreateOptions
    from ..creation.requests import SuiteRequest, make_suite

    if tasks_for is not None:
        if source is not None or variants_of is not None:
            raise click.UsageError("--tasks-for makes tasks for an existing suite: give no SOURCE and no --variants-of")
        _create_tasks(tasks_for, hops, tasks_per_hop, model, seed, replace, no_cache, as_json, values)
        return
    _check_choices(source, from_path, variants_of, after, changes, per_method, tries, gold, min_tests, max_tests)
    directories = values.get("manifests") or ()
    if not directories:
        raise click.UsageError(
            "say where the new suite goes: --manifests DIR or PAU_MCP_MANIFESTS (created if missing; created suites "
            "are yours and private, never part of the packaged ones)"
        )
    with contextlib.suppress(OSError):  # a path that cannot be a directory is reported by the settings
        Path(directories[0]).expanduser().mkdir(parents=True, exist_ok=True)
    settings = settings_from(values)
    chosen = CreateOptions(
        model=model, coder_model=settings.coder_model or model, gold=gold, gold_min_match=gold_min_match,
        examples=examples, min_tests=min_tests, max_tests=max_tests, inputs=asked, validator=not no_validator,
        seed=seed, changes=changes or _KINDS, per_method=per_method, tries=tries, limits=sandbox_limits(settings),
        after=after.date().isoformat() if after is not None else None, jobs=settings.llm_concurrency,
    )  # fmt: skip
    request = SuiteRequest(
        options=chosen, source=source, from_path=from_path, variants_of=variants_of, suite=suite, split=split,
        after=after.date() if after is not None else None, limit=limit, state_path=state_path, replace=replace,
        restart=restart, use_cache=not no_cache,
    )  # fmt: skip
    made = make_suite(request, settings, sandbox=lambda: make_sandbox(settings, progress=step_printer()), progress=bar)
    report = _made(made)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        click.echo("\n".join(report.lines()))
    if report.unpriced:
        err.print(
            f"[yellow]no price for {', '.join(report.unpriced)}: add it to a copy of pricing.json (--pricing)[/yellow]"
        )
    sys.exit(0 if report.wrote else 1)


def _check_choices(
    source: str | None, from_path: Path | None, variants_of: str | None, after: datetime | None,
    changes: tuple[str, ...], per_method: int, tries: int, gold: str, min_tests: int, max_tests: int,
) -> None:  # fmt: skip
    """Refuse options that do not go together (a usage error, exit 2)."""
    if (source is None) == (variants_of is None):
        raise click.UsageError("give a SOURCE (a dataset or a .py file or folder) or --variants-of SUITE, not both")
    if from_path is not None and source not in _DATASETS:
        raise click.UsageError(f"--from names a file of a dataset's rows: give SOURCE as one of {', '.join(_DATASETS)}")
    if after is not None and (source is None or source in _DATASETS):
        raise click.UsageError(
            "--after chooses functions by the day they were first published, which only your own files carry: give "
            "a .py file or folder as SOURCE (the datasets' rows have no dates)"
        )
    if variants_of is None and (changes or per_method != 1 or tries != 10):
        raise click.UsageError("--change, --per-method and --tries go with --variants-of")
    if variants_of is not None and gold == "docs":
        raise click.UsageError("a variant has no docs of its own: its gold is the model's (leave --gold out)")
    if min_tests > max_tests:
        raise click.UsageError(f"--min-tests {min_tests} is above --max-tests {max_tests}")


def _made(made: Made[ReportT]) -> ReportT:
    """The report of what was made; a refusal ends the command (exit 2 for usage, else 1)."""
    if made.status == "usage":
        raise click.UsageError(made.message)
    if made.report is None:
        raise click.ClickException(made.message)
    return made.report


def _create_tasks(
    suite: str, hops: str, per_hop: int, model: str, seed: int, replace: bool, no_cache: bool, as_json: bool,
    values: dict[str, Any],
) -> None:  # fmt: skip
    """``create --tasks-for SUITE``: tasks drawn from the suite's tests, questions by ``model``, answers frozen."""
    from ..creation.requests import TasksRequest, make_tasks
    from ..creation.tasks import TaskOptions
    from ..manifests import MAX_TASK_STEPS

    try:
        lengths = tuple(sorted({int(part) for part in hops.split(",") if part.strip()}))
    except ValueError:
        raise click.UsageError(f"--hops {hops}: give chain lengths as numbers, e.g. 1,2,3") from None
    if not lengths or not all(1 <= n <= MAX_TASK_STEPS for n in lengths):
        raise click.UsageError(f"--hops {hops}: each chain length is from 1 to {MAX_TASK_STEPS}")
    settings = settings_from(values)
    options = TaskOptions(model=model, hops=lengths, per_hop=per_hop, seed=seed, limits=sandbox_limits(settings))
    request = TasksRequest(suite, options, replace=replace, use_cache=not no_cache)
    made = make_tasks(request, settings, sandbox=lambda: make_sandbox(settings, progress=step_printer()),
                      progress=step_printer())  # fmt: skip
    report = _made(made)
    if as_json:
        click.echo(json.dumps({"suite": report.suite, "made": report.made, "refused": report.refused,
                               "short": report.short}, indent=2))  # fmt: skip
    else:
        click.echo("\n".join(report.lines()))
    sys.exit(0 if report.wrote else 1)
