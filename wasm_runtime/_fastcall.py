"""Crossings of one string each way, without wasmtime-py's generic marshalling.

wasmtime-py converts every argument and result through its type objects,
which costs tens of microseconds per crossing. The sandbox crosses the
boundary once per input (the host calls the guest's ``call`` export), so for
batches that overhead was the largest single cost. This module calls exports
and registers host functions directly through the C API, for the few
signatures the sandbox needs. It relies on wasmtime-py's ctypes bindings,
which is why pyproject.toml pins wasmtime exactly; the contract tests exercise
it on every call.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable
from typing import Any, NoReturn

from wasmtime import Store, Trap, WasmtimeError
from wasmtime import _ffi as ffi
from wasmtime._func import maybe_raise_last_exn as maybe_raise_last_core_exn
from wasmtime.component import Func, LinkerInstance
from wasmtime.component._enter import maybe_raise_last_exn

__all__ = [
    "PIECE_BYTES",
    "OversizedResult",
    "OUT_OF_FUEL",
    "add_string_func",
    "add_u64_func",
    "charge",
    "arm",
    "call_core",
    "call_export",
    "call_sized",
    "call_u32",
    "context_of",
    "fuel_left",
    "get_global_i32",
    "set_global_i32",
    "take_held",
]


class OversizedResult(Exception):
    """An export returned a string larger than the caller accepts; it was dropped unread.

    Attributes:
        size: The string's size in bytes (UTF-8).
    """

    def __init__(self, size: int) -> None:
        super().__init__(f"the result is {size} bytes long")
        self.size = size


# Private prototypes of C functions wasmtime-py also binds: these take a Python bytes object as the data pointer
# and the vector's address as an int, which saves a ctypes conversion and a memmove per crossing.
_VEC_NEW = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)(("wasm_byte_vec_new", ffi.dll))
_ONE_VALUE = ffi.wasmtime_component_val_t * 1
_STRING = ffi.WASMTIME_COMPONENT_STRING
_U32 = ffi.WASMTIME_COMPONENT_U32
_U64 = ffi.WASMTIME_COMPONENT_U64
_TUPLE = ffi.WASMTIME_COMPONENT_TUPLE
_LIST = ffi.WASMTIME_COMPONENT_LIST
#: Bytes of one piece the guest's ``take`` export hands over: a tuple of 32 u64 words.
PIECE_BYTES = 256
_PIECE_WORDS = PIECE_BYTES // 8
_VAL_SIZE = ctypes.sizeof(ffi.wasmtime_component_val_t)
_VAL_WORD = ffi.wasmtime_component_val_t.of.offset // 8  # where a value's u64 sits, in words from its start
_PIECE_KINDS = bytes([_U64.value]) * _PIECE_WORDS
_PIECE_PACK = struct.Struct(f"<{_PIECE_WORDS}Q").pack


# Callbacks must outlive the linker that calls them.
_KEEP_ALIVE: list[Any] = []


def _ignore(_data: int | None) -> None:
    return None


# A C callback (``void (*)(void *)``) for wasmtime to call when it drops a host function's data: there is none.
_no_finalizer = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_ignore)


def _error_pointer(error: WasmtimeError) -> int:
    return ctypes.cast(error._consume(), ctypes.c_void_p).value or 0


def _string_vec(text: str) -> Any:
    """A C byte vector holding ``text`` as UTF-8, which the caller (wasmtime) takes ownership of.

    wasmtime-py's own helpers build a ctypes array type per string, which
    cost more than the rest of a host call.
    """
    data = text.encode("utf-8")
    vec = ffi.wasm_byte_vec_t()
    ffi.wasm_byte_vec_new_uninitialized(ctypes.byref(vec), len(data))
    if data:
        ctypes.memmove(vec.data, data, len(data))
    return vec


def _add_func(instance: LinkerInstance, name: str, trampoline: Callable[..., int]) -> None:
    """Define ``name`` in the linker instance as ``trampoline``, kept alive as long as the process (wasmtime holds
    only a raw pointer to it)."""
    callback = ffi.wasmtime_component_func_callback_t(trampoline)
    _KEEP_ALIVE.append(callback)
    name_bytes = name.encode("utf-8")
    error = ffi.wasmtime_component_linker_instance_add_func(
        instance.ptr(), ctypes.create_string_buffer(name_bytes), len(name_bytes), callback, None, _no_finalizer
    )
    if error:
        raise WasmtimeError._from_ptr(error)


def add_string_func(
    instance: LinkerInstance, name: str, func: Callable[..., Any], takes: bool = True, returns: bool = True
) -> None:
    """Define ``name`` in ``instance`` as a host function taking and/or returning one string.

    Args:
        instance: The linker instance to define it in.
        name: The function's name in the WIT interface.
        func: Called with the raw store context (valid only during the call; see ``arm`` and
            ``fuel_left``) and, when ``takes``, the string;
            returns a string when ``returns`` (otherwise its result is ignored).
            A ``WasmtimeError`` it raises becomes a trap with that message;
            any other exception becomes a trap saying the host failed.
        takes: The WIT function has one string parameter (otherwise none).
        returns: The WIT function returns one string (otherwise nothing).
    """
    want_args, want_results = int(takes), int(returns)

    def trampoline(
        _data: int | None, context: Any, _ty: Any, args: Any, nargs: int, results: Any, nresults: int
    ) -> int:
        try:
            if (
                nargs != want_args
                or nresults != want_results
                or (takes and args[0].kind != ffi.WASMTIME_COMPONENT_STRING.value)
            ):
                raise WasmtimeError(f"pau-sandbox: {name} called with the wrong signature")
            if takes:
                vec = args[0].of.string
                text = ctypes.string_at(vec.data, vec.size).decode("utf-8") if vec.size else ""
                ffi.wasm_byte_vec_delete(ctypes.byref(vec))
                result = func(context, text)
            else:
                result = func(context)
            if returns:
                # The vector first: a result wasmtime is told is a string must hold one it can free.
                vec = _string_vec(result)
                results[0].kind = ffi.WASMTIME_COMPONENT_STRING
                results[0].of.string = vec
            return 0
        except WasmtimeError as exc:
            return _error_pointer(exc)
        except Exception as exc:  # a bug on the host side must trap the guest, not unwind through C
            return _error_pointer(WasmtimeError(f"pau-sandbox: host error in {name}: {type(exc).__name__}"))

    _add_func(instance, name, trampoline)


_U8_KIND = bytes([ffi.WASMTIME_COMPONENT_U8.value])


def _bytes_result(result: Any, data: bytes) -> None:
    """Make ``result`` a ``list<u8>`` holding ``data``, filled in one copy (one C value of 32 bytes per byte)."""
    size = len(data)
    ffi.wasmtime_component_vallist_new_uninit(ctypes.byref(result.of.list), size)
    if size:
        values = bytearray(size * _VAL_SIZE)
        values[::_VAL_SIZE] = _U8_KIND * size
        values[_VAL_WORD * 8 :: _VAL_SIZE] = data
        ctypes.memmove(result.of.list.data, bytes(values), len(values))
    result.kind = _LIST


_RECORD = ffi.WASMTIME_COMPONENT_RECORD
_U32_KIND = ffi.WASMTIME_COMPONENT_U32
_ENTRY = ctypes.POINTER(ffi.wasmtime_component_valrecord_entry_t)
_SECONDS, _NANOSECONDS = b"seconds", b"nanoseconds"


def _datetime_result(result: Any, nanoseconds_since_epoch: int) -> None:
    """Make ``result`` WASI's ``datetime`` record (``seconds: u64, nanoseconds: u32``) for a time in nanoseconds."""
    seconds, nanoseconds = divmod(nanoseconds_since_epoch, 1_000_000_000)
    ffi.wasmtime_component_valrecord_new_uninit(ctypes.byref(result.of.record), 2)
    entries = ctypes.cast(result.of.record.data, _ENTRY)
    first, second = entries[0], entries[1]
    _VEC_NEW(ctypes.addressof(first.name), len(_SECONDS), _SECONDS)
    first.val.kind = _U64
    first.val.of.u64 = seconds
    _VEC_NEW(ctypes.addressof(second.name), len(_NANOSECONDS), _NANOSECONDS)
    second.val.kind = _U32_KIND
    second.val.of.u32 = nanoseconds
    result.kind = _RECORD


