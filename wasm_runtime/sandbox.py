"""Runs hidden Python functions in WebAssembly: a fresh instance per call.

The host side of the sandbox. One ``Sandbox`` holds the engine, the compiled
guest component and a linker; every call gets its own store and instance, so
calls share nothing and may run concurrently from many threads.

What the guest can reach from here is exactly what the linker defines: WASI
with no preopened directories, no environment, no arguments, no network, an
empty stdin and discarded stdout/stderr; clocks and randomness are replaced
by deterministic versions (a virtual clock and a seeded generator); timers
trap, so nothing can make the host wait. CPU is bounded by fuel, wall time by
epoch interruption, memory by the store's limiter.
"""

from __future__ import annotations

import base64
import functools
import json
import marshal
import os
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import wasmtime
from wasmtime import Store, WasiConfig, WasmtimeError
from wasmtime.component import Linker, Record

from ._fastcall import add_string_func, arm, context_of, fuel_left
from .build import Progress, load_component, new_engine
from .limits import Limits
from .literals import InvalidInput, parse_arguments
from .outcome import Outcome, Status

__all__ = ["Sandbox", "VIRTUAL_EPOCH_S"]

#: What the sandbox's wall clock says at the start of every call: 2024-01-01T00:00:00Z.
VIRTUAL_EPOCH_S = 1_704_067_200
_CLOCK_STEP_NS = 1_000  # each clock read advances virtual time, so waiting loops end deterministically
_TICK_S = 0.01
_IDLE_TICKING_S = 1.0  # the ticker sleeps only after this long without a call
_WASI = "0.2.9"
_SEED = 0


class _Violation(WasmtimeError):
    """A trap raised by the host because the guest asked for something forbidden."""


class _CodeCache:
    """Compiled code objects (marshalled by the guest) by source text, least recently used out first.

    Code is cached from its second run on: a source seen once (generated code
    being scored) is compiled and dropped, without the cost of handing its
    code object to the host.
    """

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._items: OrderedDict[str, str] = OrderedDict()
        self._seen: OrderedDict[int, None] = OrderedDict()  # hashes only: sources can be large
        self._lock = threading.Lock()

    def seen_before(self, source: str) -> bool:
        """True when ``source`` was offered before (among the last few thousand); remembers it."""
        if self._capacity <= 0:
            return False
        # A hash collision would only cache a source's code one run early; the cache itself keys by the text.
        digest = hash(source)
        with self._lock:
            if digest in self._seen:
                return True
            self._seen[digest] = None
            while len(self._seen) > 16 * self._capacity:
                self._seen.popitem(last=False)
            return False

    def get(self, source: str) -> str | None:
        with self._lock:
            blob = self._items.get(source)
            if blob is not None:
                self._items.move_to_end(source)
            return blob

    def put(self, source: str, blob: str) -> None:
        if self._capacity <= 0:
            return
        with self._lock:
            self._items[source] = blob
            self._items.move_to_end(source)
            while len(self._items) > self._capacity:
                self._items.popitem(last=False)


