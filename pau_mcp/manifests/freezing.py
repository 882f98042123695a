"""Freezing your own suites in place (``pau-mcp manifests freeze``): every example and test input run in the
sandbox and its outcome stored, then each task touched answered by its chain of gold functions."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from .checks import freeze_methods, freeze_task
from .importers.common import Progress, no_progress
from .model import Method
from .store import ManifestError, ManifestStore, dump_method, packaged_manifests

if TYPE_CHECKING:
    from wasm_runtime import SandboxInterface

__all__ = ["Frozen", "freeze_suites", "packaged_suite"]


@dataclass
class Frozen:
    """What freezing came to.

    Attributes:
        status: ``frozen`` (see ``failures`` for tasks that could not be answered); ``usage`` (nothing of your own to
            freeze: the message says what to add); ``error`` (a suite is missing or packaged, or its files are
            broken).
        message: Why nothing was frozen, unless frozen.
        methods: Methods frozen.
        changed: Of those, methods whose stored outcomes changed (and were saved).
        outcomes: How many outcomes of each status the frozen methods hold.
        tasks: Tasks that chain a frozen method.
        tasks_changed: Of those, tasks whose stored answer changed (and was saved).
        failures: Each task whose chain cannot answer it, with why.
    """

    status: Literal["frozen", "usage", "error"]
    message: str = ""
    methods: int = 0
    changed: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    tasks: int = 0
    tasks_changed: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)


def packaged_suite(store: ManifestStore, name: str) -> bool:
    """Whether a suite was found among the packaged suites rather than in a ``--manifests`` directory."""
    try:
        packaged = packaged_manifests().resolve()
    except ManifestError:
        return False
    return store.suite(name).path.parent.resolve() == packaged and not any(
        (root / name).is_dir() for root in store.extra_dirs
    )


def _chosen(store: ManifestStore, suites: tuple[str, ...], method_ids: tuple[str, ...]) -> list[Method] | Frozen:
    """The methods to freeze: those named, else every method of the suites (default: all of your own)."""
    try:
        names = list(suites) or [n for n in store.names() if not packaged_suite(store, n)]
        if not names and not method_ids:
            return Frozen("usage", "no suites of your own to freeze; add their directory with --manifests")
        methods = [store.method(i) for i in method_ids] if method_ids else list(store.methods(names))
        for name in sorted({m.suite for m in methods}):
            if packaged_suite(store, name):
                where = store.suite(name).path
                return Frozen(
                    "error",
                    f"suite {name!r} is part of the pau-mcp installation ({where}) and is not rewritten in place: "
                    f"copy it (cp -r {where} DIR/) and pass --manifests DIR, or pass the directory that holds it "
                    "with --manifests to freeze it there",
                )
    except ManifestError as exc:
        return Frozen("error", str(exc))
    return methods


def _freeze_tasks(store: ManifestStore, methods: list[Method], sandbox: SandboxInterface, frozen: Frozen) -> None:
    """Answer again every task that chains one of ``methods``, saving those whose answer changed."""
    touched = {m.id for m in methods}
    tasks = [
        task for name in sorted({m.suite for m in methods}) for task in store.suite(name).tasks.values()
        if any(step.method in touched for step in task.steps)
    ]  # fmt: skip
    frozen.tasks = len(tasks)
    for task in tasks:
        suite = store.suite(task.suite)
        answered, problem = freeze_task(task, suite.methods, sandbox)
        if problem is not None:
            frozen.failures.append((task.id, problem))
            continue
        if answered != task:
            suite.save_task(answered)
            frozen.tasks_changed += 1


def freeze_suites(
    store: ManifestStore,
    *,
    suites: tuple[str, ...] = (),
    method_ids: tuple[str, ...] = (),
    sandbox: Callable[[], SandboxInterface],
    progress: Progress = no_progress,
) -> Frozen:
    """Freeze methods of your own suites in place, then answer the tasks that chain them.

    Args:
        store: The suites; a packaged suite is refused (it is not rewritten in place).
        suites: Only these suites (default: every suite of your own).
        method_ids: Only these methods.
        sandbox: Makes the sandbox the inputs run in, once there is something to freeze.
        progress: A progress bar factory.
    """
    methods = _chosen(store, suites, method_ids)
    if isinstance(methods, Frozen):
        return methods
    box = sandbox()
    with progress("freezing", len(methods)) as advance:
        frozen_methods = freeze_methods(methods, box, progress=advance)
    frozen = Frozen("frozen", methods=len(frozen_methods))
    for old, new in zip(methods, frozen_methods, strict=False):
        if dump_method(old) != dump_method(new):
            store.suite(new.suite).save(new)
            frozen.changed += 1
    statuses = Counter(c.outcome.status for m in frozen_methods for c in (*m.examples, *m.tests) if c.outcome)
    frozen.outcomes = dict(sorted(statuses.items()))
    _freeze_tasks(store, methods, box, frozen)
    return frozen