def add_u64_func(
    instance: LinkerInstance, name: str, func: Callable[..., Any], takes: bool = False, returns: str | None = None
) -> None:
    """Define ``name`` in ``instance`` as a host function of at most one u64 parameter and a u64 or bytes result.

    wasmtime-py's generic marshalling costs about 25 us a crossing, and a ``list<u8>`` result about 0.7 us a
    byte: a guest asking for randomness or the time in a loop made the host do work its fuel never saw.

    Args:
        instance: The linker instance to define it in.
        name: The function's name in the WIT interface.
        func: Called with the raw store context (see ``charge``) and, when ``takes``, the u64; returns an int
            (``returns="u64"``; ``returns="datetime"``: nanoseconds, handed over as WASI's ``datetime`` record),
            bytes (``returns="bytes"``: a ``list<u8>``) or nothing. A ``WasmtimeError`` it raises becomes a trap
            with its message; any other exception a trap saying the host failed.
        takes: The WIT function has one u64 parameter (otherwise none).
        returns: ``"u64"``, ``"datetime"``, ``"bytes"``, or None for no result.
    """
    want_args, want_results = int(takes), int(returns is not None)

    def trampoline(
        _data: int | None, context: Any, _ty: Any, args: Any, nargs: int, results: Any, nresults: int
    ) -> int:
        try:
            if nargs != want_args or nresults != want_results or (takes and args[0].kind != _U64.value):
                raise WasmtimeError(f"pau-sandbox: {name} called with the wrong signature")
            result = func(context, args[0].of.u64) if takes else func(context)
            if returns == "u64":
                results[0].kind = _U64
                results[0].of.u64 = result
            elif returns == "bytes":
                _bytes_result(results[0], result)
            elif returns == "datetime":
                _datetime_result(results[0], result)
            return 0
        except WasmtimeError as exc:
            return _error_pointer(exc)
        except Exception as exc:  # a bug on the host side must trap the guest, not unwind through C
            return _error_pointer(WasmtimeError(f"pau-sandbox: host error in {name}: {type(exc).__name__}"))

    _add_func(instance, name, trampoline)