@dataclass
class _Batch:
    """What the host callbacks of one instance need: the current call's state."""

    source: str
    encoded_inputs: list[str]
    limits: Limits
    code_cache: _CodeCache = field(default_factory=lambda: _CodeCache(0))
    store: Store | None = None
    position: int = -1  # index into encoded_inputs of the input now running
    raw: list[tuple[str, int, float]] = field(default_factory=list)  # (outcome JSON, fuel, ms) per finished input
    started: float = 0.0
    instantiated: bool = False
    last_fuel: int = 0
    clock_ns: int = 0
    rng: random.Random = field(default_factory=lambda: random.Random(_SEED))
    rng_used: bool = False
    fuel_budget: int = field(init=False)
    epoch_ticks: int = field(init=False)

    def __post_init__(self) -> None:
        self.fuel_budget = self.limits.fuel_budget
        self.epoch_ticks = self.limits.epoch_ticks(_TICK_S)

    def begin_next(self, context: Any) -> str:
        self.position += 1
        if self.position >= len(self.encoded_inputs):
            return ""
        arm(context, self.fuel_budget, self.epoch_ticks)
        self.clock_ns = 0
        if self.rng_used:
            self.rng.seed(_SEED)
            self.rng_used = False
        self.started = time.perf_counter()
        return self.encoded_inputs[self.position]

    def fuel_used(self, context: Any) -> int:
        left = fuel_left(context)
        return self.fuel_budget if left is None else self.fuel_budget - left

    def finish(self, text: str, fuel: int) -> None:
        """Record the guest's outcome text; parsed after the instance is done, off the hot path."""
        self.raw.append((text, fuel, round((time.perf_counter() - self.started) * 1000, 3)))

    def outcomes(self) -> list[Outcome]:
        return [_parse_outcome(text, fuel, elapsed) for text, fuel, elapsed in self.raw]


_CURRENT = threading.local()


def _batch() -> _Batch:
    batch = getattr(_CURRENT, "batch", None)
    if batch is None:
        raise _Violation("pau-sandbox: host function called outside a call")
    return batch


def _host_source(context: Any) -> str:
    """The code to run, tagged: ``marshal:`` cached code, ``cache:`` source to compile and offer back, ``source:`` source."""
    batch = _batch()
    blob = batch.code_cache.get(batch.source)
    if blob is not None:
        return f"marshal:{blob}"
    return ("cache:" if batch.code_cache.seen_before(batch.source) else "source:") + batch.source


def _host_cache_code(context: Any, blob: str) -> None:
    batch = _batch()
    if batch.position >= 0:  # hidden code is running: it must not plant code for later calls
        raise _Violation("pau-sandbox: code offered after the function started")
    batch.code_cache.put(batch.source, blob)


def _host_next(context: Any, outcome: str) -> str:
    batch = _batch()
    if outcome:
        if not (0 <= batch.position < len(batch.encoded_inputs)) or len(batch.raw) != batch.position:
            raise _Violation("pau-sandbox: outcome handed over out of turn")
        if outcome[0] != "{":
            raise _Violation("pau-sandbox: malformed outcome from the guest")
        batch.finish(outcome, batch.fuel_used(context))
    elif batch.position >= 0:
        raise _Violation("pau-sandbox: input requested before the previous outcome")
    return batch.begin_next(context)


def _host_sleep(context: Any, nanoseconds: int) -> None:
    _batch().clock_ns += nanoseconds


def _parse_outcome(text: str, fuel: int, elapsed_ms: float) -> Outcome:
    """Turn the guest's outcome JSON into an Outcome; a malformed one (the guest runs untrusted code) is a crash.

    The typed value is checked only for shape here; decoding it is left to
    whoever compares it, where a malformed value simply fails to match.
    """
    try:
        data = json.loads(text)
        status = Status(data["status"])
        fields = {key: data.get(key) for key in ("value", "value_type", "error_type", "error_message")}
        if not all(isinstance(v, (str, type(None))) for v in fields.values()) or not isinstance(
            data.get("stdout", ""), str
        ):
            raise ValueError("field types")
        if status is Status.OK and not isinstance(fields["value"], str):
            raise ValueError("value")
    except Exception:
        return Outcome.failure(
            Status.CRASH, "SandboxViolation", "malformed outcome from the guest", fuel=fuel, duration_ms=elapsed_ms
        )
    return Outcome(
        status=status,
        encoded=data.get("encoded"),
        stdout=data.get("stdout", ""),
        duration_ms=elapsed_ms,
        fuel=fuel,
        **fields,
    )


def _monotonic_now(context: Any) -> int:
    batch = _batch()
    batch.clock_ns += _CLOCK_STEP_NS
    return batch.clock_ns


