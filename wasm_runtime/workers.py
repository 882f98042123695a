"""The sandbox in worker processes: the same interface as ``Sandbox``, up to one process per core.

Fresh instances are created and torn down constantly; inside one process,
concurrent calls contend for the kernel's memory map of that process (page
faults, mmap and munmap all take its lock), so two threads together do less
than two processes. A server under load therefore runs its calls in worker
processes, each with its own ``Sandbox``. Requests and outcomes cross a pipe
as length-prefixed pickles between this trusted host code and its own
workers; the untrusted code stays inside WebAssembly in the worker.

Run a worker by hand with ``python -m wasm_runtime.workers`` (it speaks on
stdin/stdout); ``WorkerSandbox`` starts and restarts them itself, one at
first and another whenever every started one is busy. A worker
ends when its parent process ends, however it ends (``kill -9`` included), and
when its stdin closes.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import select
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Generator, Iterable, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import anyio

from .build import GuestArtifacts, Progress, ensure_built
from .engines import EngineUnavailable, check_python_engine
from .interface import SandboxInterface
from .limits import Limits
from .literals import InvalidInput, parse_arguments
from .outcome import Outcome, Status

__all__ = ["WorkerError", "WorkerSandbox"]

_HEADER = struct.Struct("!I")
_SMALL_REPLY = 16 * 1024 * 1024  # "ready", errors and `info`


def _lost() -> Outcome:
    return Outcome.failure(
        Status.CRASH,
        "WorkerDied",
        "the sandbox worker process running this input stopped before it finished; it was replaced, "
        "so running the input again starts afresh",
    )


def _reply_bound(items: int, limits: Limits) -> int:
    """The largest reply a worker can send for ``items`` inputs: each outcome is capped by the sandbox."""
    return items * 2 * limits.outcome_bytes + (1 << 20)


class WorkerError(RuntimeError):
    """A worker process could not start; the message carries its error output."""


def _send(stream: BinaryIO, message: Any) -> None:
    stream.write(_frame(message))
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
    """One worker process and its pipes.

    The parent's ends are non-blocking file descriptors, so a request can be
    made from a thread (waiting in ``select``) or from the event loop (waiting
    in ``anyio.wait_readable``) without a hop to a worker thread, which cost
    more than the pipe itself.

    A request whose caller was cancelled (a timeout, a closed connection)
    is not forgotten: its exchange, stopped wherever it was, is kept and
    finished by the next request before that one is sent, and its reply is
    dropped. Otherwise that reply, still on its way, would be read as the
    next request's. The worker runs one call at a time, so the next request
    waits for the cancelled call to end either way (its time limit bounds it).
    """

    _unfinished: Generator[str, None, Any] | None = None
    _draining = False

    def __init__(
        self, limits: Limits, cache_dir: Path | None, pool_size: int, parser: bool = False,
        python_engine: str = "component", artifacts: GuestArtifacts | None = None,
    ) -> None:  # fmt: skip
        command = [sys.executable, "-m", "wasm_runtime.workers", "--parent", str(os.getpid())]
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        assert self.process.stdin is not None and self.process.stdout is not None
        self._in = self.process.stdin.fileno()
        self._out = self.process.stdout.fileno()
        os.set_blocking(self._in, False)
        os.set_blocking(self._out, False)
        start = (
            ("parser",) if parser
            else ("start", limits, str(cache_dir) if cache_dir else None, pool_size, python_engine, artifacts)
        )  # fmt: skip
        self._blocking(self._sending(_frame(start)))

    def ready(self) -> None:
        try:
            reply = self._blocking(self._receiving(_SMALL_REPLY))
        except EOFError:
            error = self.process.stderr.read().decode(errors="replace") if self.process.stderr else ""
            raise WorkerError(f"a sandbox worker failed to start:\n{error[-2000:]}") from None
        if reply != "ready":
            raise WorkerError(f"a sandbox worker failed to start: {reply}")
        # Its stderr is drained in the background so a chatty worker never blocks on a full pipe.
        self._draining = True
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        stream = self.process.stderr
        if stream is not None:
            with stream:  # closed here, at the worker's end, rather than by the garbage collector
                for _ in iter(lambda: stream.read(4096), b""):
                    pass

    # The pipe protocol is written once, as generators that yield what they wait for ("read" or "write");
    # ``_blocking`` drives them with select() for threads, ``arequest`` with the event loop.

    def _sending(self, data: bytes) -> Generator[str, None, None]:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self._in, view) :]
            except BlockingIOError:
                yield "write"

    def _receiving(self, limit: int) -> Generator[str, None, Any]:
        """One reply, read into a buffer allocated once at its announced size: linear in the reply's length."""
        header = bytearray()
        while len(header) < _HEADER.size:
            chunk = self._read_some(_HEADER.size - len(header))
            if not chunk:
                yield "read"
            header += chunk
        (size,) = _HEADER.unpack(header)
        if size > limit:
            raise EOFError(f"the worker announced a reply of {size} bytes, more than any reply can be ({limit})")
        body = bytearray(size)
        view = memoryview(body)
        filled = 0
        while filled < size:
            count = self._read_into(view[filled:])
            if not count:
                yield "read"
            filled += count
        return pickle.loads(body)

    def _exchange(self, message: Any, limit: int) -> Generator[str, None, Any]:
        abandoned, self._unfinished = self._unfinished, None
        if abandoned is not None:  # a cancelled request's: its reply comes first, and nobody wants it
            yield from abandoned
        yield from self._sending(_frame(message))
        return (yield from self._receiving(limit))

    def _blocking(self, steps: Generator[str, None, Any]) -> Any:
        try:
            while True:
                wait = next(steps)
                select.select([self._out] if wait == "read" else [], [self._in] if wait == "write" else [], [])
        except StopIteration as done:
            return done.value

    def _read_some(self, wanted: int) -> bytes:
        try:
            chunk = os.read(self._out, wanted)
        except BlockingIOError:
            return b""
        if not chunk:
            raise EOFError("the worker closed its pipe")
        return chunk

    def _read_into(self, view: memoryview) -> int:
        try:
            count = os.readv(self._out, [view])
        except BlockingIOError:
            return 0
        if not count:
            raise EOFError("the worker closed its pipe")
        return count

    def request(self, message: Any, limit: int = _SMALL_REPLY) -> Any:
        """Send a request and wait for its reply (at most ``limit`` bytes), blocking this thread."""
        return self._blocking(self._exchange(message, limit))

    async def arequest(self, message: Any, limit: int = _SMALL_REPLY) -> Any:
        """Send a request and wait for its reply (at most ``limit`` bytes) in the event loop."""
        steps = self._exchange(message, limit)
        try:
            while True:
                if next(steps) == "read":
                    await anyio.wait_readable(self._out)
                else:
                    await anyio.wait_writable(self._in)
        except StopIteration as done:
            return done.value
        except anyio.get_cancelled_exc_class():
            self._unfinished = steps  # the next request finishes it (see the class)
            raise

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            if self.process.stdin is not None:
                self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
        self._close_pipes()

    def kill(self) -> None:
        """End the process at once (it broke the protocol or died) and reap it."""
        with contextlib.suppress(OSError):
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        self._close_pipes()

    def _close_pipes(self) -> None:
        # stderr is the drain thread's to close; a worker that never got that far has its stderr closed here.
        streams = [self.process.stdin, self.process.stdout]
        if not self._draining:
            streams.append(self.process.stderr)
        for stream in streams:
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()