#: What a trap for host work beyond the budget says: "all fuel consumed" makes it the same ``timeout`` as a guest
#: that burns its fuel itself.
OUT_OF_FUEL = "all fuel consumed by the work the function asked the host for"


def charge(context: Any, fuel: int) -> None:
    """Take ``fuel`` units from the store for host work the guest asked for; trap when the budget cannot pay.

    Raises:
        WasmtimeError: The budget is spent (``OUT_OF_FUEL``); the fuel left is set to 0.
    """
    left = fuel_left(context)
    if left is None or left < fuel:
        ffi.wasmtime_context_set_fuel(context, 0)
        raise WasmtimeError(OUT_OF_FUEL)
    ffi.wasmtime_context_set_fuel(context, left - fuel)


def context_of(store: Store) -> Any:
    """The raw context of ``store``, for ``arm`` and ``fuel_left``."""
    return store._context()


def arm(context: Any, fuel: int, epoch_ticks: int) -> None:
    """Give the store ``fuel`` units and a deadline ``epoch_ticks`` ticks from now (once per input)."""
    error = ffi.wasmtime_context_set_fuel(context, fuel)
    if error:
        raise WasmtimeError._from_ptr(error)
    ffi.wasmtime_context_set_epoch_deadline(context, epoch_ticks)


def fuel_left(context: Any) -> int | None:
    """The store's remaining fuel, or None when wasmtime cannot say (it then has none left)."""
    remaining = ctypes.c_uint64(0)
    error = ffi.wasmtime_context_get_fuel(context, ctypes.byref(remaining))
    if error:
        ffi.wasmtime_error_delete(error)
        return None
    return remaining.value


def _raise_call_error(error: Any) -> NoReturn:
    """Raise the error of a failed call (the guest's trap, or a host function's own exception)."""
    failure = WasmtimeError._from_ptr(error)
    maybe_raise_last_exn()
    raise failure


