"""The sandbox the settings describe: its limits and, for a server or scorer under load, worker processes.

Typed builders over ``wasm_runtime`` for the places that wire a sandbox (the commands, ``create_service``,
``Scorer.from_settings``, Ray workers); ``Settings`` itself only holds values.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Literal, Protocol, overload

from wasm_runtime import Limits, Sandbox, SandboxInterface
from wasm_runtime.workers import WorkerSandbox

from .config import Settings
from .fairness import FairShare

__all__ = ["SandboxMaker", "make_sandbox", "sandbox_limits", "shared_sandbox"]


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
            workers=settings.workers, limits=sandbox_limits(settings), cache_dir=settings.cache_dir, progress=progress
        )
    return Sandbox(limits=sandbox_limits(settings), cache_dir=settings.cache_dir, progress=progress)


def shared_sandbox(settings: Settings) -> tuple[Settings, FairShare]:
    """The settings of a sandbox that many credentials share (a server's calls, submissions scored for feedback or
    by the scorer endpoint), and the fair share in front of it.

    The workers for everyone are ``workers`` (one per CPU by default); as many again are reserved for a credential
    holding no turn, so that its call starts at once however long others' calls run (``FairShare``): they are
    started only when needed. With ``workers`` 0 (calls in the process itself) the share still orders the calls.
    """
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    everyone = settings.workers or max(1, cpus)
    if settings.workers == 0:
        return settings, FairShare(2, 1)
    return settings.model_copy(update={"workers": 2 * everyone}), FairShare(2 * everyone, everyone)
