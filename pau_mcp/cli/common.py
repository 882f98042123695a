"""What every command shares: settings from options, progress on stderr."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from ..config import Settings, SettingsError

__all__ = ["bar", "err", "settings_from", "step_printer"]

err = Console(stderr=True)


def settings_from(values: dict[str, Any]) -> Settings:
    """Settings from a command's options; a bad value is a usage error (exit 2) naming flag and variable."""
    try:
        return Settings.from_options(**values)
    except SettingsError as exc:
        raise click.UsageError(str(exc)) from None


def step_printer() -> Callable[[str], None]:
    """A callback printing each step to stderr with the time since the first one."""
    started = time.perf_counter()

    def say(line: str) -> None:
        err.print(f"[dim]{time.perf_counter() - started:5.1f}s[/dim] {line}")

    return say


@contextmanager
def bar(description: str, total: int) -> Iterator[Callable[..., None]]:
    """A progress bar on stderr; yields ``advance(n=1)``."""
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=err, transient=False) as progress:
        task = progress.add_task(description, total=total)
        yield lambda *_args, n=1: progress.advance(task, n)