def _call_on_string(func: Func, context: Any, argument: str) -> Any:
    """Call an export taking one string and returning one value; the caller reads the value, then deletes it."""
    param = ffi.wasmtime_component_val_t()
    param.kind = _STRING
    data = argument.encode("utf-8")
    _VEC_NEW(ctypes.addressof(param.of.string), len(data), data)
    result = ffi.wasmtime_component_val_t()
    try:
        error = ffi.wasmtime_component_func_call(
            ctypes.byref(func._func), context, ctypes.byref(param), 1, ctypes.byref(result), 1
        )
    finally:
        ffi.wasmtime_component_val_delete(ctypes.byref(param))
    if error:
        _raise_call_error(error)
    return result


def call_export(
    func: Func, context: Any, argument: str | None = None, returns: bool = False, max_result_bytes: int = 1 << 62
) -> str | None:
    """Call a component export taking at most one string and returning at most one string.

    The guest's post-return function (which frees the result in the guest)
    runs inside the call: in this wasmtime, ``wasmtime_component_func_post_return``
    has no effect and is never needed.

    Args:
        func: The export, from ``Instance.get_func``.
        context: The store's raw context (``context_of``).
        argument: The one string argument, or None for an export without parameters.
        returns: The export returns one string (otherwise nothing).
        max_result_bytes: A longer result is freed without being turned into a Python string.

    Returns:
        The result, or None when ``returns`` is False.

    Raises:
        WasmtimeError: The guest trapped (or a host function it called failed).
        OversizedResult: The result was longer than ``max_result_bytes``.
    """
    params = _ONE_VALUE()
    count = 0
    if argument is not None:
        param = params[0]
        param.kind = _STRING
        data = argument.encode("utf-8")
        _VEC_NEW(ctypes.addressof(param.of.string), len(data), data)
        count = 1
    result = ffi.wasmtime_component_val_t()
    try:
        error = ffi.wasmtime_component_func_call(
            ctypes.byref(func._func), context, params, count, ctypes.byref(result) if returns else None, int(returns)
        )
    finally:
        if count:
            ffi.wasmtime_component_val_delete(params)
    if error:
        _raise_call_error(error)
    if not returns:
        return None
    try:
        if result.kind != _STRING.value:
            raise WasmtimeError("pau-sandbox: an export returned something other than a string")
        vec = result.of.string
        size = vec.size
        if size > max_result_bytes:
            raise OversizedResult(size)
        return ctypes.string_at(vec.data, size).decode("utf-8") if size else ""
    finally:
        ffi.wasmtime_component_val_delete(ctypes.byref(result))


def call_sized(func: Func, context: Any, argument: str) -> tuple[int, bytes]:
    """Call an export taking one string and returning ``tuple<u32, piece>``: a size and the first piece.

    Returns:
        The size, and the first piece's bytes (256, zero past the size).

    Raises:
        WasmtimeError: The guest trapped, or the export returned something of another shape.
    """
    result = _call_on_string(func, context, argument)
    try:
        pair = result.of.tuple
        if result.kind != _TUPLE.value or pair.size != 2 or pair.data[0].kind != _U32.value:
            raise WasmtimeError("pau-sandbox: an export returned something other than a size and a piece")
        return int(pair.data[0].of.u32), _piece(pair.data[1])
    finally:
        ffi.wasmtime_component_val_delete(ctypes.byref(result))


def call_u32(func: Func, context: Any, argument: str) -> int:
    """Call a component export taking one string and returning one u32 (a size: nothing of variable length).

    Raises:
        WasmtimeError: The guest trapped (or a host function it called failed).
    """
    result = _call_on_string(func, context, argument)
    try:
        if result.kind != _U32.value:
            raise WasmtimeError("pau-sandbox: an export returned something other than a size")
        return int(result.of.u32)
    finally:
        ffi.wasmtime_component_val_delete(ctypes.byref(result))


