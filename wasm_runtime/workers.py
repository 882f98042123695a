"""The sandbox in worker processes: the same interface as ``Sandbox``, one process per core.

Fresh instances are created and torn down constantly; inside one process,
concurrent calls contend for the kernel's memory map of that process (page
faults, mmap and munmap all take its lock), so two threads together do less
than two processes. A server under load therefore runs its calls in worker
processes, each with its own ``Sandbox``. Requests and outcomes cross a pipe
as length-prefixed pickles between this trusted host code and its own
workers; the untrusted code stays inside WebAssembly in the worker.

Run a worker by hand with ``python -m wasm_runtime.workers`` (it speaks on
stdin/stdout); ``WorkerSandbox`` starts and restarts them itself.
"""

from __future__ import annotations

import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO

import anyio

from .build import GuestArtifacts, Progress, ensure_built
from .limits import Limits
from .outcome import Outcome, Status

__all__ = ["WorkerError", "WorkerSandbox"]

_HEADER = struct.Struct("!I")


class WorkerError(RuntimeError):
    """A worker process could not start; the message carries its error output."""


def _send(stream: BinaryIO, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _receive(stream: BinaryIO) -> Any:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError("the worker closed its pipe")
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the worker closed its pipe")
    return pickle.loads(data)


class _Worker:
    """One worker process and its pipes."""

    def __init__(self, limits: Limits, cache_dir: Path | None, pool_size: int) -> None:
        command = [sys.executable, "-m", "wasm_runtime.workers"]
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin: BinaryIO = self.process.stdin
        self.stdout: BinaryIO = self.process.stdout
        _send(self.stdin, ("start", limits, str(cache_dir) if cache_dir else None, pool_size))

    def ready(self) -> None:
        try:
            reply = _receive(self.stdout)
        except EOFError:
            error = self.process.stderr.read().decode(errors="replace") if self.process.stderr else ""
            raise WorkerError(f"a sandbox worker failed to start:\n{error[-2000:]}") from None
        if reply != "ready":
            raise WorkerError(f"a sandbox worker failed to start: {reply}")
        # Its stderr is drained in the background so a chatty worker never blocks on a full pipe.
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        stream = self.process.stderr
        if stream is not None:
            for _ in iter(lambda: stream.read(4096), b""):
                pass

    def request(self, message: Any) -> Any:
        _send(self.stdin, message)
        return _receive(self.stdout)

    def stop(self) -> None:
        try:
            self.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()


class WorkerSandbox:
    """``Sandbox`` behind worker processes: the same calls, spread over ``workers`` processes.

    Args:
        workers: Worker processes (default: one per available CPU).
        limits: Default limits for calls that do not give their own.
        cache_dir: Where the built component is cached.
        progress: Receives progress lines if the component must be built first (built here, once).
        pool_size: Warm instances each worker keeps ready (see ``Sandbox``).
    """

    def __init__(
        self,
        workers: int | None = None,
        limits: Limits | None = None,
        cache_dir: Path | None = None,
        progress: Progress | None = None,
        pool_size: int = 1,
    ) -> None:
        self.limits = limits or Limits()
        self.artifacts: GuestArtifacts = ensure_built(cache_dir, progress)
        self._cache_dir = cache_dir
        self._pool_size = pool_size
        count = workers or max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
        self._idle: queue.Queue[_Worker] = queue.Queue()
        started = [_Worker(self.limits, cache_dir, pool_size) for _ in range(count)]
        try:
            for worker in started:
                worker.ready()
                self._idle.put(worker)
        except WorkerError:
            for worker in started:
                worker.stop()
            raise
        self._count = count
        self._limiter = anyio.CapacityLimiter(count)

    @property
    def workers(self) -> int:
        """Number of worker processes."""
        return self._count

    def run(
        self,
        source: str,
        inputs: Iterable[str | tuple[Any, ...]],
        entry: str = "test_func",
        limits: Limits | None = None,
        fresh: bool = False,
    ) -> list[Outcome]:
        """``Sandbox.run`` in the next free worker."""
        items = list(inputs)
        worker = self._idle.get()
        try:
            reply = worker.request(("run", source, items, entry, limits or self.limits, fresh))
        except (EOFError, OSError, BrokenPipeError):
            # The worker process died (a host fault, never a guest's doing): replace it; report the call as a crash.
            worker.stop()
            worker = _Worker(self.limits, self._cache_dir, self._pool_size)
            worker.ready()
            return [Outcome.failure(Status.CRASH, "WorkerDied", "the sandbox process stopped; the call was not completed") for _ in items]
        finally:
            self._idle.put(worker)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def call(self, source: str, arguments: str | tuple[Any, ...], entry: str = "test_func", limits: Limits | None = None) -> Outcome:
        """``Sandbox.call`` in the next free worker."""
        return self.run(source, [arguments], entry=entry, limits=limits)[0]

    async def arun(
        self, source: str, inputs: Sequence[str | tuple[Any, ...]], entry: str = "test_func",
        limits: Limits | None = None, fresh: bool = False,
    ) -> list[Outcome]:  # fmt: skip
        """``run`` from async code, at most one call per worker at once."""
        return await anyio.to_thread.run_sync(
            partial(self.run, source, list(inputs), entry=entry, limits=limits, fresh=fresh), limiter=self._limiter
        )

    async def acall(self, source: str, arguments: str | tuple[Any, ...], entry: str = "test_func", limits: Limits | None = None) -> Outcome:
        """``call`` from async code."""
        return (await self.arun(source, [arguments], entry=entry, limits=limits))[0]

    def info(self) -> dict[str, Any]:
        """``Sandbox.info`` from a worker."""
        worker = self._idle.get()
        try:
            return worker.request(("info",))
        finally:
            self._idle.put(worker)

    def close(self) -> None:
        """Stop every worker."""
        while not self._idle.empty():
            self._idle.get_nowait().stop()


def _serve(stdin: BinaryIO, stdout: BinaryIO) -> None:
    from .sandbox import Sandbox

    message = _receive(stdin)
    _, limits, cache_dir, pool_size = message
    try:
        sandbox = Sandbox(limits=limits, cache_dir=Path(cache_dir) if cache_dir else None, pool_size=pool_size)
    except Exception as exc:  # reported to the parent, which raises WorkerError with it
        _send(stdout, f"{type(exc).__name__}: {exc}")
        return
    _send(stdout, "ready")
    while True:
        try:
            request = _receive(stdin)
        except EOFError:
            return
        try:
            if request[0] == "run":
                _, source, items, entry, call_limits, fresh = request
                reply: Any = sandbox.run(source, items, entry=entry, limits=call_limits, fresh=fresh)
            elif request[0] == "info":
                reply = sandbox.info()
            else:
                reply = ValueError(f"unknown request {request[0]!r}")
        except Exception as exc:  # an infrastructure error travels back and is raised in the parent
            reply = RuntimeError(f"{type(exc).__name__}: {exc}")
        _send(stdout, reply)


if __name__ == "__main__":
    _serve(sys.stdin.buffer, sys.stdout.buffer)