def _frame(message: Any) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


class WorkerSandbox(SandboxInterface):
    """``Sandbox`` behind worker processes: the same calls, spread over up to ``workers`` processes.

    One worker starts with the sandbox, so a worker that cannot start fails here rather than in a call. Another
    starts when a call finds every started worker busy, until there are ``workers``: a server whose calls never
    overlap (one agent over stdio) keeps one process: about 55 MB of memory and 0.1 s of CPU less for each worker it
    never needs. The first call that overlaps others waits once for its worker to start (100-130 ms).

    Args:
        workers: Most worker processes (default: one per available CPU).
        limits: Default limits for calls that do not give their own.
        cache_dir: Where the built component is cached.
        progress: Receives progress lines if the component must be built first (built here, once).
        pool_size: Warm instances each worker keeps ready (see ``Sandbox``).
        python_engine: What runs functions of the standard library in the workers (see ``Sandbox``).
    """

    _limiter: anyio.CapacityLimiter

    def __init__(
        self,
        workers: int | None = None,
        limits: Limits | None = None,
        cache_dir: Path | None = None,
        progress: Progress | None = None,
        pool_size: int = 1,
        python_engine: str = "component",
    ) -> None:
        self.limits = limits or Limits()
        self.artifacts: GuestArtifacts = ensure_built(cache_dir, progress)
        check_python_engine(python_engine, cache_dir, progress)  # built here, once, not by every worker
        self._cache_dir = cache_dir
        self._pool_size = pool_size
        self._python_engine = python_engine
        self._count = workers or max(
            1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        )
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._started = 0
        self._processes: dict[int, subprocess.Popen[bytes]] = {}
        # The process that parses large argument literals (``aparse_arguments``), started on first use.
        self._parsers: queue.Queue[_Worker] = queue.Queue()
        self._parser_started = False
        self._growing = threading.Lock()
        self._reserve()
        self._release(self._grow())
        self._limiter = anyio.CapacityLimiter(self._count)

    @property
    def workers(self) -> int:
        """The most worker processes this sandbox runs at once."""
        return self._count

    @property
    def pids(self) -> list[int]:
        """The process ids of the worker processes running now (for watching their memory and CPU)."""
        return [pid for pid, process in list(self._processes.items()) if process.poll() is None]

    @property
    def started(self) -> int:
        """Worker processes started so far (a replaced one counts once): at least 1, at most ``workers``."""
        return self._started

    def _reserve(self) -> bool:
        """Claim a place for one more worker, if there is one."""
        with self._growing:
            if self._started >= self._count:
                return False
            self._started += 1
            return True

    def _grow(self) -> _Worker:
        """Start the worker whose place ``_reserve`` claimed; a worker that cannot start gives its place back."""
        worker = self._new_worker()
        try:
            worker.ready()
        except WorkerError:
            worker.stop()
            with self._growing:
                self._started -= 1
            raise
        return worker

    def _take(self) -> _Worker:
        """An idle worker, or a new one if every started worker is busy and there is room, or the next released."""
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            return self._grow() if self._reserve() else self._idle.get()

    def run(
        self,
        source: str,
        inputs: Iterable[str | tuple[Any, ...]],
        entry: str = "test_func",
        limits: Limits | None = None,
        fresh: bool = False,
        engine: str | None = None,
    ) -> list[Outcome]:
        """``Sandbox.run`` in the next free worker."""
        self._check_open()
        items = list(inputs)
        limits = limits or self.limits
        worker = self._take()
        try:
            message = ("run", source, items, entry, limits, fresh, engine)
            reply = worker.request(message, _reply_bound(len(items), limits))
        except (EOFError, OSError):
            worker = self._replace(worker)
            return [_lost() for _ in items]
        finally:
            self._release(worker)
        if isinstance(reply, BaseException):
            raise reply
        outcomes: list[Outcome] = reply
        return outcomes

    def _replace(self, dead: _Worker) -> _Worker:
        """A new worker for one that died or broke the protocol (a host fault, never a guest's doing)."""
        dead.kill()
        self._processes.pop(dead.process.pid, None)
        worker = self._new_worker()
        worker.ready()
        return worker

    def _new_worker(self, parser: bool = False) -> _Worker:
        worker = _Worker(
            self.limits, self._cache_dir, self._pool_size, parser=parser, python_engine=self._python_engine,
            artifacts=self.artifacts,
        )  # fmt: skip
        self._processes[worker.process.pid] = worker.process
        return worker

    async def arun(
        self, source: str, inputs: Sequence[str | tuple[Any, ...]], entry: str = "test_func",
        limits: Limits | None = None, fresh: bool = False, engine: str | None = None,
    ) -> list[Outcome]:  # fmt: skip
        """``run`` from async code: the pipe is awaited in the event loop, at most one call per worker at once."""
        self._check_open()
        items = list(inputs)
        limits = limits or self.limits
        async with self._limiter:
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:  # all busy: start one, or wait for one a thread is using, without blocking the loop
                worker = await anyio.to_thread.run_sync(self._take)
            try:
                reply = await worker.arequest(
                    ("run", source, items, entry, limits, fresh, engine), _reply_bound(len(items), limits)
                )
            except (EOFError, OSError):
                worker = await anyio.to_thread.run_sync(self._replace, worker)
                return [_lost() for _ in items]
            finally:
                self._release(worker)
        if isinstance(reply, BaseException):
            raise reply
        outcomes: list[Outcome] = reply
        return outcomes

    async def aparse_arguments(self, text: str, limiter: anyio.CapacityLimiter | None = None) -> tuple[Any, ...]:
        """``parse_arguments(text)`` in a process of its own, one text at a time (``limiter`` is not needed).

        Parsing in a thread of this process holds its interpreter lock: sixteen 64 KiB literals parsed at once
        kept the caller's event loop waiting 1.0-1.7 s. The parsing process is started on first use (about
        0.1 s, a few MB: it has no sandbox); should it fail, the text is parsed in a thread instead.

        Raises:
            InvalidInput: As ``parse_arguments``.
        """
        self._check_open()
        try:
            parser = self._parsers.get_nowait()
        except queue.Empty:
            try:
                parser = await anyio.to_thread.run_sync(self._take_parser)
            except WorkerError:
                return await super().aparse_arguments(text, limiter)
        try:
            reply = await parser.arequest(("parse", text), _SMALL_REPLY)
        except (EOFError, OSError):
            parser.kill()
            with self._growing:
                self._parser_started = False
            return await super().aparse_arguments(text, limiter)
        self._release_parser(parser)
        if isinstance(reply, InvalidInput):
            raise reply
        if isinstance(reply, BaseException):
            raise RuntimeError(f"the argument parser failed: {reply}")
        args: tuple[Any, ...] = reply
        return args

    def _take_parser(self) -> _Worker:
        with self._growing:
            start, self._parser_started = not self._parser_started, True
        if not start:
            return self._parsers.get()
        try:
            parser = self._new_worker(parser=True)
            parser.ready()
        except WorkerError:
            with self._growing:
                self._parser_started = False
            raise
        return parser

    def _release_parser(self, parser: _Worker) -> None:
        if self._closed:
            parser.stop()
        else:
            self._parsers.put(parser)

    def info(self) -> dict[str, Any]:
        """``Sandbox.info`` from a worker."""
        self._check_open()
        worker = self._take()
        try:
            facts: dict[str, Any] = worker.request(("info",))
            return facts
        finally:
            self._release(worker)

    def _release(self, worker: _Worker) -> None:
        """Hand a worker back after a call; one that returns after ``close`` is stopped instead."""
        if self._closed:
            worker.stop()
        else:
            self._idle.put(worker)

    def close(self) -> None:
        """Stop every idle worker, and every busy one as soon as its call returns. Calling it again does nothing."""
        self._closed = True
        for idle in (self._idle, self._parsers):
            while True:
                try:
                    worker = idle.get_nowait()
                except queue.Empty:
                    break
                worker.stop()


