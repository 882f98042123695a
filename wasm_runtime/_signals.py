"""Keeping wasmtime's trap handlers in front of the process's fatal-signal handlers.

wasmtime turns a guest's trap (a stack overflow, an out-of-bounds access) into an error through the
process's SIGILL, SIGSEGV, SIGFPE and SIGBUS handlers, which it installs when the first engine is made.
A handler installed after that one takes the signal first: Python's ``faulthandler.enable()`` (which Ray
calls in its worker processes, among others) then reports a "fatal error" and ends the process, so one
hostile function would kill the host. Before each run the sandbox puts wasmtime's handlers back where
another has replaced them. wasmtime still hands signals that are not a guest's trap on to the handler
that was there before it; one installed later no longer sees them.

The ``sigaction`` records are copied as opaque bytes (the handler is their first field on Linux and
macOS), so nothing here depends on the C library's layout beyond that. No lock is taken: a process may fork
while another thread is inside a run (RL trainers' workers do), and a child must not inherit a held lock;
two threads restoring at once both write the same record.
"""

from __future__ import annotations

import ctypes
import logging
import signal
import sys

__all__ = ["remember_trap_handlers", "restore_trap_handlers"]

log = logging.getLogger(__name__)

_SIGNALS = tuple(getattr(signal, name) for name in ("SIGILL", "SIGSEGV", "SIGFPE", "SIGBUS") if hasattr(signal, name))
_RECORD_BYTES = 512  # larger than any platform's struct sigaction
_saved: dict[int, ctypes.Array[ctypes.c_char]] = {}
_warned = False


def _libc() -> ctypes.CDLL | None:
    if sys.platform == "win32":  # pragma: no cover - wasmtime uses structured exceptions there
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover - no C library to ask
        return None


_LIBC = _libc()


def _current(signum: int) -> ctypes.Array[ctypes.c_char] | None:
    assert _LIBC is not None
    record = ctypes.create_string_buffer(_RECORD_BYTES)
    if _LIBC.sigaction(signum, None, record) != 0:
        return None
    return record


def _handler(record: ctypes.Array[ctypes.c_char]) -> int | None:
    return ctypes.c_void_p.from_buffer(record).value


def remember_trap_handlers() -> None:
    """Record the handlers wasmtime installed; call once an engine exists (later calls keep the first record)."""
    if _LIBC is None:
        return
    if _saved:
        return
    found = {}
    for signum in _SIGNALS:
        record = _current(signum)
        if record is not None and _handler(record) not in (None, 0, 1):  # SIG_DFL, SIG_IGN: not installed
            found[signum] = record
    _saved.update(found)


def restore_trap_handlers() -> bool:
    """Put wasmtime's handlers back where another replaced them; True if any was replaced."""
    if not _saved or _LIBC is None:
        return False
    replaced = []
    for signum, record in list(_saved.items()):
        current = _current(signum)
        if current is not None and _handler(current) != _handler(record):
            _LIBC.sigaction(signum, record, None)
            replaced.append(signal.Signals(signum).name)
    if replaced:
        global _warned
        if not _warned:
            _warned = True
            log.warning(
                "another handler (faulthandler?) replaced the sandbox's for %s: put back, so that a function's "
                "crash stays an error result instead of ending this process",
                ", ".join(replaced),
            )
    return bool(replaced)
