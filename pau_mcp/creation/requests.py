"""A creation request carried out end to end (``pau-mcp create``): the source loaded or the suite found, the
models checked, then the suite, its variants or its tasks made, with what went wrong as data."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Generic, Literal, TypeVar

from .. import eventloop
from ..llm import LLMClient, LLMError
from ..manifests import ManifestError, ManifestStore
from ..manifests.importers import DatasetUnavailable, ImportTargetError, Progress
from ..manifests.importers.common import no_progress, suite_name_from
from .outcomes import CreationReport
from .pipeline import CreateOptions, create_suite, create_variants
from .sources import Source, load_source
from .state import StateError
from .tasks import TaskOptions, TasksReport, create_tasks

if TYPE_CHECKING:
    from wasm_runtime import Sandbox, SandboxInterface

    from ..config import Settings

__all__ = ["Made", "SuiteRequest", "TasksRequest", "default_suite_name", "make_suite", "make_tasks"]

ReportT = TypeVar("ReportT", CreationReport, TasksReport)
T = TypeVar("T")


@dataclass(frozen=True)
class Made(Generic[ReportT]):
    """What a creation request came to.

    Attributes:
        status: ``made`` (the report says what was kept: maybe nothing); ``usage`` (the request is wrong: the
            message says what to change); ``error`` (the source, the suite or a model could not be used; what was
            decided so far is kept).
        message: Why nothing was made, unless made.
        report: What was made and refused, when made.
    """

    status: Literal["made", "usage", "error"]
    message: str = ""
    report: ReportT | None = None


@dataclass(frozen=True)
class SuiteRequest:
    """A new suite from a source, or variants of a suite's methods.

    Attributes:
        options: How the functions are made; its ``split`` is replaced by ``split`` or the source's.
        source: A dataset's name, or a .py file or folder; None for variants.
        from_path: The dataset's rows (None: from the hub).
        variants_of: The suite whose methods get variants; None for a source.
        suite: The new suite's name (default: ``default_suite_name`` or ``<SUITE>-variants``).
        split: The suite's split (default: the source's, else ``test``).
        after: Only functions first published after this day.
        limit: Only the first N functions (methods).
        state_path: The state file (default: ``DATA_DIR/creation/<suite>.jsonl``).
        replace: Overwrite an existing suite of that name.
        restart: Forget the state of an earlier run and begin again.
        use_cache: Read and write the LLM response cache.
    """

    options: CreateOptions
    source: str | None = None
    from_path: Path | None = None
    variants_of: str | None = None
    suite: str | None = None
    split: str | None = None
    after: date | None = None
    limit: int | None = None
    state_path: Path | None = None
    replace: bool = False
    restart: bool = False
    use_cache: bool = True


@dataclass(frozen=True)
class TasksRequest:
    """Tasks for a suite of a ``--manifests`` directory, drawn from its methods' hidden tests.

    Attributes:
        suite: The suite.
        options: What tasks to make.
        replace: Overwrite the suite's tasks.
        use_cache: Read and write the LLM response cache.
    """

    suite: str
    options: TaskOptions
    replace: bool = False
    use_cache: bool = True


def default_suite_name(loaded: Source, split: str | None) -> str:
    """``<dataset>-<split>``, or a name made from the file or folder of your functions."""
    if loaded.name == "python":
        path = Path(loaded.label)
        return suite_name_from(path.stem if path.is_file() else path.resolve().name)
    return f"{loaded.name}-{split or loaded.split}"


def _checked_llm(settings: Settings, use_cache: bool, *models: str) -> LLMClient | str:
    """An LLM client that knows ``models``, or why it cannot be had."""
    try:
        llm = LLMClient.from_settings(settings, use_cache=use_cache)
        for model in models:
            llm.check(model)
    except LLMError as exc:
        return str(exc)
    return llm


def _closing(llm: LLMClient, work: Callable[[], Awaitable[T]]) -> T:
    """Run ``work`` on the event loop, the client's connections closed when it ends, however it ends."""

    async def main() -> T:
        try:
            return await work()
        finally:
            await llm.aclose()

    return eventloop.run(main)


