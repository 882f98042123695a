"""The host functions the component guest imports, and the per-instance state they answer from.

Every instance a call uses gets a ``Batch``: the virtual clock, the seeded
random generator, the fuel budget and the once-only answer of the source
handover. The host functions find it in a thread-local (``CURRENT``), set by
the thread that runs the instance, so concurrent calls never share state.
Clocks are virtual (each read advances them), randomness is seeded, and timers
trap: nothing the guest does can make the host wait.
"""

from __future__ import annotations

import random
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from wasmtime import WasmtimeError
from wasmtime.component import Linker

from ._fastcall import add_string_func, add_u64_func, arm, charge, fuel_left
from ._guest_outcome import parse_outcome
from .limits import Limits
from .outcome import Outcome

__all__ = [
    "CLOCK_STEP_NS",
    "CURRENT",
    "HOST_BYTE_FUEL",
    "HOST_CALL_FUEL",
    "MAX_RANDOM_BYTES",
    "SEED",
    "TICK_S",
    "VIRTUAL_EPOCH_S",
    "Batch",
    "CodeCache",
    "Violation",
    "current_batch",
    "define_host_functions",
]

#: What the sandbox's wall clock says at the start of every call: 2024-01-01T00:00:00Z.
VIRTUAL_EPOCH_S = 1_704_067_200
#: Each clock read advances virtual time by this much, so waiting loops end deterministically.
CLOCK_STEP_NS = 1_000
#: One epoch tick of the wall-clock deadline.
TICK_S = 0.01
_WASI = "0.2.9"
#: The seed of every input's random generator.
SEED = 0
#: Fuel every call of a host function costs the guest (a clock, randomness, a sleep, a file's metadata): about what
#: the host's own work for it takes (5-10 us), at the fastest rate guest code burns fuel (1.6e10 a CPU second).
#: Without it, a loop asking for the time spent its whole wall-clock deadline (5 x the limit) in the host while
#: its fuel hardly moved.
HOST_CALL_FUEL = 150_000
#: Fuel every byte a host function hands the guest costs (randomness, a directory listing), on top of the call.
HOST_BYTE_FUEL = 100
#: Most randomness one call may ask for; more traps (``crash``). The C library asks for at most 256 bytes at once.
MAX_RANDOM_BYTES = 1 << 20


class Violation(WasmtimeError):
    """A trap raised by the host because the guest asked for something forbidden."""


class CodeCache:
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
class Batch:
    """What the host callbacks of one instance need: which answers it has given, and the current input's state.

    A new batch is made for every instance a call uses, so "once per batch"
    is once per instance.
    """

    source: str
    limits: Limits
    code_cache: CodeCache = field(default_factory=lambda: CodeCache(0))
    loading: bool = False  # the guest's `load` export is running: no hidden code has run yet
    source_given: bool = False
    code_wanted: bool = False  # the source went out tagged "cache:": `load` holds the compiled code for the host
    raw: list[tuple[str | None, int, float, int]] = field(default_factory=list)  # (outcome text, fuel, ms, size)
    clock_ns: int = 0
    rng: random.Random = field(default_factory=lambda: random.Random(SEED))
    rng_used: bool = False
    fuel_budget: int = field(init=False)
    epoch_ticks: int = field(init=False)

    def __post_init__(self) -> None:
        self.fuel_budget = self.limits.fuel_budget
        self.epoch_ticks = self.limits.epoch_ticks(TICK_S)

    def begin_input(self, context: Any) -> None:
        """Give the next input its own CPU budget, deadline, clock and random generator."""
        arm(context, self.fuel_budget, self.epoch_ticks)
        self.clock_ns = 0
        if self.rng_used:
            self.rng.seed(SEED)
            self.rng_used = False

    def fuel_used(self, context: Any) -> int:
        left = fuel_left(context)
        return self.fuel_budget if left is None else self.fuel_budget - left

    def outcomes(self) -> list[Outcome]:
        """The recorded outcome texts as outcomes; parsed after the instance is done, off the hot path."""
        return [parse_outcome(text, fuel, elapsed, size, self.limits) for text, fuel, elapsed, size in self.raw]


