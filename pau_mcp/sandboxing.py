"""The sandbox the settings describe: its limits and, for a server or scorer under load, worker processes.

Typed builders over ``wasm_runtime`` for the places that wire a sandbox (the commands, ``create_service``,
``Scorer.from_settings``, Ray workers); ``Settings`` itself only holds values.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, Protocol, overload

import anyio

from wasm_runtime import Limits, Outcome, Sandbox, SandboxInterface
from wasm_runtime.build import artifacts
from wasm_runtime.workers import WorkerSandbox

from .config import Settings
from .fairness import FairShare

__all__ = [
    "BackgroundSandbox", "SandboxMaker", "SandboxNotReady", "background", "make_sandbox", "sandbox_limits",
    "shared_sandbox",
]  # fmt: skip


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


#: How much lower than the server's a background build's CPU priority is (``nice``).
_BUILD_NICENESS = 10


class SandboxNotReady(RuntimeError):
    """A call reached a sandbox that is still being built; the message says how long it has taken and what to do."""


class BackgroundSandbox(SandboxInterface):
    """A sandbox made in the background, so that a server answers its clients before the first build is done.

    On a machine whose cache lacks the guest component, the first start builds it (a minute or two of CPU; docs/
    sandbox.md). Made here, the sandbox is built by ``pau-mcp sandbox build`` in a process of its own (its progress
    lines go to ``progress``, so the server's own process spends nothing on it) and then loaded; meanwhile a call
    waits up to ``wait_s`` for it and, if it is still not ready, is refused with ``SandboxNotReady`` (it did not run
    and does not count). A cached component makes it ready once its first worker has started (well under a second).

    Args:
        settings: Its limits and cache directory.
        maker: Makes the real sandbox once the component is built (``make_sandbox``).
        progress: Receives the build's progress lines.
        processes: As ``make_sandbox``'s.
        wait_s: How long a call waits for a sandbox still being built.
    """

    def __init__(
        self, settings: Settings, maker: SandboxMaker, progress: Callable[[str], None] | None = None,
        processes: bool = False, wait_s: float = 10.0,
    ) -> None:  # fmt: skip
        self.limits = sandbox_limits(settings)
        self._ready = threading.Event()
        self._box: SandboxInterface | None = None
        self._failure: str | None = None
        self._builder: subprocess.Popen[bytes] | None = None
        self._building = False
        self._started = time.monotonic()
        self.wait_s = wait_s
        say = progress or (lambda _line: None)

        def prepare() -> None:
            try:
                if not artifacts(settings.cache_dir).built:
                    self._building = True
                    self._build(settings, say)
                if not self._closed:
                    self._box = maker(settings, progress=say, processes=processes)
            except Exception as exc:  # reported to every call that needed it
                self._failure = f"the sandbox could not be built or started: {exc}"
                say(self._failure)
            finally:
                self._ready.set()

        threading.Thread(target=prepare, name="pau-mcp-sandbox-build", daemon=True).start()

    def _build(self, settings: Settings, say: Callable[[str], None]) -> None:
        command = [sys.executable, "-m", "pau_mcp", "sandbox", "build"]
        if settings.cache_dir is not None:
            command += ["--cache-dir", str(settings.cache_dir)]
        say("building the sandbox in the background (first start on this machine); calls wait for it")
        self._builder = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        # Below the server in the CPU's queue: on a busy machine the build (both cores for minutes) took the CPU the
        # server needed to start and answer the handshake. The processes it starts inherit the priority.
        with contextlib.suppress(OSError, AttributeError):  # not POSIX, or the build has already ended
            os.setpriority(os.PRIO_PROCESS, self._builder.pid, _BUILD_NICENESS)
        # A server that exits (its host closed stdin) takes the build it no longer needs with it.
        atexit.register(_stop, self._builder)
        assert self._builder.stderr is not None
        for raw in self._builder.stderr:
            say(raw.decode("utf-8", "replace").rstrip())
        if self._builder.wait() != 0 and not self._closed:
            raise RuntimeError(
                f"`pau-mcp sandbox build` failed (exit code {self._builder.returncode}); run it to see why"
            )

    @property
    def ready(self) -> bool:
        """Whether the sandbox is built and started."""
        return self._box is not None

    def _now(self) -> SandboxInterface:
        self._check_open()
        if self._box is None:
            raise SandboxNotReady(self._not_ready())
        return self._box

    def _not_ready(self) -> str:
        if self._failure is not None:
            return f"{self._failure}; tell the server's operator (pau-mcp sandbox build shows the error)"
        if not self._building:  # built already: only its worker processes are starting
            return (
                f"the sandbox is still starting ({time.monotonic() - self._started:.0f} s so far): this call did not "
                "run and does not count; call again shortly"
            )
        return (
            f"the sandbox is still being built (first start on this machine, {time.monotonic() - self._started:.0f} s "
            "so far; it takes a minute or two): this call did not run and does not count; call again shortly"
        )

    def _wait(self) -> SandboxInterface:
        self._ready.wait()
        return self._now()

    def run(
        self, source: str, inputs: Iterable[str | tuple[Any, ...]], entry: str = "test_func",
        limits: Limits | None = None, fresh: bool = False, engine: str | None = None,
    ) -> list[Outcome]:  # fmt: skip
        return self._wait().run(source, inputs, entry=entry, limits=limits, fresh=fresh, engine=engine)

    def info(self) -> dict[str, Any]:
        return self._wait().info()

    async def arun(
        self, source: str, inputs: Sequence[str | tuple[Any, ...]], entry: str = "test_func",
        limits: Limits | None = None, fresh: bool = False, engine: str | None = None,
    ) -> list[Outcome]:  # fmt: skip
        with anyio.move_on_after(self.wait_s):
            while not self._ready.is_set():
                await anyio.sleep(0.1)
        return await self._now().arun(source, inputs, entry=entry, limits=limits, fresh=fresh, engine=engine)

    async def aparse_arguments(self, text: str, limiter: anyio.CapacityLimiter | None = None) -> tuple[Any, ...]:
        if self._box is None:  # a literal can be parsed without the sandbox
            return await super().aparse_arguments(text, limiter)
        return await self._box.aparse_arguments(text, limiter)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._builder is not None and self._builder.poll() is None:
            self._builder.terminate()  # a build nobody will use: its CPU goes back to the machine
        if self._box is not None:
            self._box.close()


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()


def background(maker: SandboxMaker) -> SandboxMaker:
    """``maker``, made in the background (a ``BackgroundSandbox``: what a stdio server starts with), built first if
    the guest component is not.

    With a built component too: its first worker process takes 0.2-0.5 s to start (an interpreter, wasmtime, the
    component loaded), which the server waited for before it read its first request; now it starts beside the
    handshake, and a call that comes sooner waits for it.
    """

    def make(
        settings: Settings, progress: Callable[[str], None] | None = None, processes: bool = False
    ) -> SandboxInterface:
        return BackgroundSandbox(settings, maker, progress, processes)

    return make