def _wall_now(context: Any) -> Record:
    now = Record()
    total = _monotonic_now(context)
    now.seconds = VIRTUAL_EPOCH_S + total // 1_000_000_000
    now.nanoseconds = total % 1_000_000_000
    return now


def _resolution(context: Any) -> int:
    return _CLOCK_STEP_NS


def _wall_resolution(context: Any) -> Record:
    res = Record()
    res.seconds = 0
    res.nanoseconds = _CLOCK_STEP_NS
    return res


def _forbidden_timer(context: Any, _when: int) -> None:
    raise _Violation("pau-sandbox: waiting on a timer is not allowed in the sandbox")


def _random_bytes(context: Any, length: int) -> bytes:
    if length > 1 << 20:
        raise _Violation("pau-sandbox: more than 1 MiB of randomness requested at once")
    batch = _batch()
    batch.rng_used = True
    return batch.rng.randbytes(length)


def _random_u64(context: Any) -> int:
    batch = _batch()
    batch.rng_used = True
    return batch.rng.getrandbits(64)


_SETUP_FUEL = 10**10  # instantiation and priming; generous and never the limit that matters
_PRIME = json.dumps(
    {
        "prime": True,
        "entry": "test_func",
        "recursion_limit": 1000,
        "max_output_bytes": 65536,
        "stdout_chars": 4096,
        "flood_chars": 1 << 20,
    }
)


@dataclass
class _Ready:
    """An instantiated, never-used instance."""

    store: Store
    run: Any
    memory_bytes: int


class _InstancePool:
    """Keeps a few fresh instances ready, and drops used ones, off the caller's path.

    Instantiating (~1 ms), priming (~1 ms) and tearing down (~0.5 ms) an
    instance are most of a fresh call's fixed cost. None depends on the call,
    so they happen before it is asked for: in a background thread, or (in a
    worker process that serves one call at a time) between calls, in
    ``refill``, which avoids two threads of one process contending for its
    memory map. An instance is never used twice, so every call still starts
    from the pristine, primed snapshot.
    """

    def __init__(self, make: Any, memory_bytes: int, size: int, background: bool) -> None:
        self._make = make
        self._memory = memory_bytes
        self._size = size
        self._background = background
        self._ready: list[_Ready] = []
        self._dead: list[_Ready] = []
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def _start(self) -> None:
        if self._background and self._thread is None and self._size > 0:
            self._thread = threading.Thread(target=self._loop, name="pau-sandbox-pool", daemon=True)
            self._thread.start()

    def take(self, memory_bytes: int) -> _Ready | None:
        """A ready instance for this memory limit, or None (the caller instantiates)."""
        with self._cond:
            self._start()
            ready = self._ready.pop() if self._ready and memory_bytes == self._memory else None
            self._cond.notify()
            return ready

    def discard(self, used: _Ready) -> None:
        """Hand a used instance over for teardown later, off the caller's path."""
        if self._size <= 0:
            return
        with self._cond:
            self._dead.append(used)
            self._cond.notify()

    def refill(self) -> None:
        """Tear down used instances and make the pool full, in the calling thread."""
        with self._cond:
            dead, self._dead = self._dead, []
            missing = self._size - len(self._ready)
        del dead
        for _ in range(max(0, missing)):
            fresh = self._make(self._memory)
            with self._cond:
                self._ready.append(fresh)

    def _loop(self) -> None:
        _CURRENT.batch = _Batch(source="", encoded_inputs=[], limits=Limits())
        while True:
            with self._cond:
                while not self._dead and len(self._ready) >= self._size:
                    self._cond.wait()
                dead, self._dead = self._dead, []
                wanted = len(self._ready) < self._size
            del dead  # dropping the last references tears the stores down here, not on the caller's thread
            if wanted:
                try:
                    fresh = self._make(self._memory)
                except Exception:  # the caller's own instantiation will report the problem
                    time.sleep(1)
                    continue
                with self._cond:
                    self._ready.append(fresh)