def _serve(stdin: BinaryIO, stdout: BinaryIO) -> None:
    from .sandbox import Sandbox

    message = _receive(stdin)
    if message[0] == "parser":
        _serve_parsing(stdin, stdout)
        return
    _, limits, cache_dir, pool_size, python_engine, artifacts = message
    try:
        # One call at a time: the warm instance is prepared between calls, in this thread, never beside a call.
        sandbox = Sandbox(
            limits=limits, cache_dir=Path(cache_dir) if cache_dir else None, pool_size=pool_size, pool_thread=False,
            python_engine=python_engine, artifacts=artifacts,
        )  # fmt: skip
        sandbox.refill()
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
                _, source, items, entry, call_limits, fresh, engine = request
                reply: Any = sandbox.run(source, items, entry=entry, limits=call_limits, fresh=fresh, engine=engine)
            elif request[0] == "info":
                reply = sandbox.info()
            else:
                reply = ValueError(f"unknown request {request[0]!r}")
        except EngineUnavailable as exc:  # travels back as itself: the caller tells the user what to install
            reply = EngineUnavailable(str(exc))
        except Exception as exc:  # an infrastructure error travels back and is raised in the parent
            reply = RuntimeError(f"{type(exc).__name__}: {exc}")
        _send(stdout, reply)
        sandbox.refill()