def _piece(value: Any) -> bytes:
    """The 256 bytes of a ``piece`` value (a tuple of 32 u64 words)."""
    words = value.of.tuple
    if value.kind != _TUPLE.value or words.size != _PIECE_WORDS:
        raise WasmtimeError("pau-sandbox: the guest handed over something other than a piece")
    raw = ctypes.string_at(words.data, _PIECE_WORDS * _VAL_SIZE)
    if raw[::_VAL_SIZE] != _PIECE_KINDS:
        raise WasmtimeError("pau-sandbox: the guest handed over something other than a piece")
    return _PIECE_PACK(*memoryview(raw).cast("Q")[_VAL_WORD :: _VAL_SIZE // 8])


def take_held(func: Func, context: Any, size: int, first: int = 0) -> bytes:
    """The bytes the guest holds from piece ``first`` to ``size``, through its ``take`` export, a piece at a time.

    Every piece is a tuple of 32 u64 words, so the guest can never make the
    host copy more than ``size`` bytes (rounded up to a piece): the caller
    decides from ``size`` alone whether to take anything at all.

    Raises:
        WasmtimeError: The guest trapped, or its ``take`` returned something other than a piece.
    """
    pieces = []
    index = ffi.wasmtime_component_val_t()
    index.kind = _U32
    result = ffi.wasmtime_component_val_t()
    for number in range(first, -(-size // PIECE_BYTES)):
        index.of.u32 = number
        error = ffi.wasmtime_component_func_call(
            ctypes.byref(func._func), context, ctypes.byref(index), 1, ctypes.byref(result), 1
        )
        if error:
            _raise_call_error(error)
        try:
            pieces.append(_piece(result))
        finally:
            ffi.wasmtime_component_val_delete(ctypes.byref(result))
    return b"".join(pieces)


_I32 = ffi.WASMTIME_I32
_I64_KIND = ffi.WASMTIME_I64.value
_THREE_VALUES = ffi.wasmtime_val_t * 3
_TRAP_POINTER = ctypes.POINTER(ffi.wasm_trap_t)


def call_core(func: Any, context: Any, first: int, second: int, third: int) -> int:
    """Call a core-module export of type ``(i32, i32, i32) -> i64`` (the lean engine's ``pau.call``).

    wasmtime-py's ``Func.__call__`` looks the function's type up and converts every value through its type
    objects on each call: tens of microseconds, a tenth of a lean call.

    Raises:
        Trap: The guest trapped (the message says why: fuel, the deadline, a bad access ...).
        WasmtimeError: wasmtime refused the call, or a host function it called failed.
    """
    params = _THREE_VALUES()
    for value, number in zip(params, (first, second, third), strict=True):
        value.kind = _I32
        value.of.i32 = number
    result = ffi.wasmtime_val_t()
    trap = _TRAP_POINTER()
    error = ffi.wasmtime_func_call(context, ctypes.byref(func._func), params, 3, ctypes.byref(result), 1,
                                   ctypes.byref(trap))  # fmt: skip
    if trap:
        failure = Trap._from_ptr(trap)
        maybe_raise_last_core_exn()
        raise failure
    if error:
        failure_error = WasmtimeError._from_ptr(error)
        maybe_raise_last_core_exn()
        raise failure_error
    kind: Any = result.kind  # an int at run time (ctypes converts the field)
    if kind != _I64_KIND:
        raise WasmtimeError("pau-sandbox: an export returned something other than an i64")
    return int(result.of.i64) & 0xFFFFFFFFFFFFFFFF


def set_global_i32(context: Any, glob: Any, value: int) -> None:
    """Set a core instance's mutable i32 global (the lean engine's stack pointer, after every call)."""
    raw = ffi.wasmtime_val_t()
    raw.kind = _I32
    raw.of.i32 = value
    error = ffi.wasmtime_global_set(context, ctypes.byref(glob._global), ctypes.byref(raw))
    if error:
        raise WasmtimeError._from_ptr(error)


def get_global_i32(context: Any, glob: Any) -> int:
    """A core instance's i32 global."""
    raw = ffi.wasmtime_val_t()
    ffi.wasmtime_global_get(context, ctypes.byref(glob._global), ctypes.byref(raw))
    return int(raw.of.i32)