class _Ticker:
    """Advances the engine's epoch every tick while calls run, and for a while after the last one.

    Ticking on through short gaps between calls, rather than stopping when none
    runs, spares a thread wake-up per call (about 3% of a scored method's CPU).
    Deadlines are relative to the epoch when a call is armed, so ticks while
    idle change nothing.
    """

    def __init__(self, engine: wasmtime.Engine) -> None:
        self._engine = engine
        self._active = 0
        self._last_active = 0.0
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> None:
        with self._cond:
            self._active += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="pau-sandbox-epoch", daemon=True)
                self._thread.start()
            self._cond.notify()

    def __exit__(self, *exc: object) -> None:
        with self._cond:
            self._active -= 1
            self._last_active = time.monotonic()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while self._active == 0 and time.monotonic() - self._last_active > _IDLE_TICKING_S:
                    self._cond.wait()
            time.sleep(_TICK_S)
            self._engine.increment_epoch()


def _classify_trap(error: WasmtimeError) -> tuple[Status, str, str]:
    """Turn a trap into (status, error_type, message) without leaking host or guest internals."""
    if isinstance(error, wasmtime.ExitTrap):
        return Status.CRASH, "SystemExit", f"the function ended the process with exit code {error.code}"
    text = str(error)
    if "pau-sandbox:" in text:
        reason = text.split("pau-sandbox:", 1)[1].split("\n", 1)[0].strip()
        return Status.CRASH, "SandboxViolation", reason
    lowered = text.lower()
    if "all fuel consumed" in lowered:
        return Status.TIMEOUT, "Timeout", "the function used up its CPU budget"
    if "interrupt" in lowered:
        return Status.TIMEOUT, "Timeout", "the function passed its wall-clock deadline"
    if "stack" in lowered and ("exhausted" in lowered or "overflow" in lowered):
        return Status.ERROR, "RecursionError", "maximum recursion depth exceeded (the sandbox's stack is exhausted)"
    if "memory" in lowered and ("grow" in lowered or "limit" in lowered or "allocat" in lowered):
        return Status.MEMORY, "MemoryError", "the function ran out of memory"
    for kind in ("unreachable", "out of bounds memory access", "integer divide by zero", "indirect call"):
        if kind in lowered:
            return Status.CRASH, "Trap", f"the interpreter stopped abnormally ({kind})"
    return Status.CRASH, "Trap", "the interpreter stopped abnormally"


