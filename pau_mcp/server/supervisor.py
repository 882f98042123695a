"""One listening socket served by several server processes on one machine (``serve --processes N``).

A server's requests all pass through one event loop, and at about 1.2 ms of CPU per call that loop, not the
sandbox, is what limits one process (docs/benchmarks.md). ``--processes N`` forks N server processes from one
supervisor after it has bound the socket; each accepts connections from it (the kernel hands a connection to one of
them) and builds its own server, sandbox workers and run store connection after the fork, so no thread, pipe or
database handle crosses it. They answer as replicas do (docs/server.md, "Replicas"): budgets, labels, calls and
submissions are in the run store they share, so any of them may answer any request; a handshake-era MCP session
would live in one of them only, which is why ``--processes`` needs ``--stateless``.

The supervisor does nothing else: it starts a process again when one ends unexpectedly (at most ``_RESTARTS``
times in ``_RESTART_WINDOW_S``, then it stops them all and exits 1 so that what supervises it can act), and on
SIGTERM, SIGINT or the end of its stdin (``--exit-with-stdin``) it stops them all, each as one server stops
(open requests get their grace), and exits 0. A process it started ends when the supervisor ends, however it ends
(``PR_SET_PDEATHSIG``, Linux).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import select
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable

__all__ = ["REFUSED", "ProcessesError", "serve_processes"]

log = logging.getLogger("pau_mcp.server")

#: Restarts allowed within the window before the supervisor gives up: a process that cannot stay up (a port's
#: store gone, a broken install) must not be forked again and again.
_RESTARTS = 5
_RESTART_WINDOW_S = 60.0
#: How long the processes get to stop after SIGTERM (their own graceful stop takes a few seconds) before SIGKILL.
_STOP_GRACE_S = 20.0
_PR_SET_PDEATHSIG = 1
#: The exit status of a process refused its start (``SystemExit(2)``: a usage error, the same for every process).
REFUSED = 2


class ProcessesError(RuntimeError):
    """The processes could not be started; the message says why and what to do."""


def serve_processes(count: int, serve_one: Callable[[int], None], *, exit_with_stdin: bool = False) -> int:
    """Fork ``count`` processes that each run ``serve_one(index)``, and supervise them until told to stop.

    Call it from a process that has no thread but the main one (a fork copies only the calling thread, so another
    thread's locks would stay held in the children), after binding the socket ``serve_one`` serves.

    Args:
        count: How many serving processes (at least 1).
        serve_one: Runs one server until it is stopped (SIGTERM); called in the child with its index.
        exit_with_stdin: Stop everything when stdin reaches its end (a parent holding the other end of a pipe).

    Returns:
        The supervisor's exit status: 0 when stopped, ``REFUSED`` when a process was refused its start
        (``serve_one`` raised ``SystemExit(2)``), 1 when the processes kept ending on their own.

    Raises:
        ProcessesError: called with other threads running, or with a count below 1.
    """
    if count < 1:
        raise ProcessesError(f"--processes must be at least 1, not {count}")
    others = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if others:
        raise ProcessesError(f"cannot fork server processes while other threads run ({', '.join(others)})")
    supervisor = _Supervisor(serve_one)
    return supervisor.run(count, exit_with_stdin)


class _Supervisor:
    """The forked processes by index, and the loop that keeps them running."""

    def __init__(self, serve_one: Callable[[int], None]) -> None:
        self._serve_one = serve_one
        self._children: dict[int, int] = {}  # pid -> index
        self._restarts: deque[float] = deque()
        self._stopping = False
        self._pipe: tuple[int, int] = (-1, -1)  # the wake-up pipe: read end, write end

    def run(self, count: int, exit_with_stdin: bool) -> int:
        self._pipe = wake_read, wake_write = os.pipe()
        os.set_blocking(wake_write, False)
        # Signals only set the flag and wake the loop: the loop itself does the waiting and stopping.
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD)}
        signal.set_wakeup_fd(wake_write)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._stop_requested)
        signal.signal(signal.SIGCHLD, lambda _sig, _frame: None)
        try:
            for index in range(count):
                self._fork(index)
            return self._supervise(wake_read, exit_with_stdin)
        finally:
            self._stop_all()
            signal.set_wakeup_fd(-1)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            os.close(wake_read)
            os.close(wake_write)

    def _stop_requested(self, _sig: int, _frame: object) -> None:
        self._stopping = True

    def _fork(self, index: int) -> None:
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child: it never returns into the supervisor's code
            status = 0
            try:
                # The supervisor's wake-up pipe is not this process's: a signal written to its closed number would
                # land in whatever file reuses that number next (the run store's, a connection).
                signal.set_wakeup_fd(-1)
                for fd in self._pipe:
                    os.close(fd)
                _die_with(parent)
                for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
                    signal.signal(sig, signal.SIG_DFL)
                self._serve_one(index)
            except SystemExit as exc:  # a refused start says so with status 2 (``REFUSED``)
                status = exc.code if isinstance(exc.code, int) else 1
            except KeyboardInterrupt:
                pass
            except BaseException:  # reported here: this process must not unwind into the supervisor's loop
                log.exception("server process %d failed", index)
                status = 1
            finally:
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(status)
        self._children[pid] = index

    def _supervise(self, wake: int, exit_with_stdin: bool) -> int:
        watched = [wake]
        if exit_with_stdin:
            watched.append(sys.stdin.fileno())
        while not self._stopping:
            ready, _, _ = select.select(watched, [], [], 1.0)
            if wake in ready:
                with contextlib.suppress(BlockingIOError, InterruptedError):
                    os.read(wake, 512)
            if exit_with_stdin and sys.stdin.fileno() in ready and not os.read(sys.stdin.fileno(), 1 << 16):
                log.info("stdin closed: the parent process is gone; stopping")
                return 0
            ended = self._reap_and_replace()
            if ended is not None:
                return ended
        return 0

    def _reap_and_replace(self) -> int | None:
        """Start again every process that ended on its own; the supervisor's exit status once it must stop instead:
        ``REFUSED`` when a process was refused its start (the others would be too), 1 when they end too often."""
        while self._children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return None
            if pid == 0:
                return None
            index = self._children.pop(pid, None)
            if index is None or self._stopping:
                continue
            if os.WIFEXITED(status) and os.WEXITSTATUS(status) == REFUSED:
                return REFUSED
            now = time.monotonic()
            while self._restarts and now - self._restarts[0] > _RESTART_WINDOW_S:
                self._restarts.popleft()
            if len(self._restarts) >= _RESTARTS:
                log.error(
                    "server processes ended %d times within %.0f s; stopping them all (see the errors above)",
                    len(self._restarts) + 1, _RESTART_WINDOW_S,
                )  # fmt: skip
                return 1
            self._restarts.append(now)
            log.error("server process %d (pid %d) ended (%s); starting it again", index, pid, _status_words(status))
            self._fork(index)
        return None

    def _stop_all(self) -> None:
        for pid in list(self._children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + _STOP_GRACE_S
        while self._children and time.monotonic() < deadline:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                time.sleep(0.05)
            else:
                self._children.pop(pid, None)
        for pid in list(self._children):
            log.error("server process (pid %d) did not stop within %.0f s of SIGTERM; killing it", pid, _STOP_GRACE_S)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        self._children.clear()


def _die_with(parent: int) -> None:
    """End this process when ``parent`` ends, however it ends: set in the forking (main) thread, which lives as long
    as the supervisor does."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # it ended before the request took effect
        os._exit(0)


def _status_words(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"