CURRENT = threading.local()


def current_batch() -> Batch:
    batch: Batch | None = getattr(CURRENT, "batch", None)
    if batch is None:
        raise Violation("pau-sandbox: host function called outside a call")
    return batch


def _host_source(context: Any) -> str:
    """The code to run, tagged: ``marshal:`` cached code, ``cache:`` source to compile and offer back, ``source:`` source.

    Answered once per instance, while the guest loads, before any hidden code
    runs: hidden code that calls it itself (it runs in the guest's
    interpreter and can reach the import) traps instead of reading its source.
    """
    batch = current_batch()
    if not batch.loading or batch.source_given:
        raise Violation("pau-sandbox: the source is handed over once, before the function runs")
    batch.source_given = True
    blob = batch.code_cache.get(batch.source)
    if blob is not None:
        return f"marshal:{blob}"
    batch.code_wanted = batch.code_cache.seen_before(batch.source)
    return ("cache:" if batch.code_wanted else "source:") + batch.source


def _host_sleep(context: Any, nanoseconds: int) -> None:
    charge(context, HOST_CALL_FUEL)
    current_batch().clock_ns += nanoseconds


def _monotonic_now(context: Any) -> int:
    charge(context, HOST_CALL_FUEL)
    batch = current_batch()
    batch.clock_ns += CLOCK_STEP_NS
    return batch.clock_ns


def _wall_now(context: Any) -> int:
    return VIRTUAL_EPOCH_S * 1_000_000_000 + _monotonic_now(context)


def _resolution(context: Any) -> int:
    charge(context, HOST_CALL_FUEL)
    return CLOCK_STEP_NS


def _forbidden_timer(context: Any, _when: int) -> None:
    raise Violation("pau-sandbox: waiting on a timer is not allowed in the sandbox")


def _random_bytes(context: Any, length: int) -> bytes:
    if length > MAX_RANDOM_BYTES:
        raise Violation("pau-sandbox: more than 1 MiB of randomness requested at once")
    charge(context, HOST_CALL_FUEL + HOST_BYTE_FUEL * length)
    batch = current_batch()
    batch.rng_used = True
    return batch.rng.randbytes(length)


def _random_u64(context: Any) -> int:
    charge(context, HOST_CALL_FUEL)
    batch = current_batch()
    batch.rng_used = True
    return batch.rng.getrandbits(64)


def define_host_functions(linker: Linker) -> None:
    """Define the guest's ``pau:sandbox/host`` imports and shadow WASI's clocks and randomness in ``linker``.

    The linker must already have WASI added with shadowing allowed: shadowing an
    interface replaces all of it, so each shadowed interface is defined whole.
    """
    with linker.root() as root:
        with root.add_instance("pau:sandbox/host") as host:
            add_string_func(host, "source", _host_source, takes=False)
            add_u64_func(host, "sleep", _host_sleep, takes=True)
        with root.add_instance(f"wasi:clocks/monotonic-clock@{_WASI}") as clock:
            add_u64_func(clock, "now", _monotonic_now, returns="u64")
            add_u64_func(clock, "resolution", _resolution, returns="u64")
            # They return a resource; both trap before there is anything to return.
            add_u64_func(clock, "subscribe-instant", _forbidden_timer, takes=True, returns="u64")
            add_u64_func(clock, "subscribe-duration", _forbidden_timer, takes=True, returns="u64")
        with root.add_instance(f"wasi:clocks/wall-clock@{_WASI}") as wall:
            add_u64_func(wall, "now", _wall_now, returns="datetime")
            add_u64_func(wall, "resolution", _resolution, returns="datetime")
        with root.add_instance(f"wasi:random/random@{_WASI}") as rng:
            add_u64_func(rng, "get-random-bytes", _random_bytes, takes=True, returns="bytes")
            add_u64_func(rng, "get-random-u64", _random_u64, returns="u64")
