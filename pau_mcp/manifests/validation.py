"""Validating suites as they are on disk (``pau-mcp manifests validate``): every method checked (compiles, arity,
every input runs, outcomes reproduce, anonymous) and every task (its answer reproduces, its question gives no
method away), the problems as data."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from .checks import Problem, check_methods, check_task
from .importers.common import Progress, no_progress
from .store import ManifestError, ManifestStore

if TYPE_CHECKING:
    from wasm_runtime import SandboxInterface

__all__ = ["Validation", "validate_suites"]


@dataclass
class Validation:
    """What validating came to.

    Attributes:
        status: ``checked`` (see ``failed``); ``usage`` (no suites found: the message says what to add); ``error``
            (a suite is missing or its files are broken).
        message: Why nothing was checked, unless checked.
        methods: Methods checked.
        tasks: Tasks checked.
        results: Each method's and task's problems, by id (empty: it passed).
    """

    status: Literal["checked", "usage", "error"]
    message: str = ""
    methods: int = 0
    tasks: int = 0
    results: dict[str, list[Problem]] = field(default_factory=dict)

    @property
    def failed(self) -> dict[str, list[Problem]]:
        """The methods and tasks with problems."""
        return {name: problems for name, problems in self.results.items() if problems}

    @property
    def by_check(self) -> Counter[str]:
        """How many problems each check found."""
        return Counter(p.check for problems in self.failed.values() for p in problems)


def validate_suites(
    store: ManifestStore,
    suites: tuple[str, ...] = (),
    *,
    sandbox: Callable[[], SandboxInterface],
    progress: Progress = no_progress,
) -> Validation:
    """Check every method and task of the suites (default: every suite found).

    Args:
        store: The suites.
        suites: Only these suites.
        sandbox: Makes the sandbox the inputs run in, once there is something to check.
        progress: A progress bar factory.
    """
    try:
        names = list(suites) or store.names()
        if not names:
            return Validation("usage", "no suites found; add a directory with --manifests")
        methods = list(store.methods(names))
        tasks = [task for name in names for task in store.suite(name).tasks.values()]
    except ManifestError as exc:
        return Validation("error", str(exc))
    box = sandbox()
    with progress("validating", len(methods)) as advance:
        results = check_methods(methods, box, progress=advance)
    for task in tasks:
        results[task.id] = check_task(task, store.suite(task.suite).methods, box)
    return Validation("checked", methods=len(methods), tasks=len(tasks), results=results)