class Sandbox:
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
    ) -> None:
        self.limits = limits or Limits()
        self._engine = new_engine()
        self._component, self.artifacts = load_component(self._engine, cache_dir, progress)
        self._linker = self._make_linker()
        self._ticker = _Ticker(self._engine)
        self._pool = _InstancePool(self._instantiate, self.limits.memory_bytes, size=pool_size, background=pool_thread)
        self._limiter = anyio.CapacityLimiter(max_concurrency or _cpu_count())
        self._code_cache = _CodeCache(256)

    def _make_linker(self) -> Linker:
        linker = Linker(self._engine)
        linker.add_wasip2()
        linker.allow_shadowing = True
        with linker.root() as root:
            with root.add_instance("pau:sandbox/host") as host:
                add_string_func(host, "source", _host_source, takes=False)
                add_string_func(host, "cache-code", _host_cache_code, returns=False)
                add_string_func(host, "next", _host_next)
                host.add_func("sleep", _host_sleep)
            with root.add_instance(f"wasi:clocks/monotonic-clock@{_WASI}") as clock:
                clock.add_func("now", _monotonic_now)
                clock.add_func("resolution", _resolution)
                clock.add_func("subscribe-instant", _forbidden_timer)
                clock.add_func("subscribe-duration", _forbidden_timer)
            with root.add_instance(f"wasi:clocks/wall-clock@{_WASI}") as wall:
                wall.add_func("now", _wall_now)
                wall.add_func("resolution", _wall_resolution)
            with root.add_instance(f"wasi:random/random@{_WASI}") as rng:
                rng.add_func("get-random-bytes", _random_bytes)
                rng.add_func("get-random-u64", _random_u64)
        return linker

    def run(
        self,
        source: str,
        inputs: Iterable[str | tuple[Any, ...]],
        entry: str = "test_func",
        limits: Limits | None = None,
        fresh: bool = False,
    ) -> list[Outcome]:
        """Run ``entry`` from ``source`` on each input.

        The inputs run one after another in one instance, each in a fresh
        interpreter state; the results equal those of separate calls. After a
        trap, a memory error or an output flood the batch goes on in a new
        instance.

        Args:
            source: Python source defining ``entry``.
            inputs: Argument literals (``"(1, 'a')"``) or argument tuples.
            entry: The function to call.
            limits: Limits for each input; the sandbox default when None.
            fresh: Run every input in its own instance (slower; for checking batches).

        Returns:
            One outcome per input, in order. Inputs that are not valid
            literals get ``invalid_input`` and never enter the sandbox.
        """
        limits = limits or self.limits
        outcomes: list[Outcome | None] = []
        pending: list[tuple[int, str]] = []
        for index, item in enumerate(inputs):
            try:
                encoded = _encoded_literal(item) if isinstance(item, str) else _encode_arguments(tuple(item))
            except InvalidInput as exc:
                outcomes.append(Outcome.failure(Status.INVALID_INPUT, "InvalidInput", str(exc)))
                continue
            except (ValueError, TypeError) as exc:
                outcomes.append(
                    Outcome.failure(Status.INVALID_INPUT, "InvalidInput", f"cannot pass these arguments: {exc}")
                )
                continue
            outcomes.append(None)
            pending.append((index, encoded))
        settings = json.dumps(
            {
                "entry": entry,
                "recursion_limit": limits.recursion_limit,
                "max_output_bytes": limits.max_output_bytes,
                "stdout_chars": limits.stdout_chars,
                "flood_chars": limits.flood_chars,
            }
        )
        encoded_inputs = [encoded for _, encoded in pending]
        produced: list[Outcome] = []
        step = 1 if fresh else len(encoded_inputs)
        while len(produced) < len(encoded_inputs):
            chunk = encoded_inputs[len(produced) : len(produced) + step]
            produced.extend(self._run_instance(source, chunk, settings, limits))
        for (index, _), outcome in zip(pending, produced, strict=False):
            outcomes[index] = outcome
        return [o for o in outcomes if o is not None]

    def call(
        self, source: str, arguments: str | tuple[Any, ...], entry: str = "test_func", limits: Limits | None = None
    ) -> Outcome:
        """Run ``entry`` on one input in a fresh instance."""
        return self.run(source, [arguments], entry=entry, limits=limits)[0]

    async def arun(
        self,
        source: str,
        inputs: Sequence[str | tuple[Any, ...]],
        entry: str = "test_func",
        limits: Limits | None = None,
        fresh: bool = False,
    ) -> list[Outcome]:
        """``run`` in a worker thread, at most ``max_concurrency`` at once."""
        return await anyio.to_thread.run_sync(
            partial(self.run, source, list(inputs), entry=entry, limits=limits, fresh=fresh), limiter=self._limiter
        )

    async def acall(
        self, source: str, arguments: str | tuple[Any, ...], entry: str = "test_func", limits: Limits | None = None
    ) -> Outcome:
        """``call`` in a worker thread, at most ``max_concurrency`` at once."""
        return (await self.arun(source, [arguments], entry=entry, limits=limits))[0]

    def info(self) -> dict[str, Any]:
        """What the guest interpreter offers: Python version, bundled and absent modules, hash probe."""
        batch = _Batch(source="", encoded_inputs=[], limits=self.limits)
        return json.loads(self._enter(batch, json.dumps({"info": True})))

    def refill(self) -> None:
        """Prepare the warm instances now, in this thread (with ``pool_thread=False``, between calls)."""
        _CURRENT.batch = _Batch(source="", encoded_inputs=[], limits=self.limits)
        try:
            self._pool.refill()
        finally:
            _CURRENT.batch = None

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
        run = instance.get_func(store, "run")
        run(store, _PRIME)
        run.post_return(store)
        return _Ready(store=store, run=run, memory_bytes=memory_bytes)

    def _enter(self, batch: _Batch, settings: str) -> str:
        _CURRENT.batch = batch
        ready: _Ready | None = None
        try:
            with self._ticker:
                ready = self._fresh_instance(batch.limits.memory_bytes)
                store = ready.store
                arm(context_of(store), batch.fuel_budget, batch.epoch_ticks)
                batch.store = store
                batch.instantiated = True
                result = ready.run(store, settings)
                batch.last_fuel = batch.fuel_used(context_of(store))
                ready.run.post_return(store)
                return result
        finally:
            _CURRENT.batch = None
            batch.store = None
            if ready is not None:
                self._pool.discard(ready)

    def _run_instance(self, source: str, inputs: list[str], settings: str, limits: Limits) -> list[Outcome]:
        """Run inputs in one instance until they are done or the instance must be replaced."""
        batch = _Batch(source=source, encoded_inputs=inputs, limits=limits, code_cache=self._code_cache)
        batch.started = time.perf_counter()
        try:
            last = self._enter(batch, settings)
        except WasmtimeError as exc:
            if not batch.instantiated:
                raise RuntimeError(
                    f"the sandbox could not start an instance ({exc}); "
                    "if the memory limit is very low, raise it, otherwise rebuild with `pau-mcp sandbox build --force`"
                ) from exc
            status, error_type, message = _classify_trap(exc)
            # A trap before the first input (while compiling the source) belongs to the first input.
            fuel = limits.fuel_budget if status is Status.TIMEOUT else 0
            elapsed = (time.perf_counter() - batch.started) * 1000
            outcomes = batch.outcomes()[: max(batch.position, 0)]
            outcomes.append(Outcome.failure(status, error_type, message, duration_ms=round(elapsed, 3), fuel=fuel))
            return outcomes
        if last:
            batch.finish(last, batch.last_fuel)
        outcomes = batch.outcomes()
        if not outcomes:  # the guest ended without producing anything: never loop forever on it
            outcomes.append(Outcome.failure(Status.CRASH, "Trap", "the interpreter ended without a result"))
        return outcomes


