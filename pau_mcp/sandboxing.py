"""The sandbox the settings describe: its limits and, for a server or scorer under load, worker processes.

Typed builders over ``wasm_runtime`` for the places that wire a sandbox (the commands, ``create_service``,
``Scorer.from_settings``, Ray workers); ``Settings`` itself only holds values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol, overload

from wasm_runtime import Limits, Sandbox, SandboxInterface
from wasm_runtime.workers import WorkerSandbox

from .config import Settings

__all__ = ["SandboxMaker", "make_sandbox", "sandbox_limits"]


class SandboxMaker(Protocol):
    """Builds the sandbox some settings describe: ``make_sandbox`` itself, or a stand-in returning an equivalent one
    (the server tests hand their shared sandbox to servers they build in-process, instead of starting workers)."""

    def __call__(
        self, settings: Settings, progress: Callable[[str], None] | None = None, processes: bool = False
    ) -> SandboxInterface: ...


def sandbox_limits(settings: Settings) -> Limits:
    """The limits of every call: wall clock, memory and returned value size."""
    return Limits(
        timeout_s=settings.timeout_s,
        memory_bytes=settings.memory_mb * 1024 * 1024,
        max_output_bytes=settings.max_output_kb * 1024,
    )


@overload
def make_sandbox(
    settings: Settings, progress: Callable[[str], None] | None = None, processes: Literal[False] = False
) -> Sandbox: ...


@overload
def make_sandbox(
    settings: Settings, progress: Callable[[str], None] | None = None, processes: bool = False
) -> SandboxInterface: ...


def make_sandbox(
    settings: Settings, progress: Callable[[str], None] | None = None, processes: bool = False
) -> SandboxInterface:
    """A sandbox with the settings' limits and cache directory: in this process (a ``Sandbox``, which alone can
    trace lines for coverage) unless ``processes`` asks for workers.

    Args:
        settings: Limits, cache directory and ``workers``.
        progress: Receives progress lines if the component must be built first.
        processes: Spread calls over worker processes (``workers``, default one per CPU), as a server
            under load should; otherwise calls run in this process.
    """
    if processes and settings.workers != 0:
        return WorkerSandbox(
            workers=settings.workers, limits=sandbox_limits(settings), cache_dir=settings.cache_dir, progress=progress,
            python_engine=settings.sandbox_engine,
        )  # fmt: skip
    return Sandbox(
        limits=sandbox_limits(settings), cache_dir=settings.cache_dir, progress=progress,
        python_engine=settings.sandbox_engine,
    )  # fmt: skip