def make_suite(
    request: SuiteRequest,
    settings: Settings,
    *,
    sandbox: Callable[[], Sandbox],
    progress: Progress = no_progress,
) -> Made[CreationReport]:
    """Make a new suite from a source, or variants of a suite's methods, written under the first ``--manifests``
    directory; an interrupted request goes on where it stopped.

    Args:
        request: What to make.
        settings: Manifests, data directory (datasets, state files), models and their limits.
        sandbox: Makes the sandbox the functions run in, once the source and the models are known to be usable.
        progress: A progress bar factory.
    """
    loaded = None
    try:
        if request.source is not None:
            loaded = load_source(
                request.source, request.from_path, cache_dir=settings.data_dir / "datasets", limit=request.limit,
                after=request.after,
            )  # fmt: skip
    except DatasetUnavailable as exc:
        return Made("error", str(exc))
    name = request.suite or (
        default_suite_name(loaded, request.split) if loaded is not None else f"{request.variants_of}-variants"
    )
    llm = _checked_llm(settings, request.use_cache, request.options.model, request.options.coder_model)
    if isinstance(llm, str):
        return Made("usage", llm)
    split = request.split or (loaded.split if loaded is not None else "test")
    options = dataclasses.replace(request.options, split=split)
    state = request.state_path or settings.data_dir / "creation" / f"{name}.jsonl"
    store = ManifestStore(settings.manifests)
    box = sandbox()

    def work() -> Awaitable[CreationReport]:
        if loaded is not None:
            return create_suite(
                loaded, llm=llm, sandbox=box, store=store, suite=name, options=options,
                state_path=state, replace=request.replace, restart=request.restart, progress=progress,
            )  # fmt: skip
        assert request.variants_of is not None  # no source, so variants
        return create_variants(
            request.variants_of, llm=llm, sandbox=box, store=store, suite=name, options=options,
            state_path=state, replace=request.replace, restart=request.restart, limit=request.limit,
            progress=progress,
        )  # fmt: skip

    try:
        return Made("made", report=_closing(llm, work))
    except (ImportTargetError, StateError) as exc:
        return Made("usage", str(exc))
    except ManifestError as exc:
        return Made("error", str(exc))
    except LLMError as exc:
        return Made("error", f"{exc}\nWhat was decided so far is kept in {state}: run the same command again to go on.")


def make_tasks(
    request: TasksRequest,
    settings: Settings,
    *,
    sandbox: Callable[[], SandboxInterface],
    progress: Callable[[str], None] | None = None,
) -> Made[TasksReport]:
    """Make tasks for a suite of a ``--manifests`` directory (a packaged suite is not rewritten in place): chains
    drawn from its methods' hidden tests, questions by the request's model, answers frozen.

    Args:
        request: What to make.
        settings: Manifests, models and their limits.
        sandbox: Makes the sandbox the chains run in, once the suite and the model are known to be usable.
        progress: Told each step.
    """
    store = ManifestStore(settings.manifests)
    try:
        where = store.suite(request.suite).path.parent.resolve()
    except ManifestError as exc:
        return Made("error", str(exc))
    if not any(Path(root).expanduser().resolve() == where for root in store.extra_dirs):
        return Made(
            "usage",
            f"suite {request.suite!r} is part of the pau-mcp installation ({where}) and is not rewritten in place: "
            f"copy it (cp -r {where / request.suite} DIR/) and pass --manifests DIR",
        )
    llm = _checked_llm(settings, request.use_cache, request.options.model)
    if isinstance(llm, str):
        return Made("usage", llm)
    box = sandbox()

    def work() -> Awaitable[TasksReport]:
        return create_tasks(
            request.suite, llm=llm, sandbox=box, store=store, options=request.options, replace=request.replace,
            progress=progress,
        )  # fmt: skip

    try:
        return Made("made", report=_closing(llm, work))
    except ManifestError as exc:
        return Made("error", str(exc))
    except LLMError as exc:
        return Made("error", f"{exc}\nRun the same command again: the questions asked so far are cached.")
    finally:
        box.close()
