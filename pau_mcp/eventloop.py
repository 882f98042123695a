"""The event loop every long-running command runs on: uvloop when it is installed.

The server, the scorer endpoint and the harness spend much of their own CPU in
the event loop and in HTTP parsing; uvloop (with uvicorn's httptools parser)
roughly halves the server's share of a call (docs/benchmarks.md). Both are
dependencies on Linux and macOS; elsewhere the standard asyncio loop is used.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

__all__ = ["run"]

T = TypeVar("T")


def run(func: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run ``func(*args)`` to completion with anyio's asyncio backend, on uvloop when it is available."""
    options = {"use_uvloop": True} if importlib.util.find_spec("uvloop") is not None else {}
    return anyio.run(func, *args, backend_options=options)