_LITERAL_TYPES = (type(None), bool, int, float, complex, str, bytes, tuple, list, dict, set, frozenset)


@functools.lru_cache(maxsize=16384)
def _encoded_literal(text: str) -> str:
    """Parse and encode an argument literal; cached, since a suite's test inputs are scored again and again.

    Only the encoded string (immutable) is kept, never the parsed values. An invalid literal raises
    ``InvalidInput`` each time (lru_cache does not cache exceptions).
    """
    return _encode_arguments(parse_arguments(text))


def _encode_arguments(args: tuple[Any, ...]) -> str:
    """Arguments for the guest: a marshalled tuple in base64 (decoded in C there, no Python parsing).

    Only literal types may cross; marshal's format for them is the same in
    the host's and the guest's Python versions.
    """
    stack: list[Any] = [args]
    budget = 1_000_000  # also ends a self-referencing structure, which no literal can make
    while stack:
        budget -= 1
        if budget < 0:
            raise InvalidInput("the arguments are too large or refer to themselves")
        value = stack.pop()
        if type(value) not in _LITERAL_TYPES:
            raise InvalidInput(f"a {type(value).__name__} cannot be passed to the sandbox; only literal values can")
        if isinstance(value, (tuple, list, set, frozenset)):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
    return base64.b64encode(marshal.dumps(args, 4)).decode("ascii")


def _cpu_count() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
