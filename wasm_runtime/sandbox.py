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
from wasmtime.component import Func, Linker, Record

from . import values
from ._fastcall import OversizedResult, add_string_func, arm, call_export, context_of, fuel_left
from .build import Progress, load_component, new_engine
from .limits import Limits
from .literals import MAX_INT_DIGITS, InvalidInput, int_too_long, parse_arguments
from .outcome import Outcome, Status
from .tracing import TRACE_KEY, kept_trace, untraced

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
    """What the host callbacks of one instance need: which answers it has given, and the current input's state.

    A new batch is made for every instance a call uses, so "once per batch"
    is once per instance.
    """

    source: str
    limits: Limits
    code_cache: _CodeCache = field(default_factory=lambda: _CodeCache(0))
    loading: bool = False  # the guest's `load` export is running: no hidden code has run yet
    source_given: bool = False
    code_offered: bool = False
    raw: list[tuple[str | None, int, float, int]] = field(default_factory=list)  # (outcome text, fuel, ms, size)
    clock_ns: int = 0
    rng: random.Random = field(default_factory=lambda: random.Random(_SEED))
    rng_used: bool = False
    fuel_budget: int = field(init=False)
    epoch_ticks: int = field(init=False)

    def __post_init__(self) -> None:
        self.fuel_budget = self.limits.fuel_budget
        self.epoch_ticks = self.limits.epoch_ticks(_TICK_S)

    def begin_input(self, context: Any) -> None:
        """Give the next input its own CPU budget, deadline, clock and random generator."""
        arm(context, self.fuel_budget, self.epoch_ticks)
        self.clock_ns = 0
        if self.rng_used:
            self.rng.seed(_SEED)
            self.rng_used = False

    def fuel_used(self, context: Any) -> int:
        left = fuel_left(context)
        return self.fuel_budget if left is None else self.fuel_budget - left

    def outcomes(self) -> list[Outcome]:
        """The recorded outcome texts as outcomes; parsed after the instance is done, off the hot path."""
        return [_parse_outcome(text, fuel, elapsed, size, self.limits) for text, fuel, elapsed, size in self.raw]


_CURRENT = threading.local()


def _batch() -> _Batch:
    batch = getattr(_CURRENT, "batch", None)
    if batch is None:
        raise _Violation("pau-sandbox: host function called outside a call")
    return batch


def _host_source(context: Any) -> str:
    """The code to run, tagged: ``marshal:`` cached code, ``cache:`` source to compile and offer back, ``source:`` source.

    Answered once per instance, while the guest loads, before any hidden code
    runs: hidden code that calls it itself (it runs in the guest's
    interpreter and can reach the import) traps instead of reading its source.
    """
    batch = _batch()
    if not batch.loading or batch.source_given:
        raise _Violation("pau-sandbox: the source is handed over once, before the function runs")
    batch.source_given = True
    blob = batch.code_cache.get(batch.source)
    if blob is not None:
        return f"marshal:{blob}"
    return ("cache:" if batch.code_cache.seen_before(batch.source) else "source:") + batch.source


def _host_cache_code(context: Any, blob: str) -> None:
    batch = _batch()
    if not batch.loading or batch.code_offered or not batch.source_given:
        # Hidden code is running (or ran): it must not plant code for later calls.
        raise _Violation("pau-sandbox: code offered after the function started")
    batch.code_offered = True
    batch.code_cache.put(batch.source, blob)


def _host_sleep(context: Any, nanoseconds: int) -> None:
    _batch().clock_ns += nanoseconds


#: Statuses the guest's own code reports; the others (timeout, crash, invalid_input) only the host decides.
_GUEST_STATUSES = {s.value: s for s in (Status.OK, Status.ERROR, Status.MEMORY, Status.OUTPUT_LIMIT)}
#: Longest exception or type name kept from an outcome; longer ones are cut (no real class name comes close).
NAME_CHARS = 200
#: Longest error message kept from an outcome.
MESSAGE_CHARS = 500
_TEXT_FIELDS = ("value", "value_type", "error_type", "error_message", "stdout")


def _encoded_chars(limits: Limits) -> int:
    """Largest encoding (its JSON text) the host keeps: what the guest's encoder budget allows, as 12-byte escapes."""
    return 12 * limits.max_output_bytes + 1024


def _malformed(why: str, fuel: int, elapsed_ms: float) -> Outcome:
    return Outcome.failure(
        Status.CRASH, "SandboxViolation", f"malformed outcome from the guest ({why})", fuel=fuel, duration_ms=elapsed_ms
    )


