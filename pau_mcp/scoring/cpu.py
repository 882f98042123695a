"""Scoring's CPU work, off the event loop and one piece at a time.

Reading a submission (finding its code, compiling it on the host, decoding what it handed back, parsing a
request body) costs CPU in proportion to what its author sent. Run on the event loop, it stalls every other
session of the server or endpoint for as long. ``off_loop`` runs it in a worker thread instead, and never two
pieces at once: a thread holds the interpreter's lock for the whole of a C call such as ``ast.parse``, so
several such threads would take turns ahead of the event loop, which then waits for all of them; with one, it
waits at most for one call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import anyio

__all__ = ["off_loop"]

_T = TypeVar("_T")
_ONE_AT_A_TIME = threading.Lock()


def _alone(func: Callable[..., _T], *args: object) -> _T:
    with _ONE_AT_A_TIME:
        return func(*args)


async def off_loop(func: Callable[..., _T], *args: object) -> _T:
    """``func(*args)`` in a worker thread, after any other scoring work running there has finished."""
    return await anyio.to_thread.run_sync(_alone, func, *args)