def _serve_parsing(stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Parse argument literals, one request at a time: the tuple, or the ``InvalidInput`` to raise."""
    _send(stdout, "ready")
    while True:
        try:
            request = _receive(stdin)
        except EOFError:
            return
        reply: Any
        try:
            if request[0] != "parse":
                raise ValueError(f"unknown request {request[0]!r}")
            reply = parse_arguments(request[1])
        except InvalidInput as exc:
            reply = exc
        except Exception as exc:  # an infrastructure error travels back and is raised in the parent
            reply = RuntimeError(f"{type(exc).__name__}: {exc}")
        _send(stdout, reply)


def _die_with_parent(parent: int) -> None:
    """End this process as soon as ``parent`` ends, however it ends (``kill -9`` included).

    A thread waits on a pidfd of the parent (Linux 5.3 and later), or checks
    the parent's pid twice a second elsewhere. ``PR_SET_PDEATHSIG`` is not
    used: it fires when the parent *thread* that started the worker ends, and
    ``WorkerSandbox`` replaces workers from short-lived threads.
    """
    handle = None
    with contextlib.suppress(AttributeError, OSError):
        handle = os.pidfd_open(parent)
    if os.getppid() != parent:  # gone already (this process was handed to another parent)
        os._exit(0)

    def watch() -> None:
        if handle is not None:
            select.select([handle], [], [])
        else:
            while os.getppid() == parent:
                time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="pau-worker-lifeline", daemon=True).start()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--parent":
        _die_with_parent(int(sys.argv[2]))
    _serve(sys.stdin.buffer, sys.stdout.buffer)