def _over_limit(message: str, fuel: int, elapsed_ms: float) -> Outcome:
    return Outcome.failure(Status.OUTPUT_LIMIT, "OutputLimit", message, fuel=fuel, duration_ms=elapsed_ms)


def _printable(text: str) -> str:
    """``text`` with lone surrogates written as escapes, so every consumer can encode it as UTF-8."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _parse_outcome(text: str | None, fuel: int, elapsed_ms: float, size: int, limits: Limits) -> Outcome:
    """Turn the guest's outcome text into an Outcome, capping every field before it is kept.

    The guest runs untrusted code that can replace the guest's own helpers, so
    nothing it returns is trusted: a text that is not an outcome is a crash,
    and each field is cut or refused at its limit here. The typed value is
    checked for size and nesting only; decoding it is left to whoever compares
    it, where an undecodable value fails to match (``compare_outcomes``).
    """
    if text is None:
        return _over_limit(
            f"the outcome was {size} bytes long, more than the sandbox accepts ({limits.outcome_bytes})",
            fuel,
            elapsed_ms,
        )
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return _malformed("not JSON, or nested too deep", fuel, elapsed_ms)
    if type(data) is not dict:
        return _malformed("not an object", fuel, elapsed_ms)
    status = _GUEST_STATUSES.get(data.get("status")) if isinstance(data.get("status"), str) else None
    if status is None:
        return _malformed("unknown status", fuel, elapsed_ms)
    fields = {key: data.get(key) for key in _TEXT_FIELDS}
    if not all(value is None or type(value) is str for value in fields.values()):
        return _malformed("a field is not text", fuel, elapsed_ms)
    if status is not Status.OK and fields["error_type"] is None:
        return _malformed("a failure without its error type", fuel, elapsed_ms)
    encoded = None
    if status is Status.OK:
        if fields["value"] is None or "encoded" not in data:
            return _malformed("a value without its encoding", fuel, elapsed_ms)
        if len(fields["value"]) > limits.max_output_bytes:
            return _over_limit("the value is larger than the output limit", fuel, elapsed_ms)
        encoded = data["encoded"]
        cap = _encoded_chars(limits)
        if len(text) > cap and len(json.dumps(encoded, separators=(",", ":"))) > cap:
            return _over_limit("the value's encoding is larger than the output limit", fuel, elapsed_ms)
        if len(text) > 2 * values.MAX_ENCODED_NESTING and values.nested_deeper_than(
            encoded, values.MAX_ENCODED_NESTING
        ):
            return _malformed("the encoding is nested too deep", fuel, elapsed_ms)
    else:
        fields["value"] = fields["value_type"] = None
    for key, cut in (("value_type", NAME_CHARS), ("error_type", NAME_CHARS), ("error_message", MESSAGE_CHARS),
                     ("stdout", limits.stdout_chars), ("value", limits.max_output_bytes)):  # fmt: skip
        field_text = fields[key]
        if field_text is not None:
            fields[key] = _printable(field_text[:cut])
    stdout = fields.pop("stdout") or ""
    extra = kept_trace(data[TRACE_KEY]) if TRACE_KEY in data else {}
    return Outcome(
        status=status, encoded=encoded, stdout=stdout, duration_ms=elapsed_ms, fuel=fuel, extra=extra, **fields
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
    info: Func
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
        _CURRENT.batch = _Batch(source="", limits=Limits())
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
        trace: bool = False,
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
            trace: Record which lines of ``source`` each input ran, in ``outcome.extra["trace"]`` (see
                ``tracing``). Many times slower; for measuring coverage after the fact, never for a served call.

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
                **({TRACE_KEY: True} if trace else {}),
            }
        )
        encoded_inputs = [encoded for _, encoded in pending]
        produced: list[Outcome] = []
        step = 1 if fresh else len(encoded_inputs)
        while len(produced) < len(encoded_inputs):
            chunk = encoded_inputs[len(produced) : len(produced) + step]
            produced.extend(self._run_instance(source, chunk, settings, limits))
        for (index, _), outcome in zip(pending, produced, strict=False):
            outcomes[index] = outcome if trace or not outcome.extra else untraced(outcome)
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
        trace: bool = False,
    ) -> list[Outcome]:
        """``run`` in a worker thread, at most ``max_concurrency`` at once."""
        return await anyio.to_thread.run_sync(
            partial(self.run, source, list(inputs), entry=entry, limits=limits, fresh=fresh, trace=trace),
            limiter=self._limiter,
        )

    async def acall(
        self, source: str, arguments: str | tuple[Any, ...], entry: str = "test_func", limits: Limits | None = None
    ) -> Outcome:
        """``call`` in a worker thread, at most ``max_concurrency`` at once."""
        return (await self.arun(source, [arguments], entry=entry, limits=limits))[0]

    def info(self) -> dict[str, Any]:
        """What the guest interpreter offers: Python version, bundled and absent modules, hash probe."""
        batch = _Batch(source="", limits=self.limits)
        _CURRENT.batch = batch
        ready: _Ready | None = None
        try:
            with self._ticker:
                ready = self._fresh_instance(batch.limits.memory_bytes)
                batch.begin_input(ready.context)
                text = call_export(ready.info, ready.context, returns=True)
                return json.loads(text or "{}")
        finally:
            _CURRENT.batch = None
            if ready is not None:
                self._pool.discard(ready)

    def refill(self) -> None:
        """Prepare the warm instances now, in this thread (with ``pool_thread=False``, between calls)."""
        _CURRENT.batch = _Batch(source="", limits=self.limits)
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
        exports = {name: instance.get_func(store, name) for name in ("load", "call", "prime", "info")}
        if any(func is None for func in exports.values()):
            raise WasmtimeError("the guest component lacks an export; rebuild it with `pau-mcp sandbox build --force`")
        context = context_of(store)
        # The same crossings a real call makes, with a built-in function: see `_InstancePool`.
        call_export(exports["prime"], context, _PRIME_SETTINGS)
        call_export(exports["call"], context, _PRIME_ARGUMENTS, returns=True)
        return _Ready(store=store, context=context, load=exports["load"], call=exports["call"],
                      info=exports["info"], memory_bytes=memory_bytes)  # fmt: skip

    def _run_instance(self, source: str, inputs: list[str], settings: str, limits: Limits) -> list[Outcome]:
        """Run inputs in one instance until they are done or the instance must be replaced.

        The host pushes the inputs one at a time through the guest's ``call``
        export and takes each outcome from its return value: no host import
        hands out an input or takes an outcome, so code running on one input
        can neither read the next nor answer for it.
        """
        batch = _Batch(source=source, limits=limits, code_cache=self._code_cache)
        _CURRENT.batch = batch
        ready: _Ready | None = None
        started = time.perf_counter()
        try:
            with self._ticker:
                try:
                    ready = self._fresh_instance(limits.memory_bytes)
                except WasmtimeError as exc:
                    raise RuntimeError(
                        f"the sandbox could not start an instance ({exc}); if the memory limit is very low, raise "
                        "it, otherwise rebuild with `pau-mcp sandbox build --force`"
                    ) from exc
                context = ready.context
                arm(context, batch.fuel_budget, batch.epoch_ticks)
                batch.loading = True
                try:
                    call_export(ready.load, context, settings)
                except WasmtimeError as exc:
                    # A trap while loading (compiling the source) belongs to the first input.
                    return [_trap_outcome(exc, limits, started)]
                batch.loading = False
                cap = limits.outcome_bytes
                for encoded in inputs:
                    batch.begin_input(context)
                    started = time.perf_counter()
                    try:
                        text = call_export(ready.call, context, encoded, returns=True, max_result_bytes=cap)
                        size = 0
                    except OversizedResult as big:
                        text, size = None, big.size
                    except WasmtimeError as exc:
                        outcomes = batch.outcomes()
                        outcomes.append(_trap_outcome(exc, limits, started))
                        return outcomes
                    batch.raw.append(
                        (text, batch.fuel_used(context), round((time.perf_counter() - started) * 1000, 3), size)
                    )
                    # After a memory error, an output flood or an outcome that is not the guest's own the
                    # interpreter may be unreliable: the batch goes on in a fresh instance.
                    if text is None or not text.startswith(_CONTINUES):
                        break
        finally:
            _CURRENT.batch = None
            if ready is not None:
                self._pool.discard(ready)
        return batch.outcomes()


def _trap_outcome(error: WasmtimeError, limits: Limits, started: float) -> Outcome:
    status, error_type, message = _classify_trap(error)
    fuel = limits.fuel_budget if status is Status.TIMEOUT else 0
    elapsed = round((time.perf_counter() - started) * 1000, 3)
    return Outcome.failure(status, error_type, message, duration_ms=elapsed, fuel=fuel)


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
        kind = type(value)
        if kind not in _LITERAL_TYPES:
            raise InvalidInput(f"a {kind.__name__} cannot be passed to the sandbox; only literal values can")
        if kind is int and int_too_long(value):
            raise InvalidInput(
                f"an integer argument has more than {MAX_INT_DIGITS} digits; the sandbox accepts at most {MAX_INT_DIGITS}."
            )
        if isinstance(value, (tuple, list, set, frozenset)):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
    return base64.b64encode(marshal.dumps(args, 4)).decode("ascii")


def _cpu_count() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
